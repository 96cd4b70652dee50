"""``nexusctl install|uninstall claude|gemini`` through click, on a throwaway HOME and project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexusd.cli.ctl import main


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"HOME": str(home)}, catch_exceptions=False)
    return result.exit_code, result.output


def test_user_install_dry_run_then_real_then_uninstall(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"model": "opus"}, indent=2) + "\n")
    code, out = run(home, "install", "claude", "--dry-run")
    assert code == 0 and "nexus-hook" in out and "Dry run" in out
    assert json.loads(settings.read_text()) == {"model": "opus"}
    code, out = run(home, "install", "claude", "--user")
    assert code == 0 and "backup" in out
    data = json.loads(settings.read_text())
    assert data["model"] == "opus"
    command = data["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert "nexus-hook" in command and command.endswith("claude --timeout 55")
    again = run(home, "install", "claude")[1].strip().splitlines()
    note = again[again.index("Nothing to change.") + 1]  # (then the no-daemon warning, on stderr)
    # it says what the agent's shell calls get here: sandbox-first where the sandbox works, else gate-only
    assert note.startswith(("Sandbox-first: ", "No working sandbox here")), note
    assert "[sandbox] enabled = false" in note or "gate-only" in note
    code, out = run(home, "uninstall", "claude")
    assert code == 0 and json.loads(settings.read_text()) == {"model": "opus"}


def test_project_install_with_mcp(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    code, out = run(home, "install", "claude", "--project", str(project), "--mcp")
    assert code == 0, out
    assert "--permission-prompt-tool mcp__nexus__permission_prompt" in out
    mcp = json.loads((project / ".mcp.json").read_text())
    assert "nexus-mcp" in mcp["mcpServers"]["nexus"]["command"]
    assert (project / ".claude" / "settings.json").exists()
    assert not (home / ".claude").exists(), "a project install leaves the user's settings alone"
    code, _ = run(home, "uninstall", "claude", "--project", str(project))
    assert code == 0
    # neither file existed before the install, so none is left behind (was: two files holding {})
    assert not (project / ".mcp.json").exists()
    assert not (project / ".claude" / "settings.json").exists()


def test_gemini_install_and_errors(home: Path) -> None:
    code, _ = run(home, "install", "gemini", "--timeout", "30")
    assert code == 0
    hook = json.loads((home / ".gemini" / "settings.json").read_text())["hooks"]["BeforeTool"][0]["hooks"][0]
    assert hook["command"].endswith("gemini --timeout 30") and hook["timeout"] == 60000
    assert run(home, "install", "gemini", "--mcp")[0] != 0
    assert run(home, "install", "claude", "--timeout", "60")[0] != 0, "the hook must finish before the agent's timeout"
    bad = home / ".claude" / "settings.json"
    bad.parent.mkdir()
    bad.write_text("{broken")
    code, out = run(home, "install", "claude")
    assert code != 0 and "not valid JSON" in out and bad.read_text() == "{broken"
