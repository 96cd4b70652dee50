"""``nexusctl install|uninstall`` as a new user meets it (issue 38): the user's file kept as written apart from
our entries (Gemini's comments, Claude's indentation), "created" vs "updated", nothing of ours left behind by an
uninstall, and a warning (with the way forward) when no daemon runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from nexus_clients import jsonc

from nexusd.cli.ctl import main

GEMINI_JSONC = """{
  // my theme, chosen with care
  "theme": "GitHub",
  /* tools I trust */
  "tools": {
    "allowed": ["run_shell_command(git status)",],  // trailing comma: Gemini CLI accepts it
  },
}
"""

CLAUDE_4 = """{
    "model": "opus",
    "permissions": {
        "allow": [
            "Bash(git status)"
        ]
    },
    "env": {"A": "1", "B": "2"}
}
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def run(home: Path, *args: str, socket: str | None = None) -> tuple[int, str, str]:
    env = {"HOME": str(home), "NEXUS_SOCKET": socket or str(home / "no-daemon.sock"), "CODEX_HOME": ""}
    r = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_gemini_settings_with_comments_are_accepted_kept_and_restored(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(GEMINI_JSONC)
    code, out, err = run(home, "install", "gemini")
    assert code == 0, out + err
    text = path.read_text()
    for line in GEMINI_JSONC.splitlines()[:-1]:  # every line of the person's, comments included, is still there
        assert line in text, (line, text)
    data = jsonc.loads(text)
    assert data["theme"] == "GitHub" and "nexus-hook" in json.dumps(data["hooks"])
    assert f"{path}: updated" in out
    code, out, _ = run(home, "uninstall", "gemini")
    assert code == 0 and path.read_text() == GEMINI_JSONC  # byte for byte, comments and all
    assert not list(path.parent.glob("settings.json.nexus-backup-*")), "uninstall leaves no backups of ours"
    assert "backups of ours removed" in out or "backup of ours removed" in out, out


def test_claude_install_keeps_the_files_indentation_and_order(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(CLAUDE_4)
    code, out, err = run(home, "install", "claude", "--claude-version", "2.1.300")
    assert code == 0, out + err
    text = path.read_text()
    old_lines = CLAUDE_4.splitlines()
    new_lines = text.splitlines()
    # only additions: every original line is kept, in order, and the new ones are indented by 4 like the rest
    it = iter(new_lines)
    assert all(any(line.rstrip(",") == n.rstrip(",") for n in it) for line in old_lines), text
    assert '    "hooks": {' in new_lines and '        "PreToolUse": [' in new_lines, text
    assert list(jsonc.loads(text))[:3] == ["model", "permissions", "env"]
    code, _, _ = run(home, "uninstall", "claude")
    assert code == 0 and path.read_text() == CLAUDE_4


@pytest.mark.parametrize("agent", ["gemini", "claude", "cursor", "codex"])
def test_created_then_updated_then_uninstall_leaves_nothing(home: Path, agent: str) -> None:
    code, out, err = (
        run(home, "install", agent, "--claude-version", "2.1.300") if agent == "claude" else run(home, "install", agent)
    )
    assert code == 0, out + err
    created = [line for line in out.splitlines() if line.endswith(": created")]
    assert created, out
    path = Path(created[0].rsplit(": ", 1)[0])
    assert path.exists() and ": updated" not in out
    code, out, _ = run(home, "install", agent, "--timeout", "30")
    assert code == 0 and f"{path}: updated" in out, out
    code, out, _ = run(home, "uninstall", agent)
    assert code == 0 and f"{path}: removed" in out, out
    assert not path.exists()
    assert not path.parent.exists(), f"the empty {path.parent} the install created is left behind"
    assert list(home.iterdir()) == [], list(home.rglob("*"))


def test_install_with_no_daemon_warns_and_offers_the_service(home: Path) -> None:
    code, _out, err = run(home, "install", "gemini")
    assert code == 0
    assert "nexusd is not running" in err and "denied every tool call, even `ls`" in err, err
    assert "nexusctl service install" in err and "scripts/run-daemon" in err


def test_install_with_a_daemon_running_says_nothing_of_it(home: Path, daemon) -> None:  # type: ignore[no-untyped-def]
    code, _out, err = run(home, "install", "gemini", socket=str(daemon.socket))
    assert code == 0 and "not running" not in err, err


def test_install_claude_says_its_permission_rules_count(home: Path) -> None:
    code, out, _ = run(home, "install", "claude", "--claude-version", "2.1.300")
    assert code == 0 and "import_settings = false" in out and "deny rules first" in out, out


def test_jsonc_edits_touch_only_what_changed() -> None:
    text = '{\n\t"a": 1, // one\n\t"b": [1, 2, 3],\n\t"c": {"x": true}\n}\n'
    new = {"a": 1, "b": [1, 3, 4], "c": {"x": True, "y": None}, "d": "new"}
    out = jsonc.edit(text, new)
    assert jsonc.loads(out) == new
    assert "// one" in out and '\t"d": "new"' in out
    assert jsonc.edit(out, jsonc.loads(text)) != ""  # and back again parses
    assert jsonc.loads(jsonc.edit(out, jsonc.loads(text))) == jsonc.loads(text)


@pytest.mark.parametrize("bad", ["{", '{"a": 1 /* open', '{"a": 1}}', "{'a': 1}", '{"a": 1, "a": 2}'])
def test_jsonc_refuses_what_is_not_json(bad: str) -> None:
    with pytest.raises(ValueError):
        jsonc.loads(bad)
