"""Dialogs (deny message, rule editor, confirmation, mode, help) and the other screens (decisions,
rules, grants, status).

A dialog returns what the person chose through ``dismiss`` (a ``ModalScreen[T]``); the caller awaits it with
``push_screen_wait`` and acts on it. A full screen talks to nexusd only through the ``DaemonCall`` it was
built with. No screen knows the app, so this module never imports it. Untrusted text is ``Text``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar, Literal

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

from nexus_clients.tui import risk
from nexus_clients.tui.escaping import escape_plain, safe_text
from nexus_clients.tui.link import DaemonCall, describe_error
from nexusd import protocol

# (seconds left before the automatic deny, or None once decided; whether a hold can still push it)
TimeLeftFn = Callable[[], tuple[float | None, bool]]
# the daemon's one narrowness check: the rules, kind -> one verdict per rule
RuleCheckFn = Callable[[Literal["allow", "deny"], list[str]], Awaitable[list[protocol.RuleVerdict]]]
HOLD_KEY = "ctrl+o"  # holds the ask from any screen (it only delays the deny); "h" on the queue screen


class TimeLeft(Static):
    """Every dialog's line of time: how long until the automatic deny, urgent near the end, and the hold key."""

    def __init__(self, left: TimeLeftFn | None, **kw: object) -> None:
        super().__init__("", **kw)  # type: ignore[arg-type]
        self.left = left

    def on_mount(self) -> None:
        if self.left is not None:
            self.tick()
            self.set_interval(0.5, self.tick)

    def tick(self) -> None:
        if self.left is None:
            return
        left, holdable = self.left()
        if left is None:
            self.update(Text("this request was decided meanwhile: nothing will be sent for it", style="bold yellow"))
            return
        urgent = left <= 10
        text = Text(f"time left: {max(0, int(left + 0.999))}s", style="bold reverse red" if urgent else "bold")
        if holdable:
            text.append(f"  ({HOLD_KEY}: hold for more time)", style="bold yellow" if urgent else "dim")
        elif urgent:
            text.append("  answer now: its agent cannot wait longer", style="bold red")
        self.update(text)


class DenyMessageScreen(ModalScreen[str | None]):
    """Deny, with a message the model will read (why, or what to do instead).

    ``remaining`` (seconds left before the daemon denies the request by itself, or None once it is
    decided) drives a countdown: typing a message takes time, and a person should see it run out.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(
        self,
        what: Text,
        remaining: Callable[[], float | None] | None = None,
        holdable: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self.what = what
        self.remaining = remaining
        self.holdable = holdable

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text("Deny, with a message to the model", style="bold"))
            yield Static(self.what)
            yield TimeLeft(self._left if self.remaining is not None else None, id="deny-countdown")
            yield Input(placeholder="message (Enter sends the deny, Esc cancels)", id="deny-message", max_length=2000)

    def _left(self) -> tuple[float | None, bool]:
        assert self.remaining is not None
        left = self.remaining()
        return left, bool(self.holdable and self.holdable())

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DurationScreen(ModalScreen[float | None]):
    """Allow for a while: the suggested rules hold for every session until the duration ends."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, what: Text, left: TimeLeftFn | None = None) -> None:
        super().__init__()
        self.what = what
        self.left = left

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text("Allow for a while (a timed grant, revocable in the grants screen)", style="bold"))
            yield Static(self.what)
            yield TimeLeft(self.left)
            yield Static("", id="duration-error")
            yield Input(
                value="15m",
                placeholder="90s, 15m, 1h, 2d, eod (Enter grants, Esc cancels)",
                id="duration",
                max_length=40,
            )

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        from nexusd.client import parse_duration

        try:
            self.dismiss(parse_duration(event.value))
        except ValueError as e:
            self.query_one("#duration-error", Static).update(Text(str(e), style="red"))

    def action_cancel(self) -> None:
        self.dismiss(None)


