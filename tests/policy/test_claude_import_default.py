"""Claude Code users' own permission rules count by default (issue 38), and deny rules still win.

A real daemon reads Claude Code's user settings from CLAUDE_CONFIG_DIR (where Claude Code itself reads them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexusd import protocol as p
from tests.daemon.conftest import Raw

CLAUDE = {"permissions": {"allow": ["Bash(npm install *)"], "deny": ["Bash(npm install evil*)"]}}


def _decide(h, ws: Path, command: str) -> p.Decision:  # type: ignore[no-untyped-def]
    agent = Raw(h.socket)
    agent.hello()
    call = {"provider": "gemini", "session": "s", "tool": "Bash", "input": {"command": command}, "cwd": str(ws)}
    d = agent.ask({"type": "request", "call": call, "on_no_ui": "deny", "ref": "r"})
    agent.close()
    assert isinstance(d, p.Decision), d
    return d


@pytest.fixture
def claude_dir(tmp_path: Path) -> Path:
    d = tmp_path / "claude-config"
    d.mkdir()
    (d / "settings.json").write_text(json.dumps(CLAUDE))
    return d


def test_claude_allow_rules_apply_by_default_to_every_agent(daemon_factory, claude_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    h = daemon_factory(env={"CLAUDE_CONFIG_DIR": str(claude_dir)})
    d = _decide(h, tmp_path, "npm install left-pad")
    assert d.decision == "allow" and d.rule == "Bash(npm install *)", d
    d = _decide(h, tmp_path, "npm install evil-pkg")
    assert d.decision == "deny", d  # Claude's own deny beats its allow


def test_a_nexus_deny_beats_an_imported_allow(daemon_factory, claude_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    h = daemon_factory(
        policy='[permissions]\ndeny = ["Bash(npm install left-pad)"]\n', env={"CLAUDE_CONFIG_DIR": str(claude_dir)}
    )
    d = _decide(h, tmp_path, "npm install left-pad")
    assert d.decision == "deny" and d.rule == "Bash(npm install left-pad)", d


def test_import_settings_false_turns_it_off(daemon_factory, claude_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    h = daemon_factory(policy="[claude]\nimport_settings = false\n", env={"CLAUDE_CONFIG_DIR": str(claude_dir)})
    d = _decide(h, tmp_path, "npm install left-pad")
    assert d.decision == "deny" and d.rule != "Bash(npm install *)" and "no nexusd UI" in d.reason, d
