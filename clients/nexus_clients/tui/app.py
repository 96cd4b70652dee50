"""nexus-tui: where a person answers agents' requests. ``main`` is the ``nexus-tui`` console script.

The app owns one ``TuiState`` and one ``DaemonLink``. Events from the daemon update the state and
refresh the widgets; key presses and clicks read the state and choose one answer, which the queue screen
posts as a ``QueueScreen.Chosen`` message; the app sends it and reports what happened.

Dependencies point one way: the app builds the screens and hands them what they need (the state, the
link's ``call``); screens and dialogs return results (``dismiss``, messages) and never import the app.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Footer

from nexus_clients.tui import request_view, risk
from nexus_clients.tui.escaping import escape_plain, safe_text
from nexus_clients.tui.history import HistoryScreen
from nexus_clients.tui.link import DaemonCall, DaemonLink, LinkDown, LinkUp, describe_error
from nexus_clients.tui.screens import (
    HOLD_KEY,
    AuditScreen,
    ConfirmScreen,
    DenyMessageScreen,
    DurationScreen,
    EditInputScreen,
    GrantsScreen,
    HelpScreen,
    ModeScreen,
    RuleEditScreen,
    RulesScreen,
    StatusScreen,
    input_diff,
)
from nexus_clients.tui.state import HOLD_SECONDS, Entry, TuiState
from nexus_clients.tui.widgets import ConnectionBar, MessageLine, QueueView, RequestDetail
from nexusd import locations, protocol

CSS = """
ConnectionBar { height: 1; }
QueueView { height: auto; max-height: 30%; border-bottom: solid $primary-darken-2; }
RequestDetail { height: 1fr; padding: 0 1; }
MessageLine { height: 1; padding: 0 1; }
ActionBar { height: 1; layout: grid; grid-size: 11 1; }
ActionBar Button { margin: 0 0 0 0; min-width: 6; width: 100%; }
QueueScreen.narrow ActionBar { height: 2; grid-size: 6 2; }
.dialog { width: 90%; max-width: 110; height: auto; max-height: 90%; border: thick $accent;
          background: $surface; padding: 0 1; }
