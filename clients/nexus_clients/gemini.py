"""Gemini CLI's BeforeTool hook shapes <-> nexusd's canonical ones.

Pure functions (no I/O), imported by ``nexus-hook gemini`` on its hot path. Gemini CLI lets a tool run
when a hook exits 1 or prints non-JSON; only exit 2 or ``{"decision": "deny"}`` blocks. So everything
here either returns a well-formed answer or raises ``HookInputError`` and the hook exits 2.

The tool name travels as Gemini spells it (``CallInfo.tool``; ``provider="gemini"`` tells the engine
whose spelling it is; ``CANONICAL_TOOLS`` documents the correspondence). Paths are made absolute
against the hook's ``cwd`` and a shell call's ``dir_path`` becomes the request's ``cwd``, because the
policy checks paths, and a relative path means nothing without the directory it is relative to.
"""

from nexus_clients.claude import HookInputError, model_reason, stop_reason
from nexus_clients.wire_lean import LeanDecision, call_fields
from nexusd import leanos

TYPE_CHECKING = False  # importing typing costs the per-call hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:  # nexusd.protocol imports msgspec, which the hook's hot path avoids
    from collections.abc import Mapping
    from typing import Any

    from nexusd.protocol import Decision

BEFORE_TOOL = "BeforeTool"
PROVIDER = "gemini"

# Gemini CLI tool -> the canonical (Claude-spelled) tool it corresponds to.
CANONICAL_TOOLS: dict[str, str] = {
    "run_shell_command": "Bash",
    "write_file": "Write",
    "replace": "Edit",
    "read_file": "Read",
    "read_many_files": "Read",
    "list_directory": "LS",
    "glob": "Glob",
    "grep_search": "Grep",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
}

_PATH_KEYS = ("file_path", "dir_path", "path", "absolute_path")

__all__ = [
    "BEFORE_TOOL",
    "CANONICAL_TOOLS",
    "HookInputError",
    "answer",
    "call_fields_from_hook",
    "deny_text",
]


def _absolute(base: str, value: "Any") -> "Any":
    if isinstance(value, str) and value and not leanos.isabs(value):
        return leanos.normpath(leanos.join(base, value))
    return value


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    """Map a BeforeTool payload ``{session_id, cwd, hook_event_name, tool_name, tool_input}`` to the
    canonical request, as its wire dict (``CallInfo(**fields)`` where one is wanted)."""
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    if payload.get("hook_event_name") != BEFORE_TOOL:
        raise HookInputError(f"unsupported hook event {payload.get('hook_event_name')!r} (configure it for BeforeTool)")
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("hook input field 'tool_name' must be a non-empty string")
    raw_input = payload.get("tool_input")
    if not isinstance(raw_input, dict):
        raise HookInputError("hook input field 'tool_input' must be a JSON object")
    session = payload.get("session_id") or env.get("GEMINI_SESSION_ID")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no session_id")
    cwd = payload.get("cwd") or env.get("GEMINI_CWD") or fallback_cwd
    if not isinstance(cwd, str) or not leanos.isabs(cwd):
        raise HookInputError("hook input field 'cwd' must be an absolute path")
    workspace = env.get("GEMINI_PROJECT_DIR") or cwd
    tool_input = dict(raw_input)
    for key in _PATH_KEYS:
        if key in tool_input:
            tool_input[key] = _absolute(cwd, tool_input[key])
    paths = tool_input.get("paths")  # read_many_files
    if isinstance(paths, list):
        tool_input["paths"] = [_absolute(cwd, p) for p in paths]
    run_cwd = cwd
    if tool == "run_shell_command" and isinstance(tool_input.get("dir_path"), str) and tool_input["dir_path"]:
        run_cwd = tool_input["dir_path"]
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=run_cwd,
        mode=None,  # Gemini does not tell hooks its approval mode
        agent_pid=agent_pid,
        workspace=workspace,
    )


def answer(decision: "Decision | LeanDecision", *, ask_allowed: bool) -> "dict[str, Any]":
    """The stdout JSON. An allow may carry a rewritten input (Gemini merges ``tool_input`` into its params)."""
    kind = decision.decision
    if kind == "ask" and not ask_allowed:
        kind = "deny"
    out: dict[str, Any] = {"decision": kind, "reason": model_reason(decision)}
    if kind == "allow" and decision.updated_input is not None:
        out["hookSpecificOutput"] = {"hookEventName": BEFORE_TOOL, "tool_input": decision.updated_input}
    if decision.abort and kind == "deny":  # Gemini's common hook output: stop the agent loop
        out["continue"] = False
        out["stopReason"] = stop_reason(decision)
    return out


def deny_text(reason: str) -> str:
    return f"nexusd denied this tool call: {reason}"