class EditInputScreen(ModalScreen[dict | None]):
    """Edit the call before allowing it once: the command of a shell call, else the input as JSON. nexusd decides
    the edited call again and refuses an edit that widens it; the diff is shown before it is sent."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, what: Text, original: dict, left: TimeLeftFn | None = None) -> None:
        super().__init__()
        self.left = left
        self.what = what
        self.original = original
        self.shell = isinstance(original.get("command"), str)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(Text("Edit, then allow once (nexusd checks the edit again)", style="bold"))
            yield Static(self.what)
            yield TimeLeft(self.left)
            yield Static("", id="edit-error")
            text = self.original["command"] if self.shell else json.dumps(self.original, ensure_ascii=False)
            yield Input(
                value=text,
                id="edit-input",
                max_length=20000,
                placeholder="the command" if self.shell else "the tool input, as a JSON object",
            )

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        if self.shell:
            self.dismiss({**self.original, "command": event.value})
            return
        try:
            value = json.loads(event.value)
        except ValueError as e:
            self.query_one("#edit-error", Static).update(Text(f"not JSON: {e}", style="red"))
            return
        if not isinstance(value, dict):
            self.query_one("#edit-error", Static).update(Text("the input must be a JSON object", style="red"))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def input_diff(original: dict, edited: dict) -> Text:
    """A unified diff of the two inputs (one key per line), with untrusted text escaped."""
    import difflib

    def lines(d: dict) -> list[str]:
        return [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(d.items())]

    out = Text()
    for line in difflib.unified_diff(lines(original), lines(edited), "agent's call", "edited", lineterm="", n=2):
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        out.append_text(safe_text(line, style=style))
        out.append("\n")
    return out


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; anything but an explicit yes is a no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "no"),
    ]

    def __init__(self, question: Text, left: TimeLeftFn | None = None) -> None:
        super().__init__()
        self.left = left
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield TimeLeft(self.left)
            yield Static(self.question)
            with Horizontal(classes="buttons"):
                yield Button("y: yes", id="confirm-yes", variant="error", compact=True)
                yield Button("n: no", id="confirm-no", variant="default", compact=True)

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")


class RuleEditScreen(ModalScreen[list[protocol.RuleVerdict] | None]):
    """Shows the rule(s) "always"/"never" will persist and lets the person narrow or edit them.

    Each rule is checked by the daemon's one narrowness check (``rule_check``), live: a refused rule (a
    blanket: a whole tool, ``Bash(*)``, a launcher like ``bash *``) cannot be confirmed; a wide one
    (``Bash(rm *)``) is returned with its reason, for the caller to confirm explicitly. An emptied line
    drops that rule. Returns the rules with their verdicts.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "confirm", "confirm"),
    ]

    def __init__(
        self,
        kind: Literal["allow", "deny"],
        rules: list[str],
        what: Text,
        check: RuleCheckFn | None = None,
        left: TimeLeftFn | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.rules = rules or [""]
        self.what = what
        self.check = check
        self.left = left
        self.verdicts: list[protocol.RuleVerdict] = []
        self.checked: list[str] | None = None  # the rules the verdicts are for

    def compose(self) -> ComposeResult:
        verb = "always allow" if self.kind == "allow" else "never allow (deny rule)"
        with Vertical(classes="dialog"):
            yield Label(Text(f"{verb}: the rule(s) nexusd will persist", style="bold"))
            yield Static(self.what)
            yield TimeLeft(self.left)
            for n, rule in enumerate(self.rules):
                yield Input(value=rule, id=f"rule-{n}", classes="rule", max_length=4000)
            yield Static(id="rule-check")
            with Horizontal(classes="buttons"):
                yield Button("Enter: persist", id="rule-ok", variant="primary", compact=True)
                yield Button("Esc: cancel", id="rule-cancel", compact=True)

    def on_mount(self) -> None:
        self.run_check()

    def values(self) -> list[str]:
        return [i.value.strip() for i in self.query(Input) if i.value.strip()]

    def problems(self) -> list[str]:
        rules = self.values()
        if not rules:
            return ["no rule left: cancel instead"]
        if self.checked != rules:
            return ["checking with nexusd…"]
        return [f"{escape_plain(v.rule, limit=80)}: {v.reason}" for v in self.verdicts if v.status == "refused"]

    @work(exclusive=True, group="rule-check")
    async def run_check(self) -> None:
        await self.check_now()

    async def check_now(self) -> None:
        """Ask the daemon's one check about the rules as they stand (the last edit wins)."""
        rules = self.values()
        if rules and self.check is not None:
            try:
                verdicts = await self.check(self.kind, rules)
            except Exception as e:
                verdicts = [protocol.RuleVerdict(r, "refused", f"not checked: {describe_error(e)}") for r in rules]
        else:
            verdicts = [protocol.RuleVerdict(r, "refused", "not checked: no connection to nexusd") for r in rules]
        if rules == self.values():
            self.verdicts, self.checked = verdicts, rules
        self._show()

    def _show(self) -> None:
        problems = self.problems()
        text = Text()
        if problems and self.checked == self.values() and self.values():
            unchecked = all(v.reason.startswith("not checked") for v in self.verdicts if v.status == "refused")
            text.append("cannot persist:\n" if unchecked else "refused, too broad:\n", style="bold red")
            text.append("\n".join(problems), style="red")
        elif problems:
            text.append("\n".join(problems), style="dim")
        else:
            for v in self.verdicts:
                style = {"ok": "green", "confirm": "bold yellow"}.get(v.status, "red")
                word = {"ok": "ok", "confirm": "wide, you confirm next"}.get(v.status, v.status)
                text.append_text(safe_text(f"{word}: {v.rule} — {v.reason}\n", style=style))
        self.query_one("#rule-check", Static).update(text)

    @on(Input.Changed)
    def changed(self) -> None:
        self._show()
        self.run_check()

    @on(Input.Submitted)
    async def submitted(self) -> None:
        await self.action_confirm()

    @on(Button.Pressed, "#rule-ok")
    async def ok(self) -> None:
        await self.action_confirm()

    @on(Button.Pressed, "#rule-cancel")
    def cancel_pressed(self) -> None:
        self.dismiss(None)

    async def action_confirm(self) -> None:
        if self.values() and self.checked != self.values():
            await self.check_now()  # Enter pressed before the live check came back: ask now, then decide
        if self.problems():
            self._show()
            self.app.bell()
            return
        self.dismiss(list(self.verdicts))

    def action_cancel(self) -> None:
        self.dismiss(None)


# The common names of docs/POLICY.md's mode table; the daemon accepts every name listed there.
KNOWN_MODES = ["default", "CAUTIOUS", "plan", "acceptEdits", "auto", "dontAsk", "bypassPermissions", "read-only"]


class ModeScreen(ModalScreen[tuple[bool, str | None]]):
    """Set (or clear) a person's mode override for one session. Returns (confirmed, mode)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, session: str, current: str | None) -> None:
        super().__init__()
        self.session = session
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            title = Text("Mode for session ", style="bold")
            title.append_text(safe_text(self.session, style="bold"))
            yield Label(title)
            yield Static(Text(f"now: {self.current or 'unknown'}   known: {', '.join(KNOWN_MODES)}", style="dim"))
            yield Input(placeholder="mode (empty: clear the override), Enter to set", id="mode-input")

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss((True, event.value.strip() or None))

    def action_cancel(self) -> None:
        self.dismiss((False, None))


HELP = [
    ("y", "allow once"),
    ("s", "allow for this session"),
    ("f", "allow for a while (15 min, 1 h, end of day ...)"),
    ("i", "edit the call, then allow it once (never wider)"),
    ("a", "always: edit, then persist an allow rule (dangerous requests ask again)"),
    ("n", "deny"),
    ("N", "deny with a message to the model"),
    ("x", "deny and stop the agent's turn"),
    ("e", "never: edit, then persist a deny rule"),
    ("h", "hold: more time for the selected request, up to what its agent waits (ctrl+o in a dialog)"),
    ("m", "change the selected session's mode"),
    ("j / k, ↓ / ↑", "move through the queue"),
    ("tab / shift+tab", "jump to the next / previous waiting request"),
    ("d", "recent decisions (audit trail)"),
    ("r", "rules by layer; learned rules can be removed"),
    ("g", "grants: what people allowed beyond one call; x revokes"),
    ("t", "status: daemon, connections, policy errors, sandbox"),
    ("?", "this help"),
    ("q", "quit (pending requests stay pending for other UIs)"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "close")]

    def compose(self) -> ComposeResult:
        text = Text("nexus-tui keys\n\n", style="bold")
        for key, what in HELP:
            text.append(f"{key:>16}  ", style="bold cyan")
            text.append(what + "\n")
        text.append(
            "\nA request that just arrived cannot be answered for a moment, and the selection never"
            " jumps to another request by itself. Answers are sent at once or not at all.",
            style="dim",
        )
        with VerticalScroll(classes="dialog"):
            yield Static(text)

    def action_close(self) -> None:
        self.dismiss(None)


# --------------------------------------------------------------------------- full screens


class AuditScreen(Screen[None]):
    """Recent decisions from the audit trail, newest first, filtered by exact match on the daemon."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+r", "refresh", "refresh"),
    ]

    def __init__(self, call: DaemonCall, records: list[protocol.AuditRecord] | None = None) -> None:
        """``records`` shows those instead of asking the daemon (snapshot tests)."""
        super().__init__()
        self.call = call
        self.initial = records

    def compose(self) -> ComposeResult:
        yield Label(Text("Recent decisions (filters are exact; Enter applies)", style="bold"))
        with Horizontal(id="audit-filters"):
            yield Input(placeholder="session", id="f-session", compact=True)
            yield Input(placeholder="tool", id="f-tool", compact=True)
            yield Input(placeholder="decision", id="f-decision", compact=True)
            yield Input(placeholder="source", id="f-source", compact=True)
        yield Static(id="audit-message")
        yield DataTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("time", "decision", "source", "session", "tool", "request", "by")
        if self.initial is None:
            self.action_refresh()
        else:
            self.show(protocol.AuditReply(records=self.initial))

    def query_message(self) -> protocol.Audit | str:
        values = {k: self.query_one(f"#f-{k}", Input).value.strip() or None for k in ("session", "tool")}
        decision = self.query_one("#f-decision", Input).value.strip() or None
        source = self.query_one("#f-source", Input).value.strip() or None
        if decision and decision not in ("allow", "deny", "ask"):
            return "decision must be allow, deny or ask"
        sources = protocol.Source.__args__  # type: ignore[attr-defined]
        if source and source not in sources:
            return f"source must be one of {', '.join(sources)}"
        return protocol.Audit(limit=200, decision=decision, source=source, **values)  # type: ignore[arg-type]

    @on(Input.Submitted)
    def submitted(self) -> None:
        self.action_refresh()

    @work(exclusive=True, group="audit")
    async def action_refresh(self) -> None:
        msg = self.query_one("#audit-message", Static)
        query = self.query_message()
        if isinstance(query, str):
            msg.update(Text(query, style="red"))
            return
        try:
            reply = await self.call(query)
        except Exception as e:
            msg.update(Text(f"cannot load decisions: {describe_error(e)}", style="red"))
            return
        if not isinstance(reply, protocol.AuditReply):
            msg.update(Text("unexpected reply", style="red"))
            return
        self.show(reply)

    def show(self, reply: protocol.AuditReply) -> None:
        msg = self.query_one("#audit-message", Static)
        table = self.query_one(DataTable)
        table.clear()
        for r in reversed(reply.records):
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.time))  # history spans days: dated
            style = "green" if r.decision == "allow" else "red"
            what = safe_text(r.summary[:100])
            if risk.lookalike(r.summary):
                what = Text("⚠ look-alike domain ", style="bold red") + what
            table.add_row(
                Text(when),
                Text(r.decision, style=style),
                Text(r.source),
                safe_text(r.session[:12]),
                safe_text(r.tool[:24]),
                what,
                safe_text((r.answered_by or r.rule or "")[:40]),
            )
        msg.update(Text(f"{len(reply.records)} decisions", style="dim"))