ModalScreen { align: center middle; }
.buttons { height: 1; margin-top: 1; }
.buttons Button { margin-right: 2; }
#audit-filters { height: 1; }
#audit-filters Input { width: 1fr; margin-right: 1; }
"""


class QueueScreen(Screen[None]):
    """The main screen. Its bindings exist only here, so no dialog's unused key can answer a request."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # the answers are in the action bar (buttons); the footer shows every other key the help lists
        Binding("y", "allow_once", "allow", show=False),
        Binding("s", "allow_session", "session", show=False),
        Binding("f", "allow_for", "for a while…", show=False),
        Binding("i", "edit_input", "edit…", show=False),
        Binding("a", "always", "always…", show=False),
        Binding("n", "deny", "deny", show=False),
        Binding("N", "deny_message", "deny+msg", key_display="N", show=False),
        Binding("x", "abort", "deny+stop", show=False),
        Binding("e", "never", "never…", show=False),
        Binding("h", "hold", "hold"),
        Binding("m", "mode", "mode", show=False),
        Binding("j,down", "move(1)", "move", key_display="j/k"),
        Binding("k,up", "move(-1)", "up", show=False),
        Binding("tab", "next_pending(1)", "next", priority=True),
        Binding("shift+tab", "next_pending(-1)", "prev", show=False, priority=True),
        Binding("d", "open('audit')", "decisions"),
        Binding("r", "open('rules')", "rules"),
        Binding("g", "open('grants')", "grants"),
        Binding("u", "open('history')", "undo history", show=False),  # docs/UNDO.md; no room in an 80-column footer
        Binding("t", "open('status')", "status"),
        Binding("question_mark", "open('help')", "help", show=False),  # the action bar shows "? help"
        Binding("q", "app.quit", "quit"),
    ]

    class Chosen(Message):
        """The person chose an answer for a request; the app sends it (at once or not at all)."""

        def __init__(self, answer: protocol.Answer, label: str) -> None:
            super().__init__()
            self.answer = answer
            self.label = label  # what the message line says once it is accepted ("allowed once")

    def __init__(self, state: TuiState, call: DaemonCall) -> None:
        super().__init__()
        self.state = state
        self.call = call

    def compose(self) -> ComposeResult:
        from nexus_clients.tui.widgets import ActionBar

        yield ConnectionBar(self.state, id="connection")
        yield QueueView(self.state, id="queue")
        yield RequestDetail(self.state, id="detail")
        yield MessageLine(self.state, id="message")
        yield ActionBar()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(QueueView).focus()
        self._redraw()

    def on_resize(self, event: events.Resize) -> None:
        """Every answer's button stays on screen in a narrow terminal: two rows of them below 120 columns."""
        self.set_class(event.size.width < 120, "narrow")

    def refresh_all(self) -> None:
        """Redraw from the state, while this screen has its widgets. A tick or a daemon event can come before
        them (between ``push_screen`` and Compose, which a loaded machine delays; ``on_mount`` then draws the
        state as it is by then) and after them (at exit the screen's message loop stops, then its widgets are
        removed, and the link delivers until its worker is cancelled, later still)."""
        if self.is_mounted and self.is_running:
            self._redraw()

    def _redraw(self) -> None:
        for widget in (ConnectionBar, QueueView, MessageLine):
            self.query_one(widget).refresh(layout=widget is QueueView)
        self.query_one(RequestDetail).refresh_detail()

    def action_open(self, name: str) -> None:
        """Other screens are built fresh each time, so they always show current data."""
        screens: dict[str, Callable[[], Screen[Any]]] = {
            "audit": lambda: AuditScreen(self.call),
            "rules": lambda: RulesScreen(self.call),
            "grants": lambda: GrantsScreen(self.call),
            "history": lambda: HistoryScreen(self.call),
            "status": lambda: StatusScreen(self.call),
            "help": HelpScreen,
        }
        self.app.push_screen(screens[name]())

    def action_move(self, step: int) -> None:
        self.state.move(step)
        self.refresh_all()

    def action_next_pending(self, step: int) -> None:
        self.state.next_pending(step)
        self.refresh_all()

    @on(QueueView.Picked)
    def picked(self, event: QueueView.Picked) -> None:
        self.state.select(event.entry_id)
        self.refresh_all()

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        action = (event.button.id or "").removeprefix("act-")
        if action == "help":
            self.action_open("help")
        elif action:
            getattr(self, f"action_{action}")()

    # ------------------------------------------------------------------ answers

    def _target(self) -> Entry | None:
        entry, why = self.state.answerable()
        if entry is None:
            self.state.say(why, "warning")
            self.refresh_all()
        return entry

    def choose(
        self, entry: Entry, decision: Literal["allow", "deny"], scope: protocol.Scope, label: str, **fields: Any
    ) -> None:
        """Hand the chosen answer to the app (``Chosen``), which sends it; ``fields`` are ``Answer``'s others."""
        self.post_message(self.Chosen(protocol.Answer(id=entry.id, decision=decision, scope=scope, **fields), label))

    def action_allow_once(self) -> None:
        if entry := self._target():
            self.choose(entry, "allow", "once", "allowed once")

    def action_hold(self) -> None:
        """More time for the selected request (up to what its agent waits); it only delays the deny."""
        entry = self.state.current()
        if entry is None or not entry.pending:
            self.state.say("No waiting request selected to hold.", "warning")
            self.refresh_all()
            return
        self.hold(entry)

    @work(group="hold")
    async def hold(self, entry: Entry) -> None:
        if not entry.holdable(self.state.clock()):
            self.state.say(
                "Cannot be held longer: its agent stops waiting at the deadline. Answer now.", "warning", entry.id
            )
            self.refresh_all()
            return
        try:
            await self.call(protocol.Hold(id=entry.id, seconds=HOLD_SECONDS))
        except Exception as e:
            self.state.say(f"Not held: {describe_error(e)}", "warning", entry.id)
            self.refresh_all()

    def time_left(self, entry: Entry) -> Callable[[], tuple[float | None, bool]]:
        """For a dialog's time line: seconds left (None once decided) and whether a hold can add more."""

        def left() -> tuple[float | None, bool]:
            now = self.state.clock()
            return (entry.remaining(now) if entry.pending else None), entry.holdable(now)

        return left

    async def check_rules(self, kind: Literal["allow", "deny"], rules: list[str]) -> list[protocol.RuleVerdict]:
        """The daemon's one narrowness check (rule_check)."""
        reply = await self.call(protocol.RuleCheck(kind=kind, rules=rules))
        assert isinstance(reply, protocol.RuleCheckReply)
        return list(reply.results)

    async def confirm_grant(self, entry: Entry, title: str, rules: list[str]) -> tuple[bool, bool] | None:
        """Show the exact rules a grant would give, with the daemon's verdict on each, before it is given.
        Returns (confirmed, wide) or None when refused or cancelled; ``wide``: the person confirmed a rule
        the check marked wide (sent as confirm_broad)."""
        try:
            verdicts = await self.check_rules("allow", rules)
        except Exception as e:
            self.state.say(f"Not sent: the rules could not be checked ({describe_error(e)}).", "error", entry.id)
            self.refresh_all()
            return None
        question = Text(title + "\n", style="bold")
        for v in verdicts:
            style = {"ok": "green", "confirm": "bold yellow"}.get(v.status, "bold red")
            question.append_text(safe_text(f"  {v.rule}", style="bold"))
            question.append_text(safe_text(f"  — {v.status}: {v.reason}\n", style=style))
        refused = [v for v in verdicts if v.status == "refused"]
        if refused:
            self.state.say(
                f"Refused: {escape_plain(refused[0].rule, limit=80)} — {refused[0].reason}", "warning", entry.id
            )
            self.refresh_all()
            return None
        wide = any(v.status == "confirm" for v in verdicts)
        question.append("Allow anyway? " if wide else "Grant these? ", style="bold")
        ok = await self.app.push_screen_wait(ConfirmScreen(question, self.time_left(entry)))
        return (True, wide) if ok else None

    def action_allow_session(self) -> None:
        entry = self._target()
        if entry is not None and not entry.item.verdict.suggestions:
            self.state.say("No rule to remember for this session (nexusd offered none): answer once.", "warning")
            self.refresh_all()
        elif entry is not None:
            self.allow_session(entry)

    @work(group="dialog")
    async def allow_session(self, entry: Entry) -> None:
        rules = list(entry.item.verdict.suggestions)
        title = "Allow for this session: every call of this session these rules match, until it ends:"
        confirmed = await self.confirm_grant(entry, title, rules)
        if confirmed is None:
            return
        self.choose(entry, "allow", "session", "allowed for this session", rules=rules, confirm_broad=confirmed[1])

    def action_allow_for(self) -> None:
        entry = self._target()
        if entry is not None and not entry.item.verdict.suggestions:
            self.state.say("No rule to grant for a while (nexusd offered none): answer once.", "warning")
            self.refresh_all()
        elif entry is not None:
            self.allow_for(entry)

    @work(group="dialog")
    async def allow_for(self, entry: Entry) -> None:
        seconds = await self.app.push_screen_wait(DurationScreen(self._what(entry), self.time_left(entry)))
        if seconds is None:
            return
        rules = list(entry.item.verdict.suggestions)
        title = f"Allow for {seconds / 60:.0f} min: every call, in every session, these rules match:"
        confirmed = await self.confirm_grant(entry, title, rules)
        if confirmed is None:
            return
        self.choose(
            entry,
            "allow",
            "timed",
            f"allowed for {seconds / 60:.0f} min",
            duration=seconds,
            rules=rules,
            confirm_broad=confirmed[1],
        )

    def action_edit_input(self) -> None:
        if entry := self._target():
            self.edit_input(entry)

    @work(group="dialog")
    async def edit_input(self, entry: Entry) -> None:
        original = dict(entry.item.call.input)
        edited = await self.app.push_screen_wait(EditInputScreen(self._what(entry), original, self.time_left(entry)))
        if edited is None or edited == original:
            return
        question = Text("Allow once, edited:\n", style="bold")
        question.append_text(input_diff(original, edited))
        if not await self.app.push_screen_wait(ConfirmScreen(question, self.time_left(entry))):
            return
        self.choose(entry, "allow", "once", "allowed once, edited", updated_input=edited)

    def action_deny(self) -> None:
        if entry := self._target():
            self.choose(entry, "deny", "once", "denied")

    def action_abort(self) -> None:
        """Deny, and stop the agent's turn (Claude Code, Gemini CLI): for an agent that has gone astray."""
        if entry := self._target():
            self.choose(entry, "deny", "once", "denied and stopped the agent", abort=True)

    def action_deny_message(self) -> None:
        if entry := self._target():
            self.deny_with_message(entry)

    def action_always(self) -> None:
        entry = self._target()
        if entry is None:
            return
        if not entry.item.verdict.suggestions:
            self.state.say(
                '"Always" refused: nexusd found no rule narrow enough to learn safely. Answer once or for'
                " this session.",
                "warning",
            )
            self.refresh_all()
            return
        self.always(entry)

    def action_never(self) -> None:
        if entry := self._target():
            self.never(entry)

    def action_mode(self) -> None:
        entry = self.state.current()
        if entry is None:
            self.state.say("Select a request to change its session's mode.", "warning")
            self.refresh_all()
            return
        self.change_mode(entry.item.call.session)

    def _what(self, entry: Entry) -> Text:
        call = entry.item.call
        text = safe_text(call.tool, style="bold")
        text.append(" ")
        text.append_text(safe_text(request_view.short(request_view.summary(entry), 300)))
        return text

    @work(group="dialog")
    async def deny_with_message(self, entry: Entry) -> None:
        state = self.state

        def remaining() -> float | None:
            return entry.remaining(state.clock()) if entry.pending else None

        message = await self.app.push_screen_wait(
            DenyMessageScreen(self._what(entry), remaining, lambda: entry.holdable(state.clock()))
        )
        if message is None:
            return
        self.choose(entry, "deny", "once", "denied with a message", message=message)

    @work(group="dialog")
    async def always(self, entry: Entry) -> None:
        verdict = entry.item.verdict
        checked = await self.app.push_screen_wait(
            RuleEditScreen(
                "allow", list(verdict.suggestions), self._what(entry), self.check_rules, self.time_left(entry)
            )
        )
        if not checked:
            return
        rules = [v.rule for v in checked]
        wide = [v for v in checked if v.status == "confirm"]
        if wide:  # the daemon's check marked them wide: a person's explicit yes, with the reason in front of them
            question = Text("These rules are wide:\n", style="bold yellow")
            for v in wide:
                question.append_text(safe_text(f"  {v.rule} — {v.reason}\n", style="yellow"))
            question.append("Persist them anyway, for every future matching request?\n", style="bold")
            if not await self.app.push_screen_wait(ConfirmScreen(question, self.time_left(entry))):
                self.state.say("Not persisted; the request is still waiting.", "info", entry.id)
                self.refresh_all()
                return
        if risk.is_dangerous(verdict):
            question = Text("This request is flagged ", style="bold")
            question.append(risk.tier(verdict), style=risk.TIER_STYLE[risk.tier(verdict)])
            question.append(":\n")
            for line in risk.flag_lines(verdict) or [verdict.reason]:
                question.append_text(safe_text("  " + line, style="red"))
                question.append("\n")
            question.append("Persist these allow rules for every future matching request?\n", style="bold")
            for rule in rules:
                question.append_text(safe_text("  " + rule))
                question.append("\n")
            if not await self.app.push_screen_wait(ConfirmScreen(question, self.time_left(entry))):
                self.state.say("Not persisted; the request is still waiting.", "info")
                self.refresh_all()
                return
        self.choose(entry, "allow", "always", "allowed always", rules=rules, confirm_broad=bool(wide))

    @work(group="dialog")
    async def never(self, entry: Entry) -> None:
        verdict = entry.item.verdict
        suggestions = list(verdict.suggestions) or [risk.exact_rule(entry.item.call, verdict)]
        checked = await self.app.push_screen_wait(
            RuleEditScreen("deny", suggestions, self._what(entry), self.check_rules, self.time_left(entry))
        )
        if not checked:
            return
        self.choose(entry, "deny", "never", "denied, never again", rules=[v.rule for v in checked])

    @work(group="dialog")
    async def change_mode(self, session: str) -> None:
        current = None
        with contextlib.suppress(Exception):
            status = await self.call(protocol.Status())
            current = status.sessions.get(session) if isinstance(status, protocol.StatusReply) else None
        ok, mode = await self.app.push_screen_wait(ModeScreen(session, current))
        if not ok:
            return
        try:
            await self.call(protocol.SetMode(session=session, mode=mode))
        except Exception as e:
            self.state.say(f"Mode not changed: {describe_error(e)}", "error")
        else:
            self.state.say(f"Mode for session {escape_plain(session, limit=40)}: {mode or 'override cleared'}")
        self.refresh_all()


