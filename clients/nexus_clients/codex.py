"""Codex CLI's hook shapes <-> nexusd's canonical ones (``nexus-hook codex``).

Codex runs command hooks on ``PreToolUse`` (before a shell command, ``apply_patch`` or an MCP tool runs)
and ``PermissionRequest`` (where Codex would show its own approval prompt: a sandbox escalation, network
access). Its contract, as Codex 0.169 parses the hook's output:

- PreToolUse can only *block*: ``permissionDecision: "deny"`` with a non-empty reason, or exit 2 with the
  reason on stderr. ``"allow"`` is accepted only together with ``updatedInput`` (a rewritten shell
  command); ``"ask"`` is rejected. Printing nothing lets the call go on to Codex's own approval policy
  and sandbox.
- PermissionRequest answers ``decision.behavior`` allow or deny; printing nothing falls back to Codex's
  own approval flow (its dialog, or ``--approve-for-me``'s reviewer).
- Codex *fails open*: a hook that exits with any other code, times out, or prints JSON Codex does not
  accept (an unknown field, a reason left empty) is logged as failed and the call runs. So every deny
  (and every failure) is exit 2 with the reason on stderr, the allows are a few fixed shapes the
  end-to-end tests check against the real CLI, and the installed command ends in ``|| exit 2`` so
  even a hook that cannot start (a removed venv: exit 127) blocks.

Codex already spells its shell tool ``Bash`` (shell, exec_command and unified exec alike), its MCP tools
``mcp__server__tool``, and passes ``apply_patch``'s patch text in ``tool_input.command``; the catalogue
(``nexusd.core.tools``) knows all three, so a rule written once (``Bash(git status)``) holds here too.

Pure functions plus one bounded file read (the session's transcript header, for the workspace); only the
standard library is imported, as on the rest of the hook's hot path.
"""

from nexus_clients import leanjson
from nexus_clients.claude import HookInputError, model_reason, subagent_of
from nexus_clients.wire_lean import LeanDecision, call_fields
from nexusd import leanos

TYPE_CHECKING = False  # importing typing costs the per-call hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:  # nexusd.protocol imports msgspec, which the hook's hot path avoids
    from collections.abc import Mapping
    from typing import Any

    from nexusd.protocol import Decision

PRE_TOOL_USE = "PreToolUse"
PERMISSION_REQUEST = "PermissionRequest"
EVENTS = (PRE_TOOL_USE, PERMISSION_REQUEST)
PROVIDER = "codex"

# Codex reports its approval policy to hooks in Claude's mode names; nexusd's mode table spells them as
# Codex's own policies (``approval_policy``), because the meaning differs: Codex says ``bypassPermissions``
# for ``approval_policy = "never"`` even while its sandbox is read-only, so taking it for Claude's bypass
# would let nexusd allow everything. "never" means "never ask the person", which is nexusd's dont_ask.
# A value not listed here is not passed on (the policy's default mode applies).
MODES: dict[str, str] = {
    "default": "on-request",
    "bypassPermissions": "never",
    "dontAsk": "never",
    "plan": "plan",
    "acceptEdits": "on-request",
}

MAX_TRANSCRIPT_HEADER = 4 << 20  # the session_meta line carries Codex's base instructions (~20 KiB today)

__all__ = [
    "EVENTS",
    "MODES",
    "Answer",
    "HookInputError",
    "call_fields_from_hook",
    "event_of",
    "hook_answer",
    "session_workspace",
]


def event_of(payload: "Any") -> str:
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in EVENTS:
        raise HookInputError(f"unsupported hook event {event!r} (configure nexus-hook codex for {', '.join(EVENTS)})")
    return event


