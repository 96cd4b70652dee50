"""``nexus-hook copilot``: contract tests against the JSON GitHub's Copilot hooks reference specifies
(docs.github.com/en/copilot/reference/hooks-reference: ``preToolUse`` input ``{sessionId, timestamp, cwd,
toolName, toolArgs}``, the VS Code-compatible ``PreToolUse`` input, the output ``{permissionDecision,
permissionDecisionReason, modifiedArgs}``; a non-zero exit denies).

These feed the documented payloads (both input shapes, JSON-text arguments, malformed ones) to the real
``nexus-hook`` against the real daemon; the real Copilot CLI runs end to end in BYOK offline mode in
tests/e2e/test_e2e_copilot.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nexus_clients import copilot
from nexus_clients.claude import HookInputError
from nexus_clients.wire_lean import LeanDecision

from tests.clients import test_hook
from tests.clients.test_hook import no_daemon_env, run_hook
from tests.conftest import DaemonHandle

fake_server = test_hook.fake_server  # the misbehaving-daemon fixture

POLICY = """
[permissions]
deny = ["Bash(rm *)", "Read(**/.env)"]
allow = ["Bash(git status)", "Edit"]
"""


def pre(tool: str, args: Any, cwd: str = "/work/proj") -> dict[str, Any]:
    return {"sessionId": "sess-cp", "timestamp": 1704614600000, "cwd": cwd, "toolName": tool, "toolArgs": args}


def vscode(tool: str, args: Any) -> dict[str, Any]:
    return {
        "hook_event_name": "PreToolUse",
        "session_id": "sess-vs",
        "timestamp": "2026-01-01T00:00:00Z",
        "cwd": "/work/proj",
        "tool_name": tool,
        "tool_input": args,
    }


def decision(kind: str, **kw: Any) -> LeanDecision:
    return LeanDecision({"decision": kind, "reason": kw.pop("reason", "because"), "source": "rule", **kw})


def test_both_documented_input_shapes_map_to_the_same_call() -> None:
    a = copilot.call_fields_from_hook(
        pre("bash", {"command": "ls", "description": "list"}), env={}, agent_pid=3, fallback_cwd="/"
    )
    assert a == {
        "provider": "copilot",
        "session": "sess-cp",
        "tool": "bash",
        "input": {"command": "ls", "description": "list"},
        "cwd": "/work/proj",
        "agent_pid": 3,
        "workspace": "/work/proj",
    }
    b = copilot.call_fields_from_hook(
        vscode("bash", {"command": "ls", "description": "list"}), env={}, agent_pid=3, fallback_cwd="/"
    )
    assert {k: v for k, v in b.items() if k != "session"} == {k: v for k, v in a.items() if k != "session"}


def test_tool_args_as_json_text_and_relative_paths() -> None:
    call = copilot.call_fields_from_hook(
        pre("view", '{"path": "src/../README.md"}'), env={}, agent_pid=None, fallback_cwd="/"
    )
    assert call["input"] == {"path": "/work/proj/README.md"}
    home = copilot.call_fields_from_hook(
        pre("view", {"path": "~/.ssh/id_rsa"}), env={}, agent_pid=None, fallback_cwd="/"
    )
    assert home["input"]["path"] == "~/.ssh/id_rsa"  # the engine expands ~ itself


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "x",
        {},
        pre("", {}),
        pre("bash", "{oops"),
        pre("bash", [1, 2]),
        pre("bash", {}, cwd="rel"),
        {k: v for k, v in pre("bash", {}).items() if k != "sessionId"},
        vscode("bash", {}) | {"hook_event_name": "Stop"},
    ],
)
def test_malformed_input_is_refused(bad: Any) -> None:
    with pytest.raises(HookInputError):
        copilot.call_fields_from_hook(bad, env={}, agent_pid=None, fallback_cwd="/")


def test_answers() -> None:
    assert copilot.answer(decision("allow"), ask_allowed=False)["permissionDecision"] == "allow"
    out = copilot.answer(decision("deny", rule="Bash(rm *)", message="use git clean"), ask_allowed=False)
    assert out["permissionDecision"] == "deny" and "Bash(rm *)" in out["permissionDecisionReason"]
    assert "use git clean" in out["permissionDecisionReason"]
    assert copilot.answer(decision("ask"), ask_allowed=False)["permissionDecision"] == "deny"
    assert copilot.answer(decision("ask"), ask_allowed=True)["permissionDecision"] == "ask"
    wrapped = copilot.answer(decision("allow", updated_input={"command": "nexus-sandbox ls"}), ask_allowed=False)
    assert wrapped["modifiedArgs"] == {"command": "nexus-sandbox ls"}


def out(proc: Any) -> dict[str, Any]:
    return json.loads(proc.stdout)


def test_rules_written_once_hold_for_copilots_tools(daemon_factory: Any) -> None:
    daemon: DaemonHandle = daemon_factory(policy=POLICY)
    proc = run_hook(["copilot"], pre("bash", {"command": "rm -rf build"}), daemon.env)
    assert proc.returncode == 0 and out(proc)["permissionDecision"] == "deny", proc.stderr
    assert "Bash(rm *)" in out(proc)["permissionDecisionReason"]
    status = run_hook(["copilot"], pre("bash", {"command": "git status"}), daemon.env)
    assert out(status)["permissionDecision"] == "allow"
    edit = pre("edit", {"path": "/work/proj/a.py", "old_str": "a", "new_str": "b"})
    assert out(run_hook(["copilot"], edit, daemon.env))["permissionDecision"] == "allow"
    env_read = pre("view", {"path": "/work/proj/.env"})
    assert out(run_hook(["copilot"], env_read, daemon.env))["permissionDecision"] == "deny"


def test_no_ui_denies_or_asks_where_configured(daemon: DaemonHandle) -> None:
    call = pre("bash", {"command": "mkdir -p build"})
    assert out(run_hook(["copilot"], call, daemon.env))["permissionDecision"] == "deny"
    assert out(run_hook(["copilot", "--on-no-ui", "ask"], call, daemon.env))["permissionDecision"] == "ask"


@pytest.mark.parametrize(
    "path",
    [
        ".github/hooks/nexusd.json",
        ".github/copilot/settings.json",
        ".GITHUB/HOOKS/x.json",
        "~/.copilot/hooks/x.json",
        "~/.copilot/config.json",
    ],
)
def test_copilots_hook_and_settings_files_are_protected(daemon_factory: Any, path: str) -> None:
    daemon: DaemonHandle = daemon_factory(policy='[permissions]\nallow = ["Edit", "Write"]\n')
    ok = pre("create", {"path": "/work/proj/notes.md", "file_text": "x"})
    assert out(run_hook(["copilot"], ok, daemon.env))["permissionDecision"] == "allow"
    bad = pre("create", {"path": path, "file_text": '{"version": 1, "hooks": {}}'})
    assert out(run_hook(["copilot"], bad, daemon.env))["permissionDecision"] == "deny", path


@pytest.mark.parametrize("stdin", [b"", b"nope", b"[]", b'{"toolName": "bash"}', b'{"x": Infinity}'])
def test_bad_stdin_exits_2(stdin: bytes) -> None:
    proc = run_hook(["copilot"], stdin, no_daemon_env())
    assert proc.returncode == 2 and b"nexusd denied" in proc.stderr
    assert out(proc)["permissionDecision"] == "deny"


def test_daemon_down_exits_2_with_a_deny() -> None:
    proc = run_hook(["copilot"], pre("bash", {"command": "ls"}), no_daemon_env())
    assert proc.returncode == 2 and "not reachable" in out(proc)["permissionDecisionReason"]


@pytest.mark.parametrize("fake_server", ["garbage", "close", "error"], indirect=True)
def test_bad_peer_denies(fake_server: dict[str, str]) -> None:
    proc = run_hook(["copilot"], pre("bash", {"command": "ls"}), fake_server)
    assert proc.returncode == 2 and out(proc)["permissionDecision"] == "deny"


def test_with_the_sandbox_on_copilots_bash_runs_wrapped(daemon_factory: Any, tmp_path: Path) -> None:
    """Copilot takes ``modifiedArgs``: an allowed bash call comes back as the sandbox-wrapped command (planned
    by the deciding daemon for a real workspace)."""
    daemon: DaemonHandle = daemon_factory(policy='[permissions]\nallow = ["Bash(ls *)"]\n[sandbox]\nenabled = true\n')
    proc = run_hook(
        ["copilot"], pre("bash", {"command": "ls -la", "description": "list"}, cwd=str(tmp_path)), daemon.env
    )
    answer = out(proc)
    assert answer["permissionDecision"] == "allow", answer
    assert answer["modifiedArgs"]["command"] != "ls -la" and "ls -la" in answer["modifiedArgs"]["command"]
    assert answer["modifiedArgs"]["description"] == "list"