class RulesScreen(Screen[None]):
    """Rules by layer with where each came from; learned rules can be removed (x)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+r", "refresh", "refresh"),
        Binding("x,delete", "remove", "remove learned rule"),
    ]

    def __init__(self, call: DaemonCall, reply: protocol.RulesReply | None = None) -> None:
        """``reply`` shows that instead of asking the daemon (snapshot tests)."""
        super().__init__()
        self.call = call
        self.rules: list[protocol.RuleInfo] = []
        self.initial = reply

    def compose(self) -> ComposeResult:
        yield Label(Text("Rules by layer (x removes the selected learned rule)", style="bold"))
        yield Static(id="rules-message")
        yield DataTable(id="rules-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("layer", "kind", "rule", "origin", "")
        if self.initial is None:
            self.action_refresh()
        else:
            self.show(self.initial)

    @work(exclusive=True, group="rules")
    async def action_refresh(self) -> None:
        msg = self.query_one("#rules-message", Static)
        try:
            reply = await self.call(protocol.Rules())
        except Exception as e:
            msg.update(Text(f"cannot load rules: {describe_error(e)}", style="red"))
            return
        if not isinstance(reply, protocol.RulesReply):
            msg.update(Text("unexpected reply", style="red"))
            return
        self.show(reply)

    def show(self, reply: protocol.RulesReply) -> None:
        msg = self.query_one("#rules-message", Static)
        self.rules = sorted(reply.rules, key=lambda r: (r.layer, r.kind, r.rule))
        table = self.query_one(DataTable)
        table.clear()
        for r in self.rules:
            style = {"allow": "green", "deny": "red", "ask": "yellow"}[r.kind]
            note = "removable" if r.removable else ""
            if r.warning:
                note = (note + " ⚠ " + r.warning).strip()
            table.add_row(
                safe_text(r.layer), Text(r.kind, style=style), safe_text(r.rule), safe_text(r.origin), safe_text(note)
            )
        trusted = f"; trusted folders: {len(reply.trusted)}" if reply.trusted else ""
        msg.update(Text(f"{len(self.rules)} rules{trusted}", style="dim"))

    @work(exclusive=True, group="rules-remove")
    async def action_remove(self) -> None:
        table = self.query_one(DataTable)
        msg = self.query_one("#rules-message", Static)
        if not self.rules or table.cursor_row < 0 or table.cursor_row >= len(self.rules):
            return
        rule = self.rules[table.cursor_row]
        if not rule.removable:
            msg.update(Text("only learned rules can be removed here; edit the policy file for the others", "yellow"))
            return
        question = Text(f"Remove the learned {rule.kind} rule ")
        question.append_text(safe_text(rule.rule, style="bold"))
        question.append("?")
        if not await self.app.push_screen_wait(ConfirmScreen(question)):
            return
        try:
            await self.call(protocol.RuleChange(action="remove", kind=rule.kind, rule=rule.rule))
        except Exception as e:
            msg.update(Text(f"not removed: {describe_error(e)}", style="red"))
            return
        self.action_refresh()


class GrantsScreen(Screen[None]):
    """Every grant in force (timed, session, learned): who gave it, when, until when, how often used; x revokes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+r", "refresh", "refresh"),
        Binding("x,delete", "revoke", "revoke"),
    ]

    def __init__(self, call: DaemonCall, reply: protocol.GrantsReply | None = None) -> None:
        """``reply`` shows that instead of asking the daemon (snapshot tests)."""
        super().__init__()
        self.call = call
        self.grants: list[protocol.GrantInfo] = []
        self.initial = reply

    def compose(self) -> ComposeResult:
        yield Label(
            Text("Grants in force (x revokes the selected one; it stops applying from the next call)", style="bold")
        )
        yield Static(id="grants-message")
        yield DataTable(id="grants-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("id", "kind", "rule", "scope", "until", "given by", "when", "uses")
        if self.initial is None:
            self.action_refresh()
        else:
            self.show(self.initial)

    @work(exclusive=True, group="grants")
    async def action_refresh(self) -> None:
        msg = self.query_one("#grants-message", Static)
        try:
            reply = await self.call(protocol.Grants())
        except Exception as e:
            msg.update(Text(f"cannot load grants: {describe_error(e)}", style="red"))
            return
        if not isinstance(reply, protocol.GrantsReply):
            msg.update(Text("unexpected reply", style="red"))
            return
        self.show(reply)

    @staticmethod
    def _until(g: protocol.GrantInfo) -> str:
        if g.scope == "timed" and g.expires is not None:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(g.expires))
        if g.scope == "session":
            return f"session {g.session}"
        return "revoked"

    def show(self, reply: protocol.GrantsReply) -> None:
        msg = self.query_one("#grants-message", Static)
        self.grants = sorted(reply.grants, key=lambda g: (g.scope, g.expires or 0.0, g.rule))
        table = self.query_one(DataTable)
        table.clear()
        for g in self.grants:
            when = time.strftime("%H:%M:%S", time.localtime(g.given_at)) if g.given_at else "?"
            table.add_row(
                safe_text(g.id),
                Text(g.kind, style="green" if g.kind == "allow" else "red"),
                safe_text(g.rule),
                safe_text(g.scope),
                safe_text(self._until(g)),
                safe_text(g.given_by or "(not recorded)"),
                safe_text(when),
                str(g.uses),
            )
        msg.update(Text(f"{len(self.grants)} grants", style="dim"))

    @work(exclusive=True, group="grants-revoke")
    async def action_revoke(self) -> None:
        table = self.query_one(DataTable)
        msg = self.query_one("#grants-message", Static)
        if not self.grants or table.cursor_row < 0 or table.cursor_row >= len(self.grants):
            return
        g = self.grants[table.cursor_row]
        question = Text(f"Revoke the {g.scope} {g.kind} grant ")
        question.append_text(safe_text(g.rule, style="bold"))
        question.append("?")
        if not await self.app.push_screen_wait(ConfirmScreen(question)):
            return
        try:
            await self.call(protocol.RevokeGrant(id=g.id))
        except Exception as e:
            msg.update(Text(f"not revoked: {describe_error(e)}", style="red"))
            return
        self.action_refresh()


