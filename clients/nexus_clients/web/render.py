"""A pending request as the page shows it: plain JSON, every agent-written string escaped here.

The page inserts these strings with ``textContent`` only, never as HTML, so markup is inert; this module
additionally makes invisible and control characters visible (``\\u202e``), exactly as the TUI does, so a
bidi override cannot make ``rm -rf ~`` read as something harmless in a browser either. The risk wording
is the TUI's (``risk``) and the shared effects module's: one set of words for every UI.
"""

from __future__ import annotations

import json
from typing import Any

from nexus_clients.effects import effects, headline
from nexus_clients.tui import request_view, risk
from nexus_clients.tui.escaping import MAX_LINES, escape_plain, has_hidden
from nexus_clients.tui.state import Entry

MAX_BLOCK_CHARS = 40_000  # a command, diff or input shown in full up to this, then cut with a marker


def line(text: str, limit: int | None = 400) -> str:
    return escape_plain(text, limit=limit)


def block(text: str) -> str:
    """Multi-line text: each line escaped, line and size limits with a visible marker."""
    lines = text.split("\n")
    shown = [escape_plain(x, limit=2000) for x in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        shown.append(f"… (+{len(lines) - MAX_LINES} more lines)")
    out = "\n".join(shown)
    if len(out) > MAX_BLOCK_CHARS:
        out = out[:MAX_BLOCK_CHARS] + f"\n… (+{len(out) - MAX_BLOCK_CHARS} chars)"
    return out


def lookalike(text: str) -> str:
    """A look-alike (punycode or non-ASCII) host name in ``text``, as a warning; "" when none."""
    return line(risk.lookalike(text), 400)


def item_view(entry: Entry, *, with_diff: bool = True) -> dict[str, Any]:
    """Everything a person needs to answer one request, as strings fit for ``textContent``."""
    item = entry.item
    call, verdict = item.call, item.verdict
    command = call.input.get("command")
    raw = json.dumps(call.input, ensure_ascii=False)
    hidden = has_hidden(raw)
    view: dict[str, Any] = {
        "id": item.id,
        "provider": line(call.provider, 40),
        "session": line(call.session, 200),
        # the subagent making the call (Claude Code, Codex), attribution only
        "subagent": line(" ".join(x for x in (call.subagent_type, call.subagent_id) if x), 300),
        "agent_pid": call.agent_pid,
        "peer_pid": item.peer_pid,
        "workspace": line(request_view.workspace(entry), 1000),
        "cwd": line(call.cwd, 1000),
        "mode": line(call.mode or "", 40),
        "tool": line(call.tool, 200),
        "summary": line(request_view.summary(entry), 300),
        "command": block(command) if isinstance(command, str) else None,
        "input": block(json.dumps(call.input, ensure_ascii=False, indent=2, sort_keys=True)),
        "hidden_chars": hidden,
        "tier": risk.tier(verdict),
        "dangerous": risk.is_dangerous(verdict),
        "headline": line(headline(call, verdict)),
        "effects": [line(e.text) for e in effects(call, verdict)],
        "flags": [line(x) for x in risk.flag_lines(verdict)],
        "reason": line(risk.person_reason(verdict.reason), 1000),
        "requirement": verdict.requirement or "",
        "reach": line(risk.requirement_text(verdict)),  # the requirement in a person's words
        "stated": line(risk.stated_reason(call), 1000),  # the agent's own description of the call: a claim
        "lookalike": lookalike(
            " ".join(
                x for x in (request_view.summary(entry), (verdict.details.domain if verdict.details else "") or "")
            )
        ),
        "hold_limit": item.hold_limit,
        # what "edit, then allow" starts from: the raw text, only when it holds no hidden characters (a bidi
        # control in an editable field would make the edit read differently from what is sent)
        "editable": command if isinstance(command, str) and not hidden and len(command) <= MAX_BLOCK_CHARS else None,
        "raw_input": call.input if not hidden and len(raw) <= MAX_BLOCK_CHARS else None,
        "suggestions": [line(s, 1000) for s in verdict.suggestions],
        "never_rules": [line(s, 1000) for s in (verdict.suggestions or [risk.exact_rule(call, verdict)])],
        "created": item.created,
        "deadline": item.deadline,
        "seen_at": entry.seen_at,
        "diff": None,
    }
    if with_diff:
        change = request_view.file_change(entry)
        if change is not None:
            view["diff"] = {"path": line(change.path, 1000), "text": block(change.diff), "note": line(change.note)}
    return view


def resolved_view(entry: Entry) -> dict[str, Any]:
    r = entry.resolved
    assert r is not None
    return {
        "id": entry.id,
        "decision": r.decision,
        "source": r.source,
        "outcome": line(entry.outcome(), 400),
        "answered_by": line(r.answered_by or "", 200),
    }
