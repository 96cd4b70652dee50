"""A pending request rendered for a person: pure functions from protocol data to Rich ``Text``.

Every agent-controlled string goes through ``escaping.safe_text``; nothing here builds markup strings.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from rich.text import Text

from nexus_clients.effects import effects, headline
from nexus_clients.tui import risk
from nexus_clients.tui.escaping import has_hidden, safe_text
from nexus_clients.tui.filediff import Change, change_for, read_current
from nexus_clients.tui.state import Entry
from nexusd.core.tools import SHELL_TOOLS
from nexusd.protocol import CallInfo

LABEL = "bold"
FETCH_TOOLS = frozenset({"WebFetch", "web_fetch", "fetch"})
PREVIEW_FLAG = "preview"  # the daemon's flag on a preview's ask (nexusd.sandbox.previewrun)


def countdown(entry: Entry, now: float) -> str:
    if not entry.pending:
        return "done"
    left = entry.remaining(now)
    return "0s" if left <= 0 else f"{int(left + 0.999)}s"


def short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def summary(entry: Entry) -> str:
    """The one-line gist of a call: its command, path, URL or first argument."""
    inp = entry.item.call.input
    for key in ("command", "file_path", "path", "url", "pattern", "query", "notebook_path", "prompt"):
        value = inp.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return shlex.join(value)
    return json.dumps(inp, ensure_ascii=False, sort_keys=True)[:200]


def workspace(entry: Entry) -> str:
    call = entry.item.call
    return call.workspace or call.cwd


def agent_label(call: CallInfo) -> str:
    """Which agent asks: the product, and the subagent when one makes the call (``claude›Explore``)."""
    sub = call.subagent_type or call.subagent_id
    return f"{call.provider}›{sub}" if sub else call.provider


def queue_cells(entry: Entry, now: float) -> list[Text]:
    """Cells of one queue row: countdown, agent (product›subagent), session, workspace, tool, summary."""
    call = entry.item.call
    tier = risk.tier(entry.item.verdict)
    dim = "" if entry.pending else "dim"
    if entry.pending:
        clock = Text(countdown(entry, now), style="bold reverse red" if entry.urgent(now) else "bold")
    else:
        clock = Text("✓" if entry.resolved and entry.resolved.decision == "allow" else "✗", style="dim")
    tool = safe_text(short(call.tool, 24), style=dim or risk.TIER_STYLE[tier])
    gist = safe_text(short(summary(entry), 120), style=dim) if entry.pending else Text(entry.outcome(), style="dim")
    if risk.lookalike(summary(entry)):
        gist = Text("⚠ look-alike domain ", style="bold red") + gist
    return [
        clock,
        safe_text(short(agent_label(call), 16), style=dim),
        safe_text(short(call.session, 10), style=dim),
        safe_text(short(workspace(entry), 28), style=dim),
        tool,
        gist,
    ]


def _section(title: str) -> Text:
    return Text(f"── {title} ", style="bold cyan")


def _kv(label: str, value: Text | str, style: str = "") -> Text:
    line = Text(f"{label}: ", style=LABEL)
    line.append_text(value if isinstance(value, Text) else Text(value, style=style))
    return line


def _paths(label: str, paths: list[str], style: str) -> Text:
    line = Text(f"{label}: ", style=LABEL)
    for n, p in enumerate(paths):
        if n:
            line.append(", ")
        line.append_text(safe_text(p, style=style))
    return line


def _diff_text(diff: str) -> Text:
    out = Text()
    for n, line in enumerate(diff.splitlines()):
        if n:
            out.append("\n")
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        out.append_text(safe_text(line, style=style))
    return out


def _shell_text(command: str) -> Text:
    """The command with light highlighting: operators and redirections stand out, escapes stay visible."""
    text = safe_text(command, multiline=True)
    text.highlight_regex(r"(\|\||&&|;|\||>>|>|<|&)", "bold magenta")
    text.highlight_regex(r"\$\(|`|\$\{|\beval\b|\bsudo\b", "bold red")
    return text


def normalized_domain(url: str) -> str | None:
    """A local fallback when the classifier sent no domain: lowercase, IDNA (punycode), no port/dot."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def file_change(entry: Entry, reader: Callable[[str], Any] = read_current) -> Change | None:
    """Reads the target file: compute once per request, not on every countdown tick."""
    call = entry.item.call
    return change_for(call.tool, call.input, call.cwd, reader)