class StatusScreen(Screen[None]):
    """What the daemon is doing: version, connections, policy sources and errors, sandbox probe."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+r", "refresh", "refresh"),
    ]

    def __init__(
        self, call: DaemonCall, reply: protocol.StatusReply | None = None, workspace: str | None = None
    ) -> None:
        """``reply`` shows that instead of asking the daemon (snapshot tests); ``workspace`` is the one whose
        sandbox settings are shown (default: the directory the TUI was started in)."""
        super().__init__()
        self.call = call
        self.initial = reply
        self.workspace = workspace or os.getcwd()
        self.plain = ""  # what is shown, as plain text (tests read it)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("loading status…", style="dim"), id="status-body")
        yield Footer()

    def on_mount(self) -> None:
        if self.initial is None:
            self.action_refresh()
        else:
            self.show(self.initial)

    def show(self, reply: protocol.StatusReply, plan: protocol.SandboxPlanReply | None = None) -> None:
        lines = status_lines(reply)
        if plan is not None:
            lines += workspace_sandbox_lines(self.workspace, plan)
        self.plain = "\n".join(line.plain for line in lines)
        self.query_one("#status-body", Static).update(Group(*lines))

    @work(exclusive=True, group="status")
    async def action_refresh(self) -> None:
        body = self.query_one("#status-body", Static)
        try:
            reply = await self.call(protocol.Status())
        except Exception as e:
            body.update(Text(f"cannot load status: {describe_error(e)}", style="red"))
            return
        if not isinstance(reply, protocol.StatusReply):
            return
        plan: protocol.SandboxPlanReply | None = None
        try:
            answer = await self.call(protocol.SandboxPlan(command="true", cwd=self.workspace, workspace=self.workspace))
            plan = answer if isinstance(answer, protocol.SandboxPlanReply) else None
        except Exception:
            plan = None  # the daemon's status is still worth showing
        self.show(reply, plan)


def workspace_sandbox_lines(workspace: str, plan: protocol.SandboxPlanReply) -> list[Text]:
    """Whether agents' shell calls in ``workspace`` run sandboxed and are auto-allowed, and what they reach."""
    out = [Text("\nsandbox for ", style="bold underline") + safe_text(workspace, style="bold underline")]
    on = plan.transparent and plan.allowed
    out.append(
        Text("agents' shell calls: " + ("run sandboxed" if on else "NOT sandboxed"), style="green" if on else "yellow")
    )
    out.append(
        Text(
            f"auto-allow if sandboxed: {'on' if plan.auto_allow else 'off'}   network: {plan.network}   "
            f"host Unix sockets: {plan.unix_sockets}   nested protected paths: {len(plan.protected_before)}"
        )
    )
    if plan.reason:
        out.append(safe_text(plan.reason, style="yellow"))
    return out


