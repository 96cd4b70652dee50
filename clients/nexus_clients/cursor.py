"""Cursor's agent hooks (``beforeShellExecution``, ``beforeMCPExecution``, ``beforeReadFile``) <-> nexusd.

Pure functions, imported by ``nexus-hook cursor`` on its hot path (standard library only). The contract
followed is Cursor's hooks documentation (cursor.com/docs/agent/hooks): every event carries
``hook_event_name``, ``conversation_id``, ``generation_id`` and ``workspace_roots``; the shell event adds
``command`` and ``cwd``, the MCP event ``tool_name`` and ``tool_input`` (an object, or the same as JSON
text) plus the server's ``url`` or ``command``, the read event ``file_path`` (and the file's ``content``,
which we never forward). The answer is ``{"permission": "allow"|"deny"|"ask", "user_message",
"agent_message"}``; ``beforeReadFile`` knows only allow and deny.

Cursor lets the action through when a hook fails unless the entry says ``"failClosed": true`` (the
installer sets it); exit 2 blocks in any case, and ``nexus-hook`` exits 2 on every failure.

Mapping into the canonical call: the shell event becomes tool ``Shell`` (Cursor's own name for its shell
tool, catalogued as ``Bash``), the read event ``Read`` with ``file_path``, an MCP call
``mcp__cursor__<tool>``: Cursor does not tell hooks the server's name, so rules for MCP tools under Cursor
name the server ``cursor``. Cursor sends no permission mode.
"""

from nexus_clients import leanjson
from nexus_clients.claude import HookInputError, model_reason
from nexus_clients.wire_lean import LeanDecision, call_fields
from nexusd import leanos

TYPE_CHECKING = False  # importing typing costs the per-call hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:  # nexusd.protocol imports msgspec, which the hook's hot path avoids
    from collections.abc import Mapping
    from typing import Any

    from nexusd.protocol import Decision

PROVIDER = "cursor"
SHELL, MCP, READ = "beforeShellExecution", "beforeMCPExecution", "beforeReadFile"
EVENTS = (SHELL, MCP, READ)
MCP_SERVER = "cursor"  # Cursor's hook input has no server name


def event_of(payload: "Any") -> str:
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in EVENTS:
        raise HookInputError(f"unsupported hook event {event!r} (configure nexus-hook for {', '.join(EVENTS)})")
    return event


def _workspace(payload: "Mapping[str, Any]") -> str | None:
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and leanos.isabs(roots[0]):
        return roots[0]
    return None


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    """The canonical request (wire dict) for one of the three events."""
    event = event_of(payload)
    session = payload.get("conversation_id")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no conversation_id")
    workspace = _workspace(payload)
    cwd = payload.get("cwd") or workspace or fallback_cwd
    if not isinstance(cwd, str) or not leanos.isabs(cwd):
        raise HookInputError("hook input field 'cwd' must be an absolute path")
    if event == SHELL:
        command = payload.get("command")
        if not isinstance(command, str) or not command:
            raise HookInputError("hook input field 'command' must be a non-empty string")
        tool, tool_input = "Shell", {"command": command}
    elif event == READ:
        path = payload.get("file_path")
        if not isinstance(path, str) or not path:
            raise HookInputError("hook input field 'file_path' must be a non-empty string")
        tool, tool_input = "Read", {"file_path": leanos.normpath(leanos.join(cwd, path))}
    else:
        name = payload.get("tool_name")
        if not isinstance(name, str) or not name:
            raise HookInputError("hook input field 'tool_name' must be a non-empty string")
        raw = payload.get("tool_input", {})
        if isinstance(raw, str):
            try:
                raw = leanjson.loads(raw) if raw.strip() else {}
            except ValueError:
                raise HookInputError("hook input field 'tool_input' is not JSON") from None
        if not isinstance(raw, dict):
            raise HookInputError("hook input field 'tool_input' must be a JSON object")
        tool, tool_input = f"mcp__{MCP_SERVER}__{name}", raw
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=cwd,
        agent_pid=agent_pid,
        workspace=workspace,
    )


def answer(event: str, decision: "Decision | LeanDecision", *, ask_allowed: bool) -> "dict[str, Any]":
    """The stdout JSON. ``ask`` reaches Cursor's own dialog only when configured and the event knows it.

    An allow that comes with a rewritten input (nexusd's sandbox wrapping) cannot be honoured: none of
    these events can change what runs, so it is a deny rather than an unsandboxed run.
    """
    kind = decision.decision
    if kind == "ask" and not (ask_allowed and event != READ):
        kind = "deny"
    reason = model_reason(decision)
    if kind == "allow" and decision.updated_input is not None:
        kind = "deny"
        reason = deny_text("nexusd allows this only rewritten (sandboxed); Cursor's hook cannot rewrite it")
    if event == READ:
        return {"permission": kind}
    return {"permission": kind, "user_message": reason, "agent_message": reason}


def deny(event: str | None, reason: str) -> "dict[str, Any]":
    text = deny_text(reason)
    if event == READ:
        return {"permission": "deny"}
    return {"permission": "deny", "user_message": text, "agent_message": text}


def deny_text(reason: str) -> str:
    return f"nexusd denied this tool call: {reason}"
