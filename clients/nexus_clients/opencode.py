"""OpenCode's ``tool.execute.before`` plugin hook <-> nexusd.

OpenCode has no command hooks: plugins are JavaScript modules it loads from ``.opencode/plugins/`` or
``~/.config/opencode/plugins/`` (opencode.ai/docs/plugins). Ours (``data/opencode-nexusd.js``, installed by
``nexusctl install opencode``) runs ``nexus-hook opencode`` for every tool call with this JSON on stdin::

    {"hook_event_name": "tool.execute.before", "tool": "bash", "sessionID": "...", "callID": "...",
     "agent": "build", "args": {...}, "directory": "/project", "worktree": "/project"}

(``agent``: the OpenCode agent the session last spoke to, from the plugin's ``chat.message`` hook) and
lets the call run only when the hook exits 0 and prints ``{"decision": "allow"}``; anything else
(a deny, a crash, a timeout, unparseable output) makes the plugin throw, which is how an OpenCode plugin
blocks a tool. ``ask`` is a deny: the hook runs after OpenCode's own permission step and cannot ask.

Tool names travel as OpenCode spells them (``bash``, ``read``, ``write``, ``edit``, ``list``, ``glob``,
``grep``, ``webfetch``, ``patch`` ...; the catalogue maps them) and its ``filePath`` / ``path``
arguments are made absolute against the session's directory.
"""

from nexus_clients.claude import HookInputError, model_reason
from nexus_clients.wire_lean import LeanDecision, call_fields
from nexusd import leanos

TYPE_CHECKING = False  # importing typing costs the per-call hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:  # nexusd.protocol imports msgspec, which the hook's hot path avoids
    from collections.abc import Mapping
    from typing import Any

    from nexusd.protocol import Decision

PROVIDER = "opencode"
EVENT = "tool.execute.before"
# OpenCode's built-in primary agents are its modes: build (the default) and plan (read-only). Other agent
# names are the user's own and are never read as a mode (an agent called "yolo" is not bypass).
AGENT_MODES = {"build": "build", "plan": "plan"}
_PATH_KEYS = ("filePath", "path", "file_path")


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    if payload.get("hook_event_name") != EVENT:
        raise HookInputError(f"unsupported hook event {payload.get('hook_event_name')!r}")
    tool = payload.get("tool")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("hook input field 'tool' must be a non-empty string")
    session = payload.get("sessionID")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no sessionID")
    args = payload.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise HookInputError("hook input field 'args' must be a JSON object")
    directory = payload.get("directory") or fallback_cwd
    if not isinstance(directory, str) or not leanos.isabs(directory):
        raise HookInputError("hook input field 'directory' must be an absolute path")
    worktree = payload.get("worktree")
    workspace = worktree if isinstance(worktree, str) and leanos.isabs(worktree) and worktree != "/" else directory
    tool_input = dict(args)
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value and not leanos.isabs(value) and not value.startswith("~"):
            tool_input[key] = leanos.normpath(leanos.join(directory, value))
    cwd = directory
    workdir = tool_input.get("workdir")
    if tool == "bash" and isinstance(workdir, str) and workdir:
        cwd = leanos.normpath(leanos.join(directory, workdir))
    call_id = payload.get("callID")
    agent = payload.get("agent")
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=cwd,
        mode=AGENT_MODES.get(agent) if isinstance(agent, str) else None,
        agent_request_id=call_id if isinstance(call_id, str) and call_id else None,
        agent_pid=agent_pid,
        workspace=workspace,
    )


def answer(decision: "Decision | LeanDecision") -> "dict[str, Any]":
    """``{"decision": "allow", "args"?}`` or ``{"decision": "deny", "reason"}``; ask is a deny here."""
    if decision.decision == "allow":
        out: dict[str, Any] = {"decision": "allow", "reason": model_reason(decision)}
        if decision.updated_input is not None:
            out["args"] = decision.updated_input
        return out
    return {"decision": "deny", "reason": model_reason(decision)}


def deny(reason: str) -> "dict[str, Any]":
    return {"decision": "deny", "reason": deny_text(reason)}


def deny_text(reason: str) -> str:
    return f"nexusd denied this tool call: {reason}"
