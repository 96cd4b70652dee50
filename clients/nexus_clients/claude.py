"""Claude Code's shapes <-> nexusd's canonical ones: hook stdin -> CallInfo, Decision -> hook stdout.

Pure functions over plain data (no I/O) so every mapping is unit-tested without a daemon. Imported by
``nexus-hook`` on its hot path, so only the standard library is imported at module level: the hook builds
the request as a wire dict (``call_fields_from_hook``) and its mappers take a ``protocol.Decision`` or the
hook's ``wire_lean.LeanDecision`` alike; ``nexusd.protocol`` (msgspec) is imported only by the functions
that return a ``CallInfo``.

Claude Code lets a call through when a hook crashes, prints garbage or times out, so every function
here either returns a well-formed answer or raises ``HookInputError``; the caller turns that into a deny.
"""

from nexus_clients.wire_lean import LeanDecision, call_fields

TYPE_CHECKING = False  # importing typing costs the per-call hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from nexusd.protocol import CallInfo, Decision

PRE_TOOL_USE = "PreToolUse"
PERMISSION_REQUEST = "PermissionRequest"
EVENTS = (PRE_TOOL_USE, PERMISSION_REQUEST)
SESSION_END = "SessionEnd"  # not a gate: the session's allow grants end with it (nexus-hook tells the daemon)
PROVIDER = "claude"


class HookInputError(ValueError):
    """The agent sent something we cannot map faithfully: deny rather than guess."""


def _str(payload: "Mapping[str, Any]", key: str, *, required: bool = True) -> str | None:
    value = payload.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise HookInputError(f"hook input field {key!r} must be a non-empty string")
    return value


def event_of(payload: "Any") -> str:
    """The hook event, validated first so even a bad payload can be answered in the right shape."""
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in EVENTS:
        raise HookInputError(f"unsupported hook event {event!r} (configure nexus-hook for {', '.join(EVENTS)})")
    return event


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    """Map a PreToolUse / PermissionRequest payload to the canonical request, as its wire dict (the hook's
    path has no msgspec; ``CallInfo(**fields)`` where one is wanted)."""
    event_of(payload)
    tool = _str(payload, "tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        raise HookInputError("hook input field 'tool_input' must be a JSON object")
    session = payload.get("session_id") or env.get("CLAUDE_CODE_SESSION_ID")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no session_id")
    cwd = payload.get("cwd") or fallback_cwd
    if not isinstance(cwd, str):
        raise HookInputError("hook input field 'cwd' must be a string")
    mode = _str(payload, "permission_mode", required=False)
    tool_use_id = _str(payload, "tool_use_id", required=False)
    transcript = _str(payload, "transcript_path", required=False)
    subagent_id, subagent_type = subagent_of(payload)
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool or "",
        input=tool_input,
        cwd=cwd,
        mode=mode,
        agent_request_id=tool_use_id,
        agent_pid=agent_pid,
        workspace=env.get("CLAUDE_PROJECT_DIR") or None,
        transcript_path=transcript or None,
        subagent_id=subagent_id,
        subagent_type=subagent_type,
    )


MAX_ATTRIBUTION = 200  # characters kept of a subagent id or type: attribution, not a payload


