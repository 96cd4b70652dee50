"""Claude Code mappings: hook stdin -> CallInfo, Decision -> the exact answer shapes Claude accepts."""

from __future__ import annotations

import pytest
from nexus_clients import claude
from nexus_clients.claude import HookInputError

from nexusd.protocol import CallInfo, Decision

PRE = {
    "session_id": "s-1",
    "transcript_path": "/tmp/t.jsonl",
    "cwd": "/work/proj",
    "hook_event_name": "PreToolUse",
    "permission_mode": "acceptEdits",
    "tool_name": "Bash",
    "tool_input": {"command": "echo hi", "description": "say hi"},
    "tool_use_id": "toolu_01",
    "prompt_id": "p-1",
    "effort": "high",
}
ENV = {"CLAUDE_PROJECT_DIR": "/work/proj"}


def test_pre_tool_use_maps_every_field() -> None:
    call = CallInfo(**claude.call_fields_from_hook(PRE, env=ENV, agent_pid=4242, fallback_cwd="/elsewhere"))
    assert call == CallInfo(
        provider="claude",
        session="s-1",
        tool="Bash",
        input={"command": "echo hi", "description": "say hi"},
        cwd="/work/proj",
        mode="acceptEdits",
        agent_request_id="toolu_01",
        agent_pid=4242,
        workspace="/work/proj",
        transcript_path="/tmp/t.jsonl",
    )


def test_permission_request_has_no_tool_use_id() -> None:
    payload = {k: v for k, v in PRE.items() if k != "tool_use_id"}
    payload["hook_event_name"] = "PermissionRequest"
    payload["permission_suggestions"] = [{"type": "addRules"}]
    assert claude.event_of(payload) == "PermissionRequest"
    call = CallInfo(**claude.call_fields_from_hook(payload, env={}, agent_pid=None, fallback_cwd="/x"))
    assert call.agent_request_id is None
    assert call.workspace is None


def test_session_from_environment_when_missing() -> None:
    payload = {k: v for k, v in PRE.items() if k != "session_id"}
    call = CallInfo(
        **claude.call_fields_from_hook(payload, env={"CLAUDE_CODE_SESSION_ID": "env-s"}, agent_pid=1, fallback_cwd="/x")
    )
    assert call.session == "env-s"


@pytest.mark.parametrize(
    "payload",
    [
        [],
        "PreToolUse",
        {**PRE, "hook_event_name": "PostToolUse"},
        {**PRE, "hook_event_name": None},
        {**PRE, "tool_name": ""},
        {**PRE, "tool_name": 3},
        {**PRE, "tool_input": "echo hi"},
        {**PRE, "tool_input": None},
        {**PRE, "session_id": None},
        {**PRE, "cwd": 7},
        {**PRE, "permission_mode": ["default"]},
        {**PRE, "tool_use_id": 12},
    ],
)
def test_malformed_input_raises(payload: object) -> None:
    with pytest.raises(HookInputError):
        CallInfo(**claude.call_fields_from_hook(payload, env={}, agent_pid=1, fallback_cwd="/x"))


def test_pre_tool_use_allow_with_updated_input() -> None:
    d = Decision("allow", "rule matched", "rule", rule="Bash(echo *)", updated_input={"command": "bwrap ... echo hi"})
    out = claude.hook_answer("PreToolUse", d, ask_allowed=False)
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "nexusd: rule matched. Rule: Bash(echo *).",
            "updatedInput": {"command": "bwrap ... echo hi"},
        }
    }


