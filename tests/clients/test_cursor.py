"""``nexus-hook cursor``: contract tests against the JSON Cursor's hooks documentation specifies
(cursor.com/docs/agent/hooks: beforeShellExecution, beforeMCPExecution, beforeReadFile; answer
``{permission, user_message, agent_message}``).

Cursor itself cannot run here (a desktop editor that needs an account), so these feed the documented
payloads to the real ``nexus-hook`` process talking to the real daemon, and check the documented answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from nexus_clients import cursor
from nexus_clients.claude import HookInputError
from nexus_clients.wire_lean import LeanDecision

from tests.clients import test_hook
from tests.clients.test_hook import no_daemon_env, run_hook
from tests.conftest import DaemonHandle

fake_server = test_hook.fake_server  # the misbehaving-daemon fixture

POLICY = """
[permissions]
deny = ["Bash(rm *)", "Read(**/.env)"]
allow = ["Bash(git status)", "mcp__cursor__echo"]
"""


def payload(event: str, **fields: Any) -> dict[str, Any]:
    """The common fields every Cursor hook event carries, plus the event's own (as documented)."""
    base: dict[str, Any] = {
        "hook_event_name": event,
        "conversation_id": "conv-123",
        "generation_id": "gen-456",
        "workspace_roots": ["/work/proj"],
        "model": "gpt-4",
        "cursor_version": "2.0.77",
    }
    return base | fields


SHELL = payload("beforeShellExecution", command="npm install express", cwd="/work/proj")
MCP = payload(
    "beforeMCPExecution", tool_name="database_query", tool_input='{"query": "SELECT 1"}', command="npx mcp-server"
)
READ = payload(
    "beforeReadFile",
    file_path="/work/proj/secrets.env",
    content="API_KEY=...",
    attachments=[{"type": "file", "file_path": "/work/proj/.cursorrules"}],
)


def decision(kind: str, **kw: Any) -> LeanDecision:
    return LeanDecision({"decision": kind, "reason": kw.pop("reason", "because"), "source": "rule", **kw})


# --------------------------------------------------------------------------- mapping (pure)


def test_shell_maps_to_the_canonical_shell_tool() -> None:
    call = cursor.call_fields_from_hook(SHELL, env={}, agent_pid=7, fallback_cwd="/")
    assert call == {
        "provider": "cursor",
        "session": "conv-123",
        "tool": "Shell",
        "input": {"command": "npm install express"},
        "cwd": "/work/proj",
        "agent_pid": 7,
        "workspace": "/work/proj",
    }


def test_mcp_input_as_json_text_or_object_and_read_never_forwards_the_content() -> None:
    call = cursor.call_fields_from_hook(MCP, env={}, agent_pid=None, fallback_cwd="/")
    assert call["tool"] == "mcp__cursor__database_query" and call["input"] == {"query": "SELECT 1"}
    as_object = cursor.call_fields_from_hook(
        MCP | {"tool_input": {"query": "x"}}, env={}, agent_pid=None, fallback_cwd="/"
    )
    assert as_object["input"] == {"query": "x"}
    read = cursor.call_fields_from_hook(READ, env={}, agent_pid=None, fallback_cwd="/")
    assert read["tool"] == "Read" and read["input"] == {"file_path": "/work/proj/secrets.env"}
    assert "API_KEY" not in json.dumps(read)
    relative = cursor.call_fields_from_hook(
        READ | {"file_path": "sub/../a.txt"}, env={}, agent_pid=None, fallback_cwd="/"
    )
    assert relative["input"]["file_path"] == "/work/proj/a.txt"


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "x",
        {},
        payload("afterFileEdit"),
        payload("stop"),
        {k: v for k, v in SHELL.items() if k != "conversation_id"},
        SHELL | {"command": ""},
        SHELL | {"command": ["rm", "-rf"]},
        SHELL | {"cwd": "relative/dir"},
        MCP | {"tool_input": "{not json"},
        MCP | {"tool_input": "[1]"},
        MCP | {"tool_name": None},
        READ | {"file_path": 3},
    ],
)
def test_malformed_input_is_refused(bad: Any) -> None:
    with pytest.raises(HookInputError):
        cursor.call_fields_from_hook(bad, env={}, agent_pid=None, fallback_cwd="/")