def subagent_of(payload: "Mapping[str, Any]") -> tuple[str | None, str | None]:
    """``agent_id`` / ``agent_type`` (present when a subagent makes the call; Claude Code and Codex alike).

    Attribution only, never policy, so a malformed value is dropped rather than refused; what is kept is
    trimmed and made printable, since UIs show it verbatim."""
    out: list[str | None] = []
    for key in ("agent_id", "agent_type"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            clean = "".join(ch if ch.isprintable() else "?" for ch in value.strip()[:MAX_ATTRIBUTION])
            out.append(clean)
        else:
            out.append(None)
    return out[0], out[1]


def model_reason(decision: "Decision | LeanDecision") -> str:
    """What the model (and the person watching) reads: who refused, which rule, any message from a person."""
    reason = (decision.reason or "").strip().rstrip(".")
    text = f"nexusd: {reason}." if reason else "nexusd."
    if decision.rule and decision.rule not in reason:  # a rule's deny already names it: say it once
        text += f" Rule: {decision.rule}."
    if decision.message:
        text += f" Message from the user: {decision.message}"
    return text


# Where Claude Code shows its own permission dialog for a hook's "ask". Its interactive terminal CLI sets
# CLAUDE_CODE_ENTRYPOINT=cli; -p runs, the SDKs and IDE harnesses set other values (tests/e2e: a -p run's
# hook is denied by this default), and some harnesses, like the auto/bypassPermissions/dontAsk modes, have
# let an "ask" run the tool unprompted. An ask must never turn into an allow, so only these hand back.
DIALOG_ENTRYPOINTS = frozenset({"cli"})
DIALOG_MODES = frozenset({"default", "acceptEdits", "plan"})


def no_ui_choice(payload: "dict[str, Any]", env: "Any") -> str:
    """``--on-no-ui auto``: "ask" where Claude's own dialog is known to be shown, else "deny"."""
    entry = env.get("CLAUDE_CODE_ENTRYPOINT")
    mode = payload.get("permission_mode")
    return "ask" if entry in DIALOG_ENTRYPOINTS and mode in DIALOG_MODES else "deny"


def deny_reason(reason: str) -> str:
    return f"nexusd denied this tool call: {reason}"


def hook_answer(event: str, decision: "Decision | LeanDecision", *, ask_allowed: bool) -> "dict[str, Any] | None":
    """The stdout JSON for ``event``; None means print nothing (Claude's own dialog takes over).

    ``ask`` only passes through when the hook was configured to fall back to Claude's dialog; otherwise
    anything but ``allow`` is a deny.
    """
    kind = decision.decision
    if kind == "ask" and not ask_allowed:
        kind = "deny"
    reason = model_reason(decision)
    if event == PRE_TOOL_USE:
        out: dict[str, Any] = {
            "hookEventName": PRE_TOOL_USE,
            "permissionDecision": kind,
            "permissionDecisionReason": reason,
        }
        if kind == "allow" and decision.updated_input is not None:
            out["updatedInput"] = decision.updated_input
        return _stop({"hookSpecificOutput": out}, decision, kind)
    if event == PERMISSION_REQUEST:
        if kind == "ask":
            return None
        body: dict[str, Any]
        if kind == "allow":
            body = {"behavior": "allow"}
            if decision.updated_input is not None:
                body["updatedInput"] = decision.updated_input
        else:
            body = {"behavior": "deny", "message": reason}
            if decision.abort:
                body["interrupt"] = True  # Claude's PermissionRequest: deny and stop the turn
        return _stop({"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": body}}, decision, kind)
    raise HookInputError(f"unsupported hook event {event!r}")


def stop_reason(decision: "Decision | LeanDecision") -> str:
    return "nexusd: a person stopped the agent" + (f": {decision.message}" if decision.message else "")


def _stop(out: "dict[str, Any]", decision: "Decision | LeanDecision", kind: str) -> "dict[str, Any]":
    """A person's abort (a deny that also ends the agent's turn): the hooks' common ``continue: false``."""
    if decision.abort and kind == "deny":
        out["continue"] = False
        out["stopReason"] = stop_reason(decision)
    return out


def hook_deny(event: str, reason: str) -> "dict[str, Any]":
    """A deny for ``event`` when nexusd could not decide (daemon down, bad input, timeout ...)."""
    text = deny_reason(reason)
    if event == PERMISSION_REQUEST:
        return {
            "hookSpecificOutput": {
                "hookEventName": PERMISSION_REQUEST,
                "decision": {"behavior": "deny", "message": text},
            }
        }
    return {
        "hookSpecificOutput": {
            "hookEventName": PRE_TOOL_USE,
            "permissionDecision": "deny",
            "permissionDecisionReason": text,
        }
    }


# --------------------------------------------------------------------------- permission-prompt tool (MCP)


def call_from_prompt_tool(
    arguments: "Any", *, session: str, cwd: str, agent_pid: int | None, workspace: str | None
) -> "CallInfo":
    """Map ``--permission-prompt-tool`` arguments ``{tool_name, input, tool_use_id?}`` to the canonical request."""
    if not isinstance(arguments, dict):
        raise HookInputError("arguments must be a JSON object")
    tool = arguments.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("'tool_name' must be a non-empty string")
    tool_input = arguments.get("input")
    if not isinstance(tool_input, dict):
        raise HookInputError("'input' must be a JSON object")
    tool_use_id = arguments.get("tool_use_id")
    if tool_use_id is not None and not isinstance(tool_use_id, str):
        raise HookInputError("'tool_use_id' must be a string")
    from nexusd.protocol import CallInfo

    return CallInfo(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=cwd,
        agent_request_id=tool_use_id,
        agent_pid=agent_pid,
        workspace=workspace,
    )


def prompt_tool_result(decision: "Decision", original_input: "dict[str, Any]") -> "dict[str, Any]":
    """The JSON the prompt tool returns. Allow echoes the input (an empty object would run the tool bare)."""
    if decision.decision == "allow":
        updated = decision.updated_input if decision.updated_input is not None else original_input
        return {"behavior": "allow", "updatedInput": updated}
    out: dict[str, Any] = {"behavior": "deny", "message": model_reason(decision)}
    if decision.abort:
        out["interrupt"] = True  # the permission prompt tool's deny can stop the turn too
    return out


def prompt_tool_deny(reason: str) -> "dict[str, Any]":
    return {"behavior": "deny", "message": deny_reason(reason)}