def session_workspace(transcript_path: "Any", session: str) -> str | None:
    """The directory the Codex session started in, from its transcript's first line (``session_meta``).

    The hook's ``cwd`` is the command's ``workdir``, which the model chooses; the workspace boundary must
    not be. None when there is no transcript (``--ephemeral``), it belongs to another session, or it is
    unreadable: then the Codex process's own cwd is used (``codex_process``), and failing that the
    daemon falls back to the cwd's git root.
    """
    if not isinstance(transcript_path, str) or not leanos.isabs(transcript_path):
        return None
    try:
        with open(transcript_path, "rb") as f:
            line = f.readline(MAX_TRANSCRIPT_HEADER)
        meta = leanjson.loads(line.decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("type") != "session_meta" or not isinstance(meta.get("payload"), dict):
        return None
    body = meta["payload"]
    if session not in (body.get("session_id"), body.get("id")):
        return None
    cwd = body.get("cwd")
    return cwd if isinstance(cwd, str) and leanos.isabs(cwd) else None


# Codex runs an ``apply_patch`` the model types as a shell command (``apply_patch <<'EOF' … EOF``, optionally
# after ``cd DIR &&``) as its own patch tool, and its hook sees it as Bash with that text. To the shell
# classifier that is an unknown program whose heredoc is opaque, so the files it writes (``.codex/config.toml``
# included) would go unseen. Exactly these whole-command forms are mapped to the ``apply_patch`` tool; anything
# more (a second command after the terminator, an unquoted or double-quoted argument) stays a shell call.
_CD = r"cd\s+(?P<dir>'[^']*'|[^\s;&|<>()'\"$`\\]+)\s*&&\s*"
_APPLY_PATCH_NAMES = ("apply_patch", "applypatch")
_apply_patch_patterns: "tuple[Any, Any] | None" = None


def _apply_patch_res() -> "tuple[Any, Any]":
    """The two whole-command forms, compiled on first need: ``re`` costs every other hook call ~3 ms."""
    global _apply_patch_patterns
    if _apply_patch_patterns is None:
        import re

        heredoc = re.compile(
            rf"\A\s*(?:{_CD})?(?:apply_patch|applypatch)\s*<<\s*(?P<q>['\"]?)"
            r"(?P<tag>[A-Za-z_][A-Za-z0-9_]*)(?P=q)[ \t]*\n"
            r"(?P<body>.*?)\n(?P=tag)[ \t]*\n?\s*\Z",
            re.S,
        )
        arg = re.compile(rf"\A\s*(?:{_CD})?(?:apply_patch|applypatch)\s+'(?P<body>[^']*)'\s*\Z")
        _apply_patch_patterns = (heredoc, arg)
    return _apply_patch_patterns


def shell_apply_patch(command: str, cwd: str) -> tuple[str, str] | None:
    """(patch text, directory it applies in) when ``command`` is exactly an apply_patch invocation."""
    if not any(name in command for name in _APPLY_PATCH_NAMES):  # both forms name the tool literally
        return None
    heredoc, arg = _apply_patch_res()
    m = heredoc.match(command) or arg.match(command)
    if m is None:
        return None
    if "tag" in m.groupdict() and any(line.rstrip(" \t") == m["tag"] for line in m["body"].split("\n")):
        return None  # the heredoc ends earlier than the regex's last terminator: more commands follow it
    where = cwd
    if m["dir"]:
        d = m["dir"][1:-1] if m["dir"].startswith("'") else m["dir"]
        where = leanos.normpath(leanos.join(cwd, d))
    return m["body"], where


def codex_process(pid: int | None, hops: int = 4) -> tuple[int, str] | None:
    """(pid, working directory) of the Codex process at or above ``pid`` (Linux ``/proc``).

    Codex runs hooks through ``$SHELL -lc``, so the hook's parent is usually that shell, short-lived and
    sitting in the model's ``workdir``; Codex itself is the agent to name in the queue, and its directory
    (which the model cannot change) is the session's workspace."""
    for _ in range(hops):
        if pid is None or pid <= 1:
            return None
        try:
            if leanos.basename(leanos.readlink(f"/proc/{pid}/exe")) == "codex":
                cwd = leanos.readlink(f"/proc/{pid}/cwd")
                return (pid, cwd) if leanos.isabs(cwd) else None
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read(4096)
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


def call_fields_from_hook(
    payload: "Any", *, env: "Mapping[str, str]", agent_pid: int | None, fallback_cwd: str
) -> "dict[str, Any]":
    """Map a PreToolUse / PermissionRequest payload to the canonical request's wire dict."""
    event_of(payload)
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError("hook input field 'tool_name' must be a non-empty string")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        raise HookInputError("hook input field 'tool_input' must be a JSON object")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise HookInputError("hook input has no session_id")
    cwd = payload.get("cwd") or fallback_cwd
    if not isinstance(cwd, str) or not leanos.isabs(cwd):
        raise HookInputError("hook input field 'cwd' must be an absolute path")
    if tool == "Bash" and isinstance(tool_input.get("command"), str):
        patch = shell_apply_patch(tool_input["command"], cwd)
        if patch is not None:
            tool, tool_input, cwd = "apply_patch", {"command": patch[0]}, patch[1]
    mode = payload.get("permission_mode")
    tool_use_id = payload.get("tool_use_id")
    subagent_id, subagent_type = subagent_of(payload)
    process = codex_process(agent_pid)
    return call_fields(
        provider=PROVIDER,
        session=session,
        tool=tool,
        input=tool_input,
        cwd=cwd,
        mode=MODES.get(mode) if isinstance(mode, str) else None,
        agent_request_id=tool_use_id if isinstance(tool_use_id, str) and tool_use_id else None,
        agent_pid=process[0] if process else agent_pid,
        workspace=session_workspace(payload.get("transcript_path"), session) or (process[1] if process else None),
        subagent_id=subagent_id,
        subagent_type=subagent_type,
    )


class Answer:
    """What the hook does: print ``out`` (None: nothing) and exit 0, or, with ``block`` set, exit 2 with
    ``block`` on stderr. Denials use exit 2 because Codex runs the hook through the user's login shell
    (``$SHELL -lc``): a profile that prints to stdout would spoil a JSON deny, and Codex ignores (runs
    the call) what it cannot parse, while exit 2 with a reason blocks whatever else was printed.
    (A plain class: ``typing.NamedTuple`` would cost the hook its typing import.)"""

    __slots__ = ("block", "out")

    def __init__(self, out: "dict[str, Any] | None" = None, block: str | None = None) -> None:
        self.out = out
        self.block = block

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Answer) and (self.out, self.block) == (other.out, other.block)

    def __repr__(self) -> str:
        return f"Answer(out={self.out!r}, block={self.block!r})"