def detail(entry: Entry, now: float, change: Change | None = None) -> list[Text]:  # noqa: C901 - one block per kind of detail
    """The selected request in full, as a list of lines/blocks (a ``Group`` in the widget).

    ``change`` is ``file_change(entry)``, computed by the caller (it reads the file system).
    """
    item = entry.item
    call, verdict = item.call, item.verdict
    det = verdict.details
    out: list[Text] = []

    head = Text()
    head.append_text(safe_text(call.tool, style="bold " + risk.TIER_STYLE[risk.tier(verdict)]))
    head.append("  from ")
    head.append_text(safe_text(call.provider, style="bold"))
    head.append("  session ")
    head.append_text(safe_text(call.session, style="bold"))
    if call.subagent_id or call.subagent_type:
        head.append("  subagent ")
        head.append_text(safe_text(call.subagent_type or "?", style="bold"))
        if call.subagent_id:
            head.append_text(safe_text(f" ({call.subagent_id})", style="dim"))
    if entry.pending:
        left = entry.remaining(now)
        head.append(f"  auto-deny in {countdown(entry, now)}", style="bold reverse red" if entry.urgent(now) else "")
    out.append(head)
    if entry.pending:
        limit = item.hold_limit
        if entry.holdable(now) and limit is not None:
            hold = Text(f"  h: hold for more time (up to {max(0, int(limit - now))} s from now: what the agent waits)")
            out.append(Text(hold.plain, style="bold yellow" if entry.urgent(now) else "dim"))
        if entry.urgent(now) and left > 0:
            what = "answer now, or h to hold it" if entry.holdable(now) else "answer now: its agent cannot wait longer"
            out.append(Text(f"⚠ {int(left + 0.999)} s left before the automatic deny: {what}", style="bold red"))
    if not entry.pending:
        out.append(Text(entry.outcome(), style="bold reverse yellow"))
    place = _kv("workspace", safe_text(workspace(entry)))
    if call.cwd != workspace(entry):
        place.append("  cwd: ", style=LABEL)
        place.append_text(safe_text(call.cwd))
    if call.mode:
        place.append("  agent mode: ", style=LABEL)
        place.append_text(safe_text(call.mode))
    if call.agent_pid:
        place.append(f"  agent pid {call.agent_pid}", style="dim")
    out.append(place)

    tier = risk.tier(verdict)
    found = effects(call, verdict)
    line = _kv("risk", Text(tier, style=risk.TIER_STYLE[tier]))
    line.append(" — ")
    line.append_text(safe_text(headline(call, verdict), style="bold"))
    out.append(line)
    reach = risk.requirement_text(verdict)
    if reach:
        out.append(_kv("if allowed", Text(reach)))
    for effect in found[1:]:
        out.append(Text("  also ", style="dim") + safe_text(effect.text))
    why = _kv("why asked", safe_text(risk.person_reason(verdict.reason)))
    out.append(why)
    stated = risk.stated_reason(call)
    if stated:
        said = _kv("the agent says", safe_text(f"“{stated}”", style="italic"))
        said.append(" (its own words, not checked)", style="dim")
        out.append(said)
    lookalike = risk.lookalike(" ".join([summary(entry), (det.domain if det and det.domain else "")]))
    if lookalike:
        out.append(Text("  ⚠ ", style="bold red") + safe_text(lookalike, style="bold red"))
    for reason in risk.flag_lines(verdict):
        out.append(Text("  ⚠ ", style="bold red") + safe_text(reason, style="red"))

    inp = call.input
    command = inp.get("command")
    if call.tool in SHELL_TOOLS or (det and det.kind == "shell"):
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        if isinstance(command, str):
            out.append(_section("command"))
            if has_hidden(command):
                out.append(Text("contains hidden or control characters, shown escaped", style="bold red"))
            out.append(_shell_text(command))
        if det and det.commands:
            out.append(_section(f"{len(det.commands)} sub-command(s) found by the classifier"))
            for n, argv in enumerate(det.commands, 1):
                out.append(Text(f"{n}. ", style="dim") + safe_text(shlex.join(argv)))

    if change is not None:
        out.extend(_change_block(change))

    previewed = PREVIEW_FLAG in verdict.flags and isinstance(inp.get("diff"), str)
    if previewed:  # a sandboxed command's changes, held in an overlay (docs/UNDO.md): allow applies, deny discards
        out.append(_section("preview: what the command changed (allow applies it, deny discards it)"))
        out.append(_kv("command", safe_text(str(inp.get("command", "")))))
        out.append(_kv("exit code", safe_text(str(inp.get("exit_code", "?")))))
        out.append(_kv("summary", safe_text(str(inp.get("summary", "")))))
        out.append(_diff_text(str(inp["diff"])))

    url = inp.get("url")
    if isinstance(url, str) and (call.tool in FETCH_TOOLS or (det and det.kind == "fetch")):
        out.append(_section("fetch"))
        out.append(_kv("url", safe_text(url)))
        domain = det.domain if det and det.domain else normalized_domain(url)
        label = "domain" if det and det.domain else "domain (normalized here)"
        out.append(_kv(label, safe_text(domain or "none: not a URL with a host", style="bold")))
        if isinstance(inp.get("prompt"), str):
            out.append(_kv("prompt", safe_text(inp["prompt"], multiline=True)))

    if det and (det.reads or det.writes):
        out.append(_section("files"))
        if det.reads:
            out.append(_paths("reads", det.reads, "cyan"))
        if det.writes:
            out.append(_paths("writes", det.writes, "yellow"))

    shown = {"command"} if isinstance(command, str) else set()
    if change is not None:
        shown |= {"file_path", "content", "old_string", "new_string", "edits", "replace_all", "path"}
    fetched = isinstance(url, str) and (call.tool in FETCH_TOOLS or bool(det and det.kind == "fetch"))
    if fetched:
        shown |= {"url", "prompt"}
    if previewed:
        pass  # shown above, whole
    elif not (call.tool in SHELL_TOOLS or change is not None or fetched):
        title = "MCP arguments" if (call.tool.startswith("mcp__") or (det and det.kind == "mcp")) else "arguments"
        out.append(_section(title))
        out.append(_json_text(inp))
    elif extra := {k: v for k, v in inp.items() if k not in shown}:
        out.append(_section("other arguments"))
        out.append(_json_text(extra))

    out.append(_section('"always" would add'))
    if verdict.suggestions:
        for rule in verdict.suggestions:
            out.append(Text("  allow ", style="green") + safe_text(rule, style="bold"))
    else:
        out.append(Text("nothing: no rule narrow enough to learn safely (answer once or for this session)", "dim"))
    return out


def _json_text(value: Any) -> Text:
    return safe_text(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str), multiline=True)


def _change_block(change: Change) -> list[Text]:
    out = [_section("change") + safe_text(change.path, style="yellow")]
    if change.note:
        out.append(Text("note: ", style=LABEL) + safe_text(change.note, style="yellow"))
    if change.diff:
        out.append(_diff_text(change.diff))
    elif not change.note:
        out.append(Text("no change", style="dim"))
    return out
