"""GitHub Copilot CLI's ``preToolUse`` command hook <-> nexusd.

Pure functions, imported by ``nexus-hook copilot`` on its hot path (standard library only). The contract
is GitHub's "Copilot hooks reference" (docs.github.com/en/copilot/reference/hooks-reference): a hook
configured under the camelCase event ``preToolUse`` reads ``{sessionId, timestamp, cwd, toolName,
toolArgs}`` (``toolArgs`` is "unknown": an object, or the arguments as JSON text); one configured under
``PreToolUse`` reads the VS Code-compatible ``{hook_event_name, session_id, cwd, tool_name, tool_input}``.
Both are accepted. The answer is one JSON object ``{permissionDecision: allow|deny|ask,
permissionDecisionReason, modifiedArgs?}``.

Copilot CLI denies the call when a ``preToolUse`` command hook exits non-zero (exit 2 always denies) but
lets it through the normal permission flow when the hook times out, so ``nexus-hook`` answers before the
configured ``timeoutSec`` (its watchdog) and exits 2 on every failure.

Tool names travel as Copilot spells them (``bash``, ``view``, ``create``, ``edit``, ``grep``/``rg``,
``glob``, ``web_fetch`` ...; its shell-session tools ``read_bash``/``write_bash``/``stop_bash`` and its
``sql`` tools are unknown to the catalogue, so a person decides them unless a rule does); the catalogue
(``nexusd.core.tools``) maps them to the canonical ones. A relative ``path`` argument is made absolute
against the hook's ``cwd``. Copilot sends no permission mode.
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

PROVIDER = "copilot"
EVENT = "preToolUse"
_PATH_KEYS = ("path", "file_path", "filePath")


def _args(raw: "Any") -> "dict[str, Any]":
    if isinstance(raw, str):
        try:
            raw = leanjson.loads(raw) if raw.strip() else {}
        except ValueError:
            raise HookInputError("tool arguments are not JSON") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise HookInputError("tool arguments must be a JSON object")
    return raw


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    """The canonical request (wire dict) for a ``preToolUse`` / ``PreToolUse`` payload."""
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    if "hook_event_name" in payload:  # the VS Code-compatible (snake_case) shape
        if payload["hook_event_name"] != "PreToolUse":
            raise HookInputError(f"unsupported hook event {payload['hook_event_name']!r} (configure preToolUse)")
        tool, raw, session = payload.get("tool_name"), payload.get("tool_input"), payload.get("session_id")
    else:
        tool, raw, session = payload.get("toolName"), payload.get("toolArgs"), payload.get("sessionId")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("hook input has no tool name")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no session id")
    cwd = payload.get("cwd") or fallback_cwd
    if not isinstance(cwd, str) or not leanos.isabs(cwd):
        raise HookInputError("hook input field 'cwd' must be an absolute path")
    tool_input = dict(_args(raw))
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value and not leanos.isabs(value) and not value.startswith("~"):
            tool_input[key] = leanos.normpath(leanos.join(cwd, value))
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=cwd,
        agent_pid=agent_pid,
        workspace=cwd,
    )


def answer(decision: "Decision | LeanDecision", *, ask_allowed: bool) -> "dict[str, Any]":
    """The stdout JSON; an allow carrying a rewritten input (sandbox wrapping) returns it as ``modifiedArgs``."""
    kind = decision.decision
    if kind == "ask" and not ask_allowed:
        kind = "deny"
    out: dict[str, Any] = {"permissionDecision": kind, "permissionDecisionReason": model_reason(decision)}
    if kind == "allow" and decision.updated_input is not None:
        out["modifiedArgs"] = decision.updated_input
    return out


def deny(reason: str) -> "dict[str, Any]":
    return {"permissionDecision": "deny", "permissionDecisionReason": deny_text(reason)}


def deny_text(reason: str) -> str:
    return f"nexusd denied this tool call: {reason}"