class NexusTui(App[None]):
    TITLE = "nexus-tui"
    ENABLE_COMMAND_PALETTE = False
    CSS = CSS
    # holding only delays a deny, so it works from every dialog too (the answer keys live on the queue screen)
    BINDINGS: ClassVar[list[BindingType]] = [Binding(HOLD_KEY, "hold", "hold", show=False, priority=True)]

    def action_hold(self) -> None:
        self.queue_screen.action_hold()

    def __init__(
        self,
        socket_path: Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
        arrival_guard: float = 0.6,
        connect: bool = True,
        bell: bool = True,
        desktop_notify: bool = False,
        name: str = "nexus-tui",
    ) -> None:
        super().__init__()
        self.state = TuiState(clock=clock, arrival_guard=arrival_guard)
        self.link = DaemonLink(socket_path, self.on_daemon_event, name=name)
        self.autoconnect = connect
        self.ring_bell = bell
        self.notify_cmd = shutil.which("notify-send") if desktop_notify else None
        self.bells = 0  # how many arrivals rang (tests read it)
        self.queue_screen = QueueScreen(self.state, self.link.call)

    def on_mount(self) -> None:
        self.push_screen(self.queue_screen)
        self.set_interval(1.0, self.tick)
        if self.autoconnect:
            self.run_worker(self.link.run(), name="daemon-link", group="link", exclusive=True)

    def tick(self) -> None:
        self.state.prune()
        self.refresh_queue()

    def refresh_queue(self) -> None:
        self.queue_screen.refresh_all()

    # ------------------------------------------------------------------ daemon events

    def on_daemon_event(self, event: Any) -> None:
        """Called by the link (same event loop) for every event; also the entry point tests feed."""
        s = self.state
        if isinstance(event, LinkUp):
            s.connected(event.version)
            s.say(f"Connected to nexusd {event.version}.")
        elif isinstance(event, LinkDown):
            was = s.connection
            s.disconnected(f"{event.reason}; retrying in {event.retry_in:.1f}s")
            if was == "connected":
                s.say("Lost nexusd: everything pending was denied; nothing will be sent later.", "error")
        elif isinstance(event, protocol.Snapshot):
            s.apply_snapshot(event.items)
            if event.items:
                self.arrived(event.items[-1], len(event.items))
        elif isinstance(event, protocol.Prompt):
            if s.apply_prompt(event.item):
                self.arrived(event.item, 1)
        elif isinstance(event, protocol.Resolved):
            s.apply_resolved(event)
        elif isinstance(event, protocol.Held):
            entry = s.apply_held(event)
            if entry is not None and entry.id == s.selected:
                left = entry.remaining(s.clock())
                s.say(f"Held by {escape_plain(event.by, limit=60)}: {left:.0f} s left.", "info", entry.id)
        elif isinstance(event, protocol.PolicyNotice):
            s.policy_errors = list(event.errors)
            if event.ok:
                s.say("Policy reloaded.")
            else:
                s.say(f"Policy reload failed: {len(event.errors)} error(s); the last good policy stays.", "error")
        elif isinstance(event, protocol.SandboxNotice):
            first = event.violations[0] if event.violations else ""
            more = f" (+{len(event.violations) - 1} more)" if len(event.violations) > 1 else ""
            s.say(f"Sandbox refused: {first}{more} — in: {event.command[:80]}", "warning")
        elif isinstance(event, protocol.Bye):
            s.say(f"nexusd is stopping: {event.reason}", "error")
        self.refresh_queue()

    def arrived(self, item: protocol.PendingItem, count: int) -> None:
        self.bells += 1
        if self.ring_bell:
            self.bell()
        if self.notify_cmd:
            self.desktop_notify(item, count)

    @work(group="notify")
    async def desktop_notify(self, item: protocol.PendingItem, count: int) -> None:
        """notify-send, best effort. Servers parse a little HTML in the body, so that is escaped too."""
        assert self.notify_cmd is not None
        call = item.call
        title = f"nexus: {escape_plain(call.tool, limit=40)} from {escape_plain(call.provider, limit=20)}"
        body = escape_plain(request_view.summary(request_view_entry(item)), limit=200)
        if count > 1:
            body = f"{count} requests waiting. Latest: {body}"
        body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        with contextlib.suppress(OSError):
            proc = await asyncio.create_subprocess_exec(
                self.notify_cmd,
                "--app-name=nexus-tui",
                "--",
                title,
                body,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5)

    # ------------------------------------------------------------------ answering

    @on(QueueScreen.Chosen)
    def chosen(self, event: QueueScreen.Chosen) -> None:
        self.send_answer(event.answer, event.label)

    @work(group="answer")
    async def send_answer(self, answer: protocol.Answer, label: str) -> None:
        """Send one answer now, or not at all; report the outcome (including a lost race)."""
        s = self.state
        entry_id = answer.id
        entry = s.entries.get(entry_id)
        if entry is None or not entry.pending:
            s.say(f"Not sent: {entry.outcome() if entry else 'that request is gone'}.", "warning")
            self.refresh_queue()
            return
        try:
            await self.link.call(answer)
        except Exception as e:
            code = getattr(e, "code", None)
            if code == "already_decided":
                for _ in range(20):  # the winner's Resolved is usually on the wire already: say who won
                    after = s.entries.get(entry_id)
                    if after is None or after.resolved is not None:
                        break
                    await asyncio.sleep(0.05)
                who = after.outcome() if after and after.resolved else "already decided elsewhere"
                s.say(f"Too late, your answer lost the race: {who}.", "warning")
            else:
                s.say(f"Answer not accepted: {describe_error(e)}", "error")
        else:
            entry.answered_here = label
            s.say(f"Sent: {label}.")
        self.refresh_queue()


def request_view_entry(item: protocol.PendingItem) -> Entry:
    return Entry(item, seen_at=0.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="nexus-tui", description="Answer AI agents' requests to nexusd.")
    parser.add_argument("--socket", help="the daemon's socket (default: $NEXUS_SOCKET, then the per-user runtime dir)")
    parser.add_argument("--no-bell", action="store_true", help="do not ring the terminal bell on a new request")
    parser.add_argument(
        "--notify", action="store_true", help="also send a desktop notification (notify-send) on a new request"
    )
    parser.add_argument("--name", default="nexus-tui", help="how this UI names itself in 'answered by'")
    args = parser.parse_args(argv)
    app = NexusTui(
        locations.socket_path(args.socket),
        bell=not args.no_bell,
        desktop_notify=args.notify,
        name=args.name,
    )
    app.run()


if __name__ == "__main__":
    main()
