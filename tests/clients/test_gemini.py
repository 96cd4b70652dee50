"""Gemini CLI BeforeTool mappings: tool names/inputs -> CallInfo, Decision -> {"decision", "reason"}."""

from __future__ import annotations

import pytest
from nexus_clients import gemini
from nexus_clients.claude import HookInputError

from nexusd.protocol import CallInfo, Decision


def payload(tool: str, tool_input: dict, **extra: object) -> dict:
    return {
        "session_id": "g-1",
        "transcript_path": "/tmp/t.json",
        "cwd": "/work/proj",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-01-01T00:00:00Z",
        "tool_name": tool,
        "tool_input": tool_input,
        **extra,
    }


def test_shell_command_runs_in_dir_path() -> None:
    p = payload("run_shell_command", {"command": "make test", "description": "run tests", "dir_path": "sub"})
    call = CallInfo(**gemini.call_fields_from_hook(p, env={}, agent_pid=77, fallback_cwd="/x"))
    assert call.provider == "gemini" and call.tool == "run_shell_command" and call.session == "g-1"
    assert call.input == {"command": "make test", "description": "run tests", "dir_path": "/work/proj/sub"}
    assert call.cwd == "/work/proj/sub"
    assert call.workspace == "/work/proj" and call.agent_pid == 77


def test_shell_command_without_dir_path_uses_cwd() -> None:
    call = CallInfo(
        **gemini.call_fields_from_hook(
            payload("run_shell_command", {"command": "ls"}), env={}, agent_pid=1, fallback_cwd="/x"
        )
    )
    assert call.cwd == "/work/proj" and call.input == {"command": "ls"}


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("write_file", {"file_path": "a/b.txt", "content": "x"}, {"file_path": "/work/proj/a/b.txt", "content": "x"}),
        (
            "replace",
            {"file_path": "/abs/f.py", "old_string": "a", "new_string": "b"},
            {"file_path": "/abs/f.py", "old_string": "a", "new_string": "b"},
        ),
        ("read_file", {"file_path": "../etc/passwd"}, {"file_path": "/work/etc/passwd"}),
        ("read_many_files", {"paths": ["a.txt", "/b.txt"]}, {"paths": ["/work/proj/a.txt", "/b.txt"]}),
        ("list_directory", {"dir_path": "."}, {"dir_path": "/work/proj"}),
        ("web_fetch", {"prompt": "get https://x.test"}, {"prompt": "get https://x.test"}),
    ],
)
def test_paths_made_absolute(tool: str, tool_input: dict, expected: dict) -> None:
    call = CallInfo(
        **gemini.call_fields_from_hook(payload(tool, tool_input), env={}, agent_pid=None, fallback_cwd="/x")
    )
    assert call.tool == tool and call.input == expected


def test_canonical_names_cover_the_core_tools() -> None:
    assert gemini.CANONICAL_TOOLS["run_shell_command"] == "Bash"
    assert gemini.CANONICAL_TOOLS["replace"] == "Edit"
    assert gemini.CANONICAL_TOOLS["write_file"] == "Write"
    assert gemini.CANONICAL_TOOLS["read_file"] == "Read"


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {**payload("read_file", {}), "hook_event_name": "AfterTool"},
        {**payload("read_file", {}), "tool_name": None},
        payload("read_file", "x"),  # type: ignore[arg-type]
        {**payload("read_file", {}), "session_id": ""},
        {**payload("read_file", {}), "cwd": "relative/dir"},
    ],
)
def test_malformed(bad: object) -> None:
    with pytest.raises(HookInputError):
        CallInfo(**gemini.call_fields_from_hook(bad, env={}, agent_pid=None, fallback_cwd="also/relative"))


def test_answers() -> None:
    allow = gemini.answer(Decision("allow", "safe tool", "mode"), ask_allowed=False)
    assert allow == {"decision": "allow", "reason": "nexusd: safe tool."}
    deny = gemini.answer(Decision("deny", "rm is denied", "rule", rule="Bash(rm *)"), ask_allowed=False)
    assert deny["decision"] == "deny" and "Bash(rm *)" in deny["reason"]
    assert gemini.answer(Decision("ask", "nobody", "mode"), ask_allowed=False)["decision"] == "deny"
    assert gemini.answer(Decision("ask", "nobody", "mode"), ask_allowed=True)["decision"] == "ask"


def test_allow_carries_updated_input_for_sandboxing() -> None:
    out = gemini.answer(Decision("allow", "ok", "rule", updated_input={"command": "bwrap -- ls"}), ask_allowed=False)
    assert out["hookSpecificOutput"] == {"hookEventName": "BeforeTool", "tool_input": {"command": "bwrap -- ls"}}
    denied = gemini.answer(Decision("deny", "no", "rule", updated_input={"command": "x"}), ask_allowed=False)
    assert "hookSpecificOutput" not in denied


def test_abort_stops_the_agent_loop() -> None:
    out = gemini.answer(Decision("deny", "denied", "user", abort=True), ask_allowed=False)
    assert out["decision"] == "deny" and out["continue"] is False and out["stopReason"].startswith("nexusd")
    assert "continue" not in gemini.answer(Decision("deny", "denied", "user"), ask_allowed=False)
