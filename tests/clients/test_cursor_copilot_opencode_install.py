"""``nexusctl install|uninstall cursor|copilot|opencode``: merge into the user's files, back up, ``--dry-run``,
and round trips that leave every file byte-identical (or absent, when it was absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from nexus_clients import agent_settings as s

from nexusd.cli.ctl import main

AGENTS = ("cursor", "copilot", "opencode")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def run(home: Path, *args: str) -> tuple[int, str]:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "COPILOT_HOME": None}
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def target(agent: str, home: Path, project: Path | None = None) -> Path:
    if agent == "opencode":
        return s.opencode_plugin_path(project, home)
    return s.settings_path(agent, project, home)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the files each agent reads


def test_where_each_agent_reads_its_hooks(home: Path, tmp_path: Path) -> None:
    assert target("cursor", home) == home / ".cursor" / "hooks.json"
    assert target("cursor", home, tmp_path) == tmp_path / ".cursor" / "hooks.json"
    assert target("copilot", home) == home / ".copilot" / "hooks" / "nexusd.json"
    assert target("copilot", home, tmp_path) == tmp_path / ".github" / "hooks" / "nexusd.json"
    assert target("opencode", home) == home / ".config" / "opencode" / "plugins" / "nexusd.js"
    assert target("opencode", home, tmp_path) == tmp_path / ".opencode" / "plugins" / "nexusd.js"


def test_cursor_entries_follow_cursors_documented_shape() -> None:
    out = s.cursor_install({}, "/venv/bin/nexus-hook cursor --timeout 55")
    assert out["version"] == 1
    for event in ("beforeShellExecution", "beforeMCPExecution", "beforeReadFile"):
        assert out["hooks"][event] == [
            {"command": "/venv/bin/nexus-hook cursor --timeout 55", "timeout": 60, "failClosed": True}
        ]


def test_copilot_entry_follows_the_documented_shape() -> None:
    out = s.copilot_install({}, "/venv/bin/nexus-hook copilot --timeout 55")
    assert out == {
        "version": 1,
        "hooks": {
            "preToolUse": [{"type": "command", "bash": "/venv/bin/nexus-hook copilot --timeout 55", "timeoutSec": 60}]
        },
    }


def test_merge_keeps_foreign_hooks_and_reinstall_replaces() -> None:
    mine = {
        "version": 1,
        "hooks": {"beforeShellExecution": [{"command": "./audit.sh"}], "afterFileEdit": [{"command": "./fmt.sh"}]},
        "extra": True,
    }
    once = s.cursor_install(mine, "nexus-hook cursor --timeout 55")
    twice = s.cursor_install(once, "nexus-hook cursor --timeout 30")
    shell = twice["hooks"]["beforeShellExecution"]
    assert len(shell) == 2 and "--timeout 30" in shell[0]["command"] and shell[1] == {"command": "./audit.sh"}
    assert twice["hooks"]["afterFileEdit"] == [{"command": "./fmt.sh"}] and twice["extra"] is True
    assert s.cursor_uninstall(twice) == mine


@pytest.mark.parametrize("bad", [{"hooks": []}, {"hooks": {"beforeShellExecution": {}}}, {"version": 2}])
def test_unexpected_shapes_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(s.SettingsError):
        s.cursor_install(bad, "nexus-hook cursor")


# --------------------------------------------------------------------------- through nexusctl


@pytest.mark.parametrize("agent", AGENTS)
def test_dry_run_writes_nothing(home: Path, agent: str) -> None:
    code, out = run(home, "install", agent, "--dry-run")
    assert code == 0 and "Dry run" in out and "nexus-hook" in out
    assert not target(agent, home).exists()


@pytest.mark.parametrize("agent", AGENTS)
def test_round_trip_from_nothing_leaves_nothing(home: Path, agent: str) -> None:
    path = target(agent, home)
    for _ in range(2):
        assert run(home, "install", agent)[0] == 0
        text = path.read_text().replace('", "', " ")
        assert path.is_file() and "nexus-hook" in text and f"{agent} --timeout" in text
        assert run(home, "uninstall", agent)[0] == 0
        assert not path.exists()


@pytest.mark.parametrize("agent", ["cursor", "copilot"])
def test_round_trip_keeps_a_users_file_byte_identical(home: Path, tmp_path: Path, agent: str) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    path = target(agent, home, project)
    path.parent.mkdir(parents=True)
    event = "beforeShellExecution" if agent == "cursor" else "preToolUse"
    odd = '{ "version":1,\n  "hooks": {"EVENT": [ {"command":"./mine.sh"} ]} }\n'.replace("EVENT", event)
    path.write_text(odd)
    for _ in range(s.KEEP_BACKUPS + 2):
        assert run(home, "install", agent, "--project", str(project))[0] == 0
        data = json.loads(path.read_text())
        assert len(data["hooks"][event]) == 2
        assert run(home, "uninstall", agent, "--project", str(project))[0] == 0
        assert path.read_text() == odd
    lone = '{"version": 1}\n'
    path.write_text(lone)
    run(home, "install", agent, "--project", str(project))
    run(home, "uninstall", agent, "--project", str(project))
    assert path.read_text() == lone


def test_opencode_plugin_names_the_hook_and_refuses_a_foreign_file(home: Path) -> None:
    path = target("opencode", home)
    assert run(home, "install", "opencode", "--timeout", "30")[0] == 0
    text = path.read_text()
    assert s.OPENCODE_MARK in text and '"opencode", "--timeout", "30"' in text and "33000" in text
    assert "__NEXUS_" not in text
    path.write_text("// someone else's plugin\n")
    code, out = run(home, "install", "opencode")
    assert code != 0 and "not nexusd's plugin" in out
    code, out = run(home, "uninstall", "opencode")
    assert code != 0 and path.read_text() == "// someone else's plugin\n"


def test_user_opencode_dir_follows_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert s.opencode_plugin_path(None) == tmp_path / "xdg" / "opencode" / "plugins" / "nexusd.js"
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "cp"))
    assert s.settings_path("copilot", None) == tmp_path / "cp" / "hooks" / "nexusd.json"


def test_mcp_flag_is_claude_only(home: Path) -> None:
    code, out = run(home, "install", "cursor", "--mcp")
    assert code != 0 and "--mcp" in out