def test_pre_tool_use_deny_names_rule_and_message() -> None:
    d = Decision("deny", "denied by a person", "user", message="not on Fridays")
    out = claude.hook_answer("PreToolUse", d, ask_allowed=False)
    spec = out["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    assert "denied by a person" in spec["permissionDecisionReason"]
    assert "not on Fridays" in spec["permissionDecisionReason"]
    assert "updatedInput" not in spec


def test_reason_rule_and_message_read_as_sentences() -> None:
    """A person's message never runs into the reason, and a rule the reason names is not repeated."""
    d = Decision("deny", "denied by a person in nexus-tui (pid 42)", "user", message="use the staging db")
    assert claude.model_reason(d) == (
        "nexusd: denied by a person in nexus-tui (pid 42). Message from the user: use the staging db"
    )
    d = Decision("deny", "denied by rule Bash(rm:*) (user policy.toml:3).", "rule", rule="Bash(rm:*)")
    assert claude.model_reason(d).count("Bash(rm:*)") == 1
    assert claude.model_reason(Decision("deny", "", "error")) == "nexusd."


def test_deny_never_carries_updated_input() -> None:
    d = Decision("deny", "no", "rule", updated_input={"command": "x"})
    assert "updatedInput" not in claude.hook_answer("PreToolUse", d, ask_allowed=False)["hookSpecificOutput"]
    body = claude.hook_answer("PermissionRequest", d, ask_allowed=False)["hookSpecificOutput"]["decision"]
    assert body == {"behavior": "deny", "message": "nexusd: no."}


def test_ask_only_where_configured() -> None:
    d = Decision("ask", "no UI connected", "mode")
    assert claude.hook_answer("PreToolUse", d, ask_allowed=True)["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert claude.hook_answer("PreToolUse", d, ask_allowed=False)["hookSpecificOutput"]["permissionDecision"] == "deny"
    # PermissionRequest has no "ask": printing nothing lets Claude's own dialog take over.
    assert claude.hook_answer("PermissionRequest", d, ask_allowed=True) is None
    denied = claude.hook_answer("PermissionRequest", d, ask_allowed=False)
    assert denied["hookSpecificOutput"]["decision"]["behavior"] == "deny"


def test_permission_request_allow_shapes() -> None:
    plain = claude.hook_answer("PermissionRequest", Decision("allow", "ok", "user"), ask_allowed=False)
    assert plain == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    updated = claude.hook_answer(
        "PermissionRequest", Decision("allow", "ok", "user", updated_input={"a": 1}), ask_allowed=False
    )
    assert updated["hookSpecificOutput"]["decision"] == {"behavior": "allow", "updatedInput": {"a": 1}}


def test_hook_deny_shapes() -> None:
    pre = claude.hook_deny("PreToolUse", "daemon down")["hookSpecificOutput"]
    assert pre["hookEventName"] == "PreToolUse" and pre["permissionDecision"] == "deny"
    assert "daemon down" in pre["permissionDecisionReason"]
    perm = claude.hook_deny("PermissionRequest", "daemon down")["hookSpecificOutput"]
    assert perm["decision"]["behavior"] == "deny" and "daemon down" in perm["decision"]["message"]


def test_prompt_tool_mapping_and_results() -> None:
    args = {"tool_name": "Write", "input": {"file_path": "/p/a.txt", "content": "x"}, "tool_use_id": "toolu_9"}
    call = claude.call_from_prompt_tool(args, session="s", cwd="/p", agent_pid=9, workspace="/p")
    assert (call.tool, call.input, call.agent_request_id, call.provider) == (
        "Write",
        args["input"],
        "toolu_9",
        "claude",
    )
    allow = claude.prompt_tool_result(Decision("allow", "ok", "rule"), args["input"])
    assert allow == {"behavior": "allow", "updatedInput": args["input"]}
    sandboxed = claude.prompt_tool_result(Decision("allow", "ok", "rule", updated_input={"k": 2}), args["input"])
    assert sandboxed == {"behavior": "allow", "updatedInput": {"k": 2}}
    deny = claude.prompt_tool_result(Decision("deny", "protected path", "safety"), args["input"])
    assert deny["behavior"] == "deny" and "protected path" in deny["message"]
    asked = claude.prompt_tool_result(Decision("ask", "?", "mode"), args["input"])
    assert asked["behavior"] == "deny"


@pytest.mark.parametrize(
    "args",
    [
        None,
        [],
        {"input": {}},
        {"tool_name": "", "input": {}},
        {"tool_name": "Bash", "input": "ls"},
        {"tool_name": "Bash", "input": {}, "tool_use_id": 5},
    ],
)
def test_prompt_tool_malformed(args: object) -> None:
    with pytest.raises(HookInputError):
        claude.call_from_prompt_tool(args, session="s", cwd="/", agent_pid=None, workspace=None)


def test_abort_stops_the_turn_in_every_claude_answer() -> None:
    d = Decision("deny", "denied by tui (pid 4), who also stopped the agent", "user", message="stop", abort=True)
    out = claude.hook_answer("PreToolUse", d, ask_allowed=False)
    assert out["continue"] is False and "stop" in out["stopReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    out = claude.hook_answer("PermissionRequest", d, ask_allowed=False)
    assert out["continue"] is False and out["hookSpecificOutput"]["decision"]["interrupt"] is True
    assert claude.prompt_tool_result(d, {})["interrupt"] is True
    plain = Decision("deny", "no", "user")
    assert "continue" not in claude.hook_answer("PreToolUse", plain, ask_allowed=False)
    assert "interrupt" not in claude.prompt_tool_result(plain, {})
    # an allow never stops the agent, even if a (broken) daemon sets the flag
    assert "continue" not in claude.hook_answer(
        "PreToolUse", Decision("allow", "ok", "user", abort=True), ask_allowed=False
    )


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
def test_subagent_attribution_rides_on_the_call(event: str) -> None:
    """A subagent's call carries ``agent_id`` / ``agent_type`` (Claude Code hooks input); they become the
    call's ``subagent_id`` / ``subagent_type``, cleaned for display, never policy."""
    payload = {**PRE, "hook_event_name": event, "agent_id": "agent-a1b2", "agent_type": "Explore\u202e"}
    call = CallInfo(**claude.call_fields_from_hook(payload, env=ENV, agent_pid=1, fallback_cwd="/x"))
    assert (call.subagent_id, call.subagent_type) == ("agent-a1b2", "Explore?")
    plain = CallInfo(**claude.call_fields_from_hook(PRE, env=ENV, agent_pid=1, fallback_cwd="/x"))
    assert plain.subagent_id is None and plain.subagent_type is None
