"""What each agent shows its person when nexusd refuses, through the real daemon and ``nexus-hook``.

Issue 38: under ``codex exec`` the deny read "mode dont_ask … never asks.." (a name Codex never uses, and a
period of ours before the one Codex adds), and nobody was told that an ask with no UI open is denied at once.
Every adapter's text is checked here: the fix (``nexus-tui``) is named, no internal mode name leaks where the
agent has its own, and no ".." appears, also after the agent's own wrapping.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DaemonHandle

HOOK = [sys.executable, "-m", "nexus_clients.hook"]
COMMAND = "npm install left-pad"  # asked by the default policy: needs a person


def _payload(provider: str, ws: Path, mode: str | None) -> dict[str, Any]:
    cwd = str(ws)
    if provider in ("claude", "codex"):
        d: dict[str, Any] = {
            "session_id": f"sess-{provider}",
            "transcript_path": "/nonexistent/x.jsonl",
            "cwd": cwd,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": COMMAND},
            "tool_use_id": "toolu_1",
        }
        if mode is not None:
            d["permission_mode"] = mode
        return d
    if provider == "gemini":
        return {
            "session_id": "sess-gem",
            "transcript_path": "/nonexistent/x.json",
            "cwd": cwd,
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-01-01T00:00:00Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": COMMAND},
        }
    if provider == "cursor":
        return {
            "hook_event_name": "beforeShellExecution",
            "conversation_id": "conv-1",
            "generation_id": "gen-1",
            "workspace_roots": [cwd],
            "command": COMMAND,
            "cwd": cwd,
        }
    if provider == "copilot":
        return {
            "sessionId": "sess-cp",
            "timestamp": 1704614600000,
            "cwd": cwd,
            "toolName": "bash",
            "toolArgs": json.dumps({"command": COMMAND}),
        }
    assert provider == "opencode"
    return {
        "hook_event_name": "tool.execute.before",
        "tool": "bash",
        "sessionID": "ses_1",
        "callID": "call_1",
        "args": {"command": COMMAND},
        "directory": cwd,
        "worktree": cwd,
    }


def _shown(provider: str, proc: subprocess.CompletedProcess[bytes]) -> str:
    """The text the agent shows, wrapped the way the agent wraps it where that is known."""
    if provider == "codex":
        assert proc.returncode == 2, proc
        # how Codex reports a blocked command to the model and the person
        return f"Command blocked by PreToolUse hook: {proc.stderr.decode().strip()}. Command: {COMMAND}"
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if provider == "claude":
        spec = out["hookSpecificOutput"]
        assert spec["permissionDecision"] == "deny", out
        return str(spec["permissionDecisionReason"])
    if provider == "gemini":
        assert out["decision"] == "deny", out
        return str(out["reason"])
    if provider == "cursor":
        assert out["permission"] == "deny", out
        return str(out["agent_message"])
    if provider == "copilot":
        assert out["permissionDecision"] == "deny", out
        return str(out["permissionDecisionReason"])
    assert out["decision"] == "deny", out
    return str(out["reason"])


def _run(handle: DaemonHandle, provider: str, ws: Path, mode: str | None = None) -> str:
    proc = subprocess.run(
        [*HOOK, provider, "--on-no-ui", "deny"],
        input=json.dumps(_payload(provider, ws, mode)).encode(),
        env=handle.env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return _shown(provider, proc)


@pytest.mark.parametrize("provider", ["claude", "gemini", "codex", "cursor", "copilot", "opencode"])
def test_an_ask_with_no_ui_says_it_was_denied_at_once_and_how_to_fix_it(
    daemon: DaemonHandle, provider: str, tmp_path: Path
) -> None:
    text = _run(daemon, provider, tmp_path)
    assert "no nexusd UI is connected" in text and "denied at once" in text, text
    assert "nexus-tui" in text, text
    assert ".." not in text, text


def test_codex_is_told_in_codex_terms(daemon: DaemonHandle, tmp_path: Path) -> None:
    """``codex exec`` reports approval_policy "never" as permission_mode bypassPermissions (nexusd: dont_ask)."""
    text = _run(daemon, "codex", tmp_path, mode="bypassPermissions")
    assert 'approval policy "never"' in text, text
    assert "dont_ask" not in text and "mode " not in text, text
    assert ".." not in text, text


@pytest.mark.parametrize(("mode", "shown"), [("dontAsk", "mode dontAsk"), ("default", "mode default")])
def test_claude_is_told_its_own_mode_names(daemon: DaemonHandle, tmp_path: Path, mode: str, shown: str) -> None:
    text = _run(daemon, "claude", tmp_path, mode=mode)
    assert shown in text and "dont_ask" not in text, text
    assert ".." not in text, text