def hook_answer(event: str, decision: "Decision | LeanDecision", *, ask_allowed: bool) -> "Answer":
    """PreToolUse: an allow prints nothing (Codex's approval policy and sandbox still apply after nexusd),
    or ``allow`` + ``updatedInput`` when nexusd wraps the command in its sandbox; anything else blocks,
    since Codex's PreToolUse cannot ask. PermissionRequest: allow or deny; an ask (``--on-no-ui ask``
    with no nexusd UI) prints nothing so Codex's own approval prompt takes over. Codex refuses
    ``updatedInput`` on PermissionRequest, and granting Codex's escalation would run the command outside
    any sandbox, so an allow that nexusd gives only with its sandbox is a deny there.
    """
    kind = decision.decision
    # Codex shows a block as "Command blocked by PreToolUse hook: {reason}. Command: …": no final period of
    # ours, or the person reads ".."
    reason = model_reason(decision).rstrip(".")
    if event == PRE_TOOL_USE:
        if kind == "allow":
            if decision.updated_input is None:
                return Answer()
            out = {"hookEventName": PRE_TOOL_USE, "permissionDecision": "allow", "updatedInput": decision.updated_input}
            return Answer(out={"hookSpecificOutput": out})
        if kind == "ask":
            reason = f"{reason}; no nexusd UI answered, and Codex's PreToolUse hook cannot ask"
        return Answer(block=reason)
    if event == PERMISSION_REQUEST:
        if kind == "ask" and ask_allowed:
            return Answer()
        if kind == "allow" and decision.updated_input is None:
            return Answer(
                out={"hookSpecificOutput": {"hookEventName": PERMISSION_REQUEST, "decision": {"behavior": "allow"}}}
            )
        if kind == "allow":
            reason = "nexusd allows this command only inside its sandbox; Codex asked to run it outside its sandbox"
        return Answer(block=reason)
    raise HookInputError(f"unsupported hook event {event!r}")