def test_answers_in_cursors_shape() -> None:
    assert cursor.answer(cursor.SHELL, decision("allow"), ask_allowed=False)["permission"] == "allow"
    out = cursor.answer(cursor.SHELL, decision("deny", rule="Bash(rm *)"), ask_allowed=False)
    assert out["permission"] == "deny" and "Bash(rm *)" in out["agent_message"] and out["user_message"]
    assert cursor.answer(cursor.MCP, decision("ask"), ask_allowed=False)["permission"] == "deny"
    assert cursor.answer(cursor.MCP, decision("ask"), ask_allowed=True)["permission"] == "ask"
    # beforeReadFile knows only allow and deny, and only the permission field
    assert cursor.answer(cursor.READ, decision("ask"), ask_allowed=True) == {"permission": "deny"}
    assert cursor.answer(cursor.READ, decision("allow"), ask_allowed=False) == {"permission": "allow"}


def test_an_allow_that_needs_a_rewrite_is_a_deny() -> None:
    """nexusd allows some shell calls only sandboxed (a rewritten command); Cursor cannot run a rewrite."""
    out = cursor.answer(cursor.SHELL, decision("allow", updated_input={"command": "sandboxed"}), ask_allowed=False)
    assert out["permission"] == "deny" and "rewrit" in out["agent_message"]


# --------------------------------------------------------------------------- the hook process


def answer_of(proc: Any) -> dict[str, Any]:
    return json.loads(proc.stdout)


def test_rules_written_for_bash_hold_for_cursors_shell(daemon_factory: Any) -> None:
    daemon: DaemonHandle = daemon_factory(policy=POLICY)
    proc = run_hook(["cursor"], SHELL | {"command": "rm -rf /work/proj/src"}, daemon.env)
    assert proc.returncode == 0 and answer_of(proc)["permission"] == "deny", proc.stderr
    assert "Bash(rm *)" in answer_of(proc)["agent_message"]
    proc = run_hook(["cursor"], SHELL | {"command": "git status"}, daemon.env)
    assert answer_of(proc)["permission"] == "allow", proc.stdout
    proc = run_hook(["cursor"], MCP | {"tool_name": "echo"}, daemon.env)
    assert answer_of(proc)["permission"] == "allow", proc.stdout
    proc = run_hook(["cursor"], READ | {"file_path": "/work/proj/.env"}, daemon.env)
    assert answer_of(proc) == {"permission": "deny"}


def test_no_ui_denies_or_asks_where_configured(daemon: DaemonHandle) -> None:
    assert answer_of(run_hook(["cursor"], SHELL, daemon.env))["permission"] == "deny"
    assert answer_of(run_hook(["cursor", "--on-no-ui", "ask"], SHELL, daemon.env))["permission"] == "ask"


PROTECTED = [
    "cp x .cursor/hooks.json",
    "cp x ~/.cursor/hooks.json",
    "cp x .Cursor/hooks.json",
    "cp -r x .github/hooks",
    "cp x .github/copilot/settings.json",
    "cp x opencode.json",
    "cp x sub/opencode.jsonc",
    "cp x ~/.config/opencode/plugins/evil.js",
    "cp x .opencode/plugins/a.js",
    "cp x ~/.copilot/hooks/a.json",
    "cp -r x .github",
]