def status_lines(s: protocol.StatusReply) -> list[Text]:
    out: list[Text] = []
    if s.locked:
        out.append(
            Text("LOCKED: nothing is allowed by a rule or a mode until fixed: ", "bold reverse red")
            + safe_text(s.locked, style="red")
        )
    if s.audit_error:
        action = "decisions are DENIED" if s.audit_on_failure == "deny" else "decisions go on, unrecorded"
        out.append(
            Text("AUDIT ERROR: ", "bold reverse red")
            + safe_text(s.audit_error, style="red")
            + Text(f"; {action}; {s.audit_unrecorded} not recorded so far", "red")
        )
    out.append(Text(f"nexusd {s.version}  pid {s.pid}  up {int(s.uptime)}s  pending {s.pending}", "bold"))
    conns = ", ".join(f"{role}: {n}" for role, n in sorted(s.connections.items())) or "none"
    out.append(Text(f"connections: {conns}"))
    if s.sessions:
        out.append(Text("\nsessions", style="bold underline"))
        for sid, mode in sorted(s.sessions.items()):
            out.append(safe_text(sid) + Text(f"  mode {mode}", style="dim"))
    out.append(Text("\npolicy sources", style="bold underline"))
    for p in s.policy:
        line = Text(f"{p.layer:<10} ", style="bold")
        line.append_text(safe_text(p.path))
        if p.loaded:
            line.append("  loaded", style="green")
        else:
            line.append(
                "  BROKEN, its last good version is enforced" if p.last_good else "  not loaded",
                style="yellow" if p.last_good else "red",
            )
        if p.error:
            line.append("  ")
            line.append_text(safe_text(p.error, style="red"))
        out.append(line)
    out.append(Text("\npolicy errors", style="bold underline"))
    out.extend(safe_text(e, style="red") for e in s.policy_errors)
    if not s.policy_errors:
        out.append(Text("none", style="green"))
    out.append(Text("\nsandbox", style="bold underline"))
    if s.sandbox is None:
        out.append(Text("not probed", style="dim"))
    else:
        sb = s.sandbox
        state = "available" if sb.available else "NOT available"
        out.append(Text(f"{sb.platform}: {state}, backend {sb.backend or 'none'}", "green" if sb.available else "red"))
        if sb.container:
            out.append(Text(f"container: {sb.container}"))
        if sb.reason:
            out.append(safe_text(sb.reason, style="yellow"))
        for name, result in sorted(sb.checks.items()):
            out.append(Text(f"  {name}: ", style="dim") + safe_text(result, style="green" if result == "ok" else "red"))
    decisions = s.decisions()
    if decisions:
        out.append(Text("\ndecisions since start", style="bold underline"))
        out.append(Text(", ".join(f"{k} {v}" for k, v in sorted(decisions.items()))))
    took = s.decision_time_us()
    if took is not None:
        out.append(Text(f"decision time: {took:.1f} µs per call on average", style="dim"))
    return out
