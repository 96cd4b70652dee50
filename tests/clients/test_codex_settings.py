"""``nexusctl install codex``: merge into config.toml keeping comments, trust our hooks, reverse byte-for-byte."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit
from click.testing import CliRunner
from nexus_clients import agent_settings as s
from nexus_clients import codex_settings as cs

from nexusd.cli.ctl import main as nexusctl

THEIRS = """# my codex config
model = "o3"  # keep me
approval_policy = "on-request"

[[hooks.PreToolUse]]
matcher = "^Bash$"
# the linter runs first
[[hooks.PreToolUse.hooks]]
type = "command"
command = "my-linter"

[[hooks.PreToolUse]]
[[hooks.PreToolUse.hooks]]
type = "command"
command = "my-auditor"
"""


def config(home: Path, text: str | None) -> Path:
    path = home / ".codex" / "config.toml"
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def trusted(path: Path, text: str) -> dict[str, str]:
    doc = tomlkit.parse(text).unwrap()
    return {k: v["trusted_hash"] for k, v in doc.get("hooks", {}).get("state", {}).items()}


def test_hash_is_the_one_the_real_codex_accepted() -> None:
    """Pinned from a run of codex-cli 0.169.0 that executed this exact hook without a bypass flag (the e2e
    tests re-check the whole path against the real CLI)."""
    handler = {"type": "command", "command": "/work/wt/codex/.venv/bin/nexus-hook codex --timeout 55", "timeout": 60}
    assert cs.handler_hash("PreToolUse", {}, handler) == (
        "sha256:6c733bf610d83886a3c4ceb272adb5ec79d9a31b94581ef89a27c3914399ba01"
    )
    assert cs.handler_hash("PermissionRequest", {}, handler) == (
        "sha256:e08eb6ef06083dba9385044d5441adfbf55266c75e9a67f831db6ce3c69f0e7e"
    )
    # the definition is what is trusted: another command, matcher or timeout is another hash
    assert cs.handler_hash("PreToolUse", {"matcher": "*"}, handler) != cs.handler_hash("PreToolUse", {}, handler)
    assert cs.handler_hash("PreToolUse", {}, {**handler, "timeout": 61}) != cs.handler_hash("PreToolUse", {}, handler)


def test_install_appends_after_theirs_keeps_comments_and_trusts_ours(tmp_path: Path) -> None:
    path = config(tmp_path, THEIRS)
    [change] = s.install_changes("codex", project=None, mcp=False, home=tmp_path)
    new = change.new_text or ""
    assert new.startswith(THEIRS.rstrip("\n")), "the user's text, comments included, is kept as it was"
    doc = tomlkit.parse(new).unwrap()
    pre = doc["hooks"]["PreToolUse"]
    assert [g["hooks"][0]["command"] for g in pre[:2]] == ["my-linter", "my-auditor"]
    ours = pre[2]["hooks"][0]
    assert "nexus-hook" in ours["command"] and ours["command"].endswith(" codex --timeout 55 || exit 2")
    assert ours["timeout"] == 60 and "matcher" not in pre[2]
    assert doc["hooks"]["PermissionRequest"][0]["hooks"][0] == ours
    assert trusted(path, new) == {
        f"{path}:pre_tool_use:2:0": cs.handler_hash("PreToolUse", {}, ours),
        f"{path}:permission_request:0:0": cs.handler_hash("PermissionRequest", {}, ours),
    }


def test_round_trip_is_byte_identical_and_reinstall_is_a_no_op(tmp_path: Path) -> None:
    path = config(tmp_path, THEIRS)
    s.apply(s.install_changes("codex", project=None, mcp=False, home=tmp_path)[0])
    again = s.install_changes("codex", project=None, mcp=False, home=tmp_path)[0]
    assert not again.changed
    s.apply(s.uninstall_changes("codex", project=None, home=tmp_path)[0])
    assert path.read_text() == THEIRS


def test_install_into_no_file_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    path = config(tmp_path, None)
    s.apply(s.install_changes("codex", project=None, mcp=False, home=tmp_path)[0])
    assert path.exists() and oct(path.stat().st_mode & 0o777) == "0o600"
    s.apply(s.uninstall_changes("codex", project=None, home=tmp_path)[0])
    assert not path.exists()


def test_uninstall_rekeys_the_trust_of_hooks_after_ours(tmp_path: Path) -> None:
    """A hook the person added after installing (and trusted with /hooks) moves up when ours goes: its
    trust entry must move with it, or Codex would silently skip it."""
    path = config(tmp_path, "")
    s.apply(s.install_changes("codex", project=None, mcp=False, home=tmp_path)[0])
    doc = tomlkit.parse(path.read_text())
    later = {"matcher": "Bash", "hooks": [{"type": "command", "command": "added-later"}]}
    doc["hooks"]["PreToolUse"].append(later)
    doc["hooks"]["state"][f"{path}:pre_tool_use:1:0"] = {"trusted_hash": "sha256:theirs", "enabled": True}
    path.write_text(tomlkit.dumps(doc))
    s.apply(s.uninstall_changes("codex", project=None, home=tmp_path)[0])
    out = tomlkit.parse(path.read_text()).unwrap()
    assert out["hooks"]["PreToolUse"] == [later] and "PermissionRequest" not in out["hooks"]
    assert out["hooks"]["state"] == {f"{path}:pre_tool_use:0:0": {"trusted_hash": "sha256:theirs", "enabled": True}}


def test_handler_of_ours_in_a_shared_group_is_removed_alone(tmp_path: Path) -> None:
    text = (
        '[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = "command"\ncommand = "nexus-hook codex"\n'
        '[[hooks.PreToolUse.hooks]]\ntype = "command"\ncommand = "audit"\n'
        f'[hooks.state."{tmp_path}/.codex/config.toml:pre_tool_use:0:1"]\ntrusted_hash = "sha256:audit"\n'
    )
    path = config(tmp_path, text)
    s.apply(s.uninstall_changes("codex", project=None, home=tmp_path)[0])
    out = tomlkit.parse(path.read_text()).unwrap()
    assert out["hooks"]["PreToolUse"] == [{"hooks": [{"type": "command", "command": "audit"}]}]
    assert out["hooks"]["state"] == {f"{path}:pre_tool_use:0:0": {"trusted_hash": "sha256:audit"}}


@pytest.mark.parametrize(
    "text", ["model = [unclosed", 'hooks = "not a table"\n', 'hooks.PreToolUse = "x"\n', "[hooks]\nstate = 3\n"]
)
def test_unparseable_or_unexpected_config_never_touched(tmp_path: Path, text: str) -> None:
    path = config(tmp_path, text)
    with pytest.raises(s.SettingsError):
        s.install_changes("codex", project=None, mcp=False, home=tmp_path)
    assert path.read_text() == text


def test_codex_home_and_project_paths(tmp_path: Path) -> None:
    assert cs.config_path(None, env={"CODEX_HOME": "/opt/cx"}) == Path("/opt/cx/config.toml")
    assert cs.config_path(None, home=tmp_path) == tmp_path / ".codex" / "config.toml"
    assert cs.config_path(tmp_path / "proj") == tmp_path / "proj" / ".codex" / "config.toml"
    with pytest.raises(s.SettingsError):
        s.install_changes("codex", project=None, mcp=True, home=tmp_path)


def test_cli_dry_run_writes_nothing_then_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    path = tmp_path / "cx" / "config.toml"
    r = CliRunner().invoke(nexusctl, ["install", "codex", "--dry-run"])
    assert r.exit_code == 0 and "[[hooks.PreToolUse]]" in r.output and not path.exists()
    r = CliRunner().invoke(nexusctl, ["install", "codex"])
    assert r.exit_code == 0 and "trusted_hash" in path.read_text()
    r = CliRunner().invoke(nexusctl, ["uninstall", "codex"])
    assert r.exit_code == 0 and not path.exists()


@pytest.mark.parametrize(
    ("shell", "wrapped"),
    [
        ("/bin/bash", True),
        ("/usr/bin/zsh", True),
        ("/usr/bin/fish", True),
        ("/bin/sh", True),
        ("/usr/bin/nu", False),
        ("/usr/bin/xonsh", False),
    ],
)
def test_fail_closed_wrapper_only_where_the_shell_parses_it(shell: str, wrapped: bool) -> None:
    command, warning = s.codex_hook_command("/v/bin/nexus-hook codex --timeout 55", shell)
    assert command.endswith(" || exit 2") is wrapped and (warning is None) is wrapped


def test_cli_warns_when_the_shell_cannot_take_the_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    monkeypatch.setenv("SHELL", "/usr/bin/nu")
    r = CliRunner().invoke(nexusctl, ["install", "codex"])
    assert r.exit_code == 0 and "lets the call through" in r.output
    assert "|| exit 2" not in (tmp_path / "cx" / "config.toml").read_text()


def test_inline_array_of_groups_keeps_its_style_and_round_trips(tmp_path: Path) -> None:
    text = '[hooks]\nPreToolUse = [{hooks = [{type = "command", command = "lint"}]}]  # mine\n'
    path = config(tmp_path, text)
    s.apply(s.install_changes("codex", project=None, mcp=False, home=tmp_path)[0])
    doc = tomlkit.parse(path.read_text()).unwrap()
    assert doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "lint"
    assert "nexus-hook" in doc["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
    assert f"{path}:pre_tool_use:1:0" in doc["hooks"]["state"]
    s.apply(s.uninstall_changes("codex", project=None, home=tmp_path)[0])
    assert path.read_text() == text


def test_hooks_as_an_inline_table_is_refused_cleanly(tmp_path: Path) -> None:
    text = 'hooks = {PreToolUse = [{hooks = [{type = "command", command = "lint"}]}]}\n'
    path = config(tmp_path, text)
    with pytest.raises(s.SettingsError, match="not touching it"):
        s.install_changes("codex", project=None, mcp=False, home=tmp_path)
    assert path.read_text() == text