@pytest.mark.parametrize("command", PROTECTED)
def test_agent_config_is_protected_even_where_a_rule_allows(daemon_factory: Any, command: str) -> None:
    """An agent rewriting its own (or a peer's) hooks or plugins is a known bypass: a safety check asks a
    person even where an allow rule matches, so with nobody watching it is denied, while the same rule
    allows an ordinary copy."""
    daemon: DaemonHandle = daemon_factory(policy='[permissions]\nallow = ["Bash(cp *)"]\n')
    control = run_hook(["cursor"], SHELL | {"command": "cp x y.txt"}, daemon.env)
    assert answer_of(control)["permission"] == "allow", control.stdout
    proc = run_hook(["cursor"], SHELL | {"command": command}, daemon.env)
    assert answer_of(proc)["permission"] == "deny", (command, proc.stdout)


@pytest.mark.parametrize(
    "stdin", [b"", b"not json", b"[]", b'{"hook_event_name": "beforeShellExecution"}', b'{"a": NaN}', b"\xff\xfe"]
)
def test_bad_stdin_blocks_with_exit_2(stdin: bytes) -> None:
    proc = run_hook(["cursor"], stdin, no_daemon_env())
    assert proc.returncode == 2 and b"nexusd denied" in proc.stderr


def test_daemon_down_denies_with_exit_2_and_a_deny_answer() -> None:
    proc = run_hook(["cursor"], SHELL, no_daemon_env())
    assert proc.returncode == 2
    assert answer_of(proc)["permission"] == "deny" and "not reachable" in answer_of(proc)["agent_message"]
    read = run_hook(["cursor"], READ, no_daemon_env())
    assert read.returncode == 2 and answer_of(read) == {"permission": "deny"}


@pytest.mark.parametrize("fake_server", ["garbage", "close", "error"], indirect=True)
def test_bad_peer_denies(fake_server: dict[str, str]) -> None:
    proc = run_hook(["cursor"], SHELL, fake_server)
    assert proc.returncode == 2 and answer_of(proc)["permission"] == "deny"


@pytest.mark.parametrize("provider", ["cursor", "copilot", "opencode"])
def test_new_providers_keep_the_hook_lean(daemon: DaemonHandle, tmp_path: Any, provider: str) -> None:
    """A whole run for Cursor, Copilot and OpenCode never imports msgspec (the hook runs once per call)."""
    import os

    probe = tmp_path / "sitecustomize.py"
    probe.write_text(
        "import sys\n"
        "def _audit(event, args):\n"
        "    if event == 'import' and str(args[0]).split('.')[0] == 'msgspec':\n"
        "        import os; os.write(2, b'MSGSPEC-IMPORTED\\n')\n"
        "sys.addaudithook(_audit)\n"
    )
    env = dict(daemon.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    stdin = {
        "cursor": SHELL,
        "copilot": {"sessionId": "s", "timestamp": 1, "cwd": "/w", "toolName": "view", "toolArgs": {"path": "/w/a"}},
        "opencode": {
            "hook_event_name": "tool.execute.before",
            "tool": "read",
            "sessionID": "s",
            "callID": "c",
            "args": {"filePath": "/w/a"},
            "directory": "/w",
            "worktree": "/w",
        },
    }[provider]
    proc = run_hook([provider], stdin, env)
    assert b"MSGSPEC-IMPORTED" not in proc.stderr
    assert proc.returncode == 0, proc.stderr


def test_with_the_sandbox_on_a_shell_allow_cursor_cannot_rewrite_is_denied(daemon_factory: Any) -> None:
    """The sandbox runs allowed shell calls wrapped; Cursor's hook cannot take a rewritten command, so the
    call is denied rather than run outside the sandbox the user turned on."""
    daemon: DaemonHandle = daemon_factory(policy='[permissions]\nallow = ["Bash(ls *)"]\n[sandbox]\nenabled = true\n')
    proc = run_hook(["cursor"], SHELL | {"command": "ls -la"}, daemon.env)
    assert answer_of(proc)["permission"] == "deny" and "rewrit" in answer_of(proc)["agent_message"], proc.stdout
