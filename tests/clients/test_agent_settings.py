"""Merging nexusd's entries into agents' settings: keep everything else, replace our own, reverse cleanly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from nexus_clients import agent_settings as s

THEIRS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "fmt"}]}],
    },
    "model": "opus",
}


def test_claude_install_keeps_everything_else_and_goes_first() -> None:
    out = s.claude_install(THEIRS, "/v/bin/nexus-hook claude --timeout 55")
    pre = out["hooks"]["PreToolUse"]
    assert pre[0] == {
        "matcher": "*",
        "hooks": [{"type": "command", "command": "/v/bin/nexus-hook claude --timeout 55", "timeout": 60}],
    }
    assert pre[1:] == THEIRS["hooks"]["PreToolUse"]
    assert out["hooks"]["PostToolUse"] == THEIRS["hooks"]["PostToolUse"]
    assert out["permissions"] == THEIRS["permissions"] and out["model"] == "opus"
    assert THEIRS["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "my-linter", "input not mutated"
    # the asks Claude Code would show itself, and the end of a session (its session grants end with it)
    for event in ("PermissionRequest", "SessionEnd"):
        assert out["hooks"][event][0]["hooks"][0]["command"] == "/v/bin/nexus-hook claude --timeout 55", event
    assert "onFailure" not in out["hooks"]["SessionEnd"][0]["hooks"][0]  # it gates nothing


def test_reinstall_replaces_and_uninstall_reverses() -> None:
    once = s.claude_install(THEIRS, "nexus-hook claude --timeout 55")
    twice = s.claude_install(once, "/new/nexus-hook claude --timeout 40")
    assert sum("nexus-hook" in h["command"] for g in twice["hooks"]["PreToolUse"] for h in g["hooks"]) == 1
    assert s.claude_uninstall(twice) == THEIRS
    assert s.claude_uninstall({}) == {}
    assert s.claude_uninstall(s.claude_install({}, "nexus-hook claude")) == {}


def test_uninstall_keeps_foreign_hooks_sharing_our_group() -> None:
    shared = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "*",
                    "hooks": [
                        {"type": "command", "command": "nexus-hook claude"},
                        {"type": "command", "command": "audit"},
                    ],
                }
            ]
        }
    }
    assert s.claude_uninstall(shared) == {
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "audit"}]}]}
    }


def test_gemini_install_and_uninstall() -> None:
    theirs = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "hooks": {"BeforeTool": []}}
    out = s.gemini_install(theirs, "nexus-hook gemini --timeout 55")
    entry = out["hooks"]["BeforeTool"][0]
    assert entry["matcher"] == ".*"
    assert entry["hooks"][0]["timeout"] == 60000 and entry["hooks"][0]["type"] == "command"
    assert out["security"] == theirs["security"]
    assert s.gemini_uninstall(out) == {"security": theirs["security"]}


def test_mcp_entries() -> None:
    theirs = {"mcpServers": {"github": {"command": "gh-mcp"}}, "numStartups": 4}
    out = s.mcp_install(theirs, "/v/bin/nexus-mcp")
    assert out["mcpServers"]["nexus"] == {"type": "stdio", "command": "/v/bin/nexus-mcp", "args": []}
    assert out["mcpServers"]["github"] == {"command": "gh-mcp"} and out["numStartups"] == 4
    assert s.mcp_uninstall(out) == theirs
    with pytest.raises(s.SettingsError):
        s.mcp_install({"mcpServers": {"nexus": {"command": "someone-elses"}}})


@pytest.mark.parametrize("bad", [{"hooks": []}, {"hooks": {"PreToolUse": {}}}, {"mcpServers": []}])
def test_unexpected_shapes_refused(bad: dict) -> None:
    with pytest.raises(s.SettingsError):
        s.claude_install(bad, "nexus-hook claude") if "hooks" in bad else s.mcp_install(bad)


def test_hook_command_is_quoted_and_absolute() -> None:
    assert s.hook_command("claude", 55, "/opt/my tools/nexus-hook") == "'/opt/my tools/nexus-hook' claude --timeout 55"
    assert os.path.isabs(s.hook_command("gemini").split()[0].strip("'")) or "nexus-hook" in s.hook_command("gemini")


def test_plan_apply_backup_and_mode(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps(THEIRS, indent=2) + "\n"
    path.write_text(original)
    path.chmod(0o640)
    change = s.plan(path, lambda d: s.claude_install(d, "nexus-hook claude"))
    assert change.changed and "+" in change.diff() and "nexus-hook" in change.diff()
    assert path.read_text() == original, "planning writes nothing"
    backup = s.apply(change)
    assert backup is not None and backup.read_text() == original
    assert (path.stat().st_mode & 0o777) == 0o640
    assert json.loads(path.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "nexus-hook claude"
    # Reversing restores the content exactly (the original was in our formatting).
    s.apply(s.plan(path, s.claude_uninstall))
    assert path.read_text() == original
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".settings.json.")], "no temp files left"


def test_missing_file_created_private_and_uninstall_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "proj" / ".gemini" / "settings.json"
    assert not s.plan(path, s.gemini_uninstall).changed
    change = s.plan(path, lambda d: s.gemini_install(d, "nexus-hook gemini"))
    assert change.old_text is None and change.diff().startswith("--- /dev/null")
    assert s.apply(change) is None
    assert (path.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"x"'])
def test_unparseable_file_never_touched(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(s.SettingsError):
        s.plan(path, lambda d: s.claude_install(d, "nexus-hook claude"))
    assert path.read_text() == text


def test_gemini_rejects_mcp(tmp_path: Path) -> None:
    with pytest.raises(s.SettingsError):
        s.install_changes("gemini", project=tmp_path, mcp=True)


@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_round_trips_leave_nothing_behind(tmp_path: Path, agent: str) -> None:
    """Issue "first hour": uninstall left {} where there was no file, and backups piled up without bound.
    Now: no file before -> no file after; a file in the user's own formatting comes back byte-identical."""
    home = tmp_path / "home"
    path = s.settings_path(agent, None, home)  # type: ignore[arg-type]
    for _ in range(2):
        for change in s.install_changes(agent, project=None, mcp=False, home=home):  # type: ignore[arg-type]
            s.apply(change)
        assert path.exists()
        for change in s.uninstall_changes(agent, project=None, home=home):  # type: ignore[arg-type]
            s.apply(change)
        assert not path.exists()
    odd = '{"theme":"dark",   "model": "x",\n "permissions": {"allow": ["Bash(ls)"]}}\n'
    path.write_text(odd)
    for _ in range(s.KEEP_BACKUPS + 4):
        for change in s.install_changes(agent, project=None, mcp=False, home=home):  # type: ignore[arg-type]
            s.apply(change)
        for change in s.uninstall_changes(agent, project=None, home=home):  # type: ignore[arg-type]
            s.apply(change)
        assert path.read_text() == odd
    backups = [p for p in path.parent.iterdir() if ".nexus-backup-" in p.name]
    assert 0 < len(backups) <= s.KEEP_BACKUPS
