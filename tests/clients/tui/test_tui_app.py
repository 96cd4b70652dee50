"""nexus-tui against a real daemon: an agent waits, the test presses keys, the decision arrives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.screens import ConfirmScreen, DenyMessageScreen, RuleEditScreen
from tui_driver import Agent, call, until

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def tui(daemon: Any, **kw: Any) -> NexusTui:
    kw.setdefault("arrival_guard", 0)
    return NexusTui(daemon.socket, bell=False, **kw)


async def ask(pilot: Any, app: NexusTui, daemon: Any, info: Any = None) -> Agent:
    """Submit one request and wait until this TUI shows it selected."""
    await until(pilot, lambda: app.state.connection == "connected", what="connected")
    before = set(app.state.entries)
    agent = Agent(daemon.socket, info or call())
    await until(pilot, lambda: set(app.state.entries) - before or agent.done, what="the prompt reached the TUI")
    assert not agent.done, f"decided without a person: {agent.decision or agent.error!r}"
    (new,) = set(app.state.entries) - before
    app.state.select(new)
    await pilot.pause()
    return agent


async def test_allow_once(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        await pilot.press("y")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("allow", "user")
        assert decision.answered_by and "nexus-tui" in decision.answered_by
        await until(pilot, lambda: not app.state.pending(), what="queue cleared")
        assert "allowed once" in app.state.message


async def test_deny_and_deny_with_message(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        await pilot.press("n")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source, decision.message) == ("deny", "user", None)

        agent = await ask(pilot, app, d)
        await pilot.press("N")
        await until(pilot, lambda: isinstance(app.screen, DenyMessageScreen), what="message dialog")
        await pilot.press(*"use the staging remote")
        await pilot.press("enter")
        decision = await agent.result(pilot)
        assert decision.decision == "deny"
        assert decision.message == "use the staging remote"


async def test_x_denies_and_stops_the_agent(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        await pilot.press("x")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source, decision.abort) == ("deny", "user", True)
        assert "stopped the agent" in app.state.message


@pytest.mark.slow
async def test_a_deny_message_dialog_cancelled_sends_nothing(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=6)
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        await pilot.press("N")
        await until(pilot, lambda: isinstance(app.screen, DenyMessageScreen))
        await pilot.press("y", "escape")  # a "y" typed into the dialog is text, never an allow
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("deny", "timeout")


async def test_session_scope_allows_the_next_identical_request_without_asking(
    daemon_factory: Callable[..., Any],
) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        if not app.state.current().item.verdict.suggestions:  # type: ignore[union-attr]
            pytest.fail("the engine offered no rule for this request (policy engine not landed yet?)")
        await pilot.press("s")  # the exact rule(s) the grant gives, with the daemon's check, before it is given
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the session grant's rules")
        shown = app.screen.question.plain  # type: ignore[attr-defined]
        assert all(rule in shown for rule in app.state.current().item.verdict.suggestions), shown  # type: ignore[union-attr]
        await pilot.press("y")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("allow", "user")
        again = Agent(d.socket, call())
        decision = await again.result(pilot)
        assert decision.decision == "allow" and decision.source != "user"
        other = Agent(d.socket, call(session="sess-other"))
        await until(pilot, lambda: app.state.pending(), what="another session is still asked")
        await pilot.press("n")
        assert (await other.result(pilot)).decision == "deny"


async def test_always_persists_the_edited_rule_and_the_next_request_is_not_asked(
    daemon_factory: Callable[..., Any],
) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        suggestions = app.state.current().item.verdict.suggestions  # type: ignore[union-attr]
        if not suggestions:
            pytest.fail("the engine offered no rule for this request (policy engine not landed yet?)")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen), what="rule editor")
        editor = app.screen
        assert isinstance(editor, RuleEditScreen)
        assert editor.values() == list(suggestions)
        await pilot.press("enter")
        if isinstance(app.screen, ConfirmScreen):  # flagged dangerous: one more explicit yes
            await pilot.press("y")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("allow", "user")
        learned = list(d.state_dir.rglob("*")) + list(d.config_dir.rglob("*"))
        assert any(f.is_file() and suggestions[0] in f.read_text(errors="replace") for f in learned), learned
        again = Agent(d.socket, call())
        decision = await again.result(pilot)
        assert (decision.decision, decision.source) == ("allow", "rule")
        assert not app.state.pending()


@pytest.mark.slow
async def test_always_refuses_a_blanket_rule_the_person_typed(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=6)
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        if not app.state.current().item.verdict.suggestions:  # type: ignore[union-attr]
            pytest.fail("the engine offered no rule for this request (policy engine not landed yet?)")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen))
        box = app.screen.query("Input").first()
        box.value = "Bash(*)"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RuleEditScreen), "a blanket rule cannot be confirmed"
        await pilot.press("escape")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("deny", "timeout")


async def test_never_persists_a_deny_rule(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen))
        assert app.screen.kind == "deny"  # type: ignore[attr-defined]
        rules = app.screen.values()  # type: ignore[attr-defined]
        await pilot.press("enter")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("deny", "user")
        again = Agent(d.socket, call())
        decision = await again.result(pilot)
        assert decision.decision == "deny" and decision.source == "rule", (rules, decision)


async def test_timeout_is_shown_then_denied(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=1.5)
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        assert "auto-deny in" in _detail_text(app)
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("deny", "timeout")
        await until(pilot, lambda: not app.state.pending(), what="timeout reached the TUI")
        assert "timed out" in _detail_text(app)
        await pilot.press("y")
        assert "Already denied: timed out" in app.state.message


async def test_two_tuis_race_and_the_loser_is_told(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    first, second = tui(d, name="tui-one"), tui(d, name="tui-two")
    async with first.run_test(size=SIZE) as p1, second.run_test(size=SIZE) as p2:
        await until(p2, lambda: second.state.connection == "connected")
        agent = await ask(p1, first, d)
        await until(p2, lambda: second.state.pending(), what="second TUI sees it")
        await p1.press("y")
        decision = await agent.result(p1)
        assert decision.answered_by and "tui-one" in decision.answered_by
        await until(p2, lambda: not second.state.pending(), what="second TUI told")
        assert "answered by tui-one" in _detail_text(second)
        # Now the second answers what was already decided, as if its key press had crossed on the wire.
        entry = next(iter(second.state.entries.values()))
        won, entry.resolved = entry.resolved, None
        await p2.press("n")
        entry.resolved = won
        await until(p2, lambda: "lost the race" in second.state.message, what="loser told")
        assert "tui-one" in second.state.message


async def test_daemon_restart_while_open(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d)
        d.stop()
        decision = await agent.result(pilot)
        assert decision.decision == "deny"
        await until(pilot, lambda: app.state.connection == "disconnected", what="loss shown")
        assert not app.state.entries, "nothing pending is kept"
        await pilot.press("y")
        assert "Not connected" in app.state.message
        assert "not reachable" in _bar_text(app)
        d.start()
        await until(pilot, lambda: app.state.connection == "connected", timeout=20, what="reconnected")
        agent = await ask(pilot, app, d)
        await pilot.press("y")
        assert (await agent.result(pilot)).decision == "allow"


async def test_bell_rings_on_a_new_request(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        assert app.bells == 0
        agent = await ask(pilot, app, d)
        assert app.bells == 1
        await pilot.press("n")
        await agent.result(pilot)


def _detail_text(app: NexusTui) -> str:
    from nexus_clients.tui.widgets import RequestDetail

    detail = app.queue_screen.query_one(RequestDetail)
    detail.refresh_detail()
    return detail.plain


def _bar_text(app: NexusTui) -> str:
    from nexus_clients.tui.widgets import ConnectionBar

    return app.queue_screen.query_one(ConnectionBar).render().plain


async def test_mouse_picks_a_row_and_clicks_allow(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        first = await ask(pilot, app, d, call("git push origin one"))
        second = await ask(pilot, app, d, call("git push origin two"))
        app.state.select(None)
        await pilot.click("#queue", offset=(10, 2))  # row 2 of the queue: the second request
        await pilot.pause()
        assert "git push origin two" in _detail_text(app)
        await pilot.click("#act-allow_once")
        assert (await second.result(pilot)).decision == "allow"
        await until(pilot, lambda: app.state.answerable()[0] is not None, what="guard over")
        await pilot.click("#act-deny")
        assert (await first.result(pilot)).decision == "deny"


async def test_mode_change_reaches_the_daemon(daemon_factory: Callable[..., Any]) -> None:
    from nexus_clients.tui.screens import ModeScreen

    from nexusd import protocol
    from nexusd.client import Client

    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d, call(session="sess-mode"))
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ModeScreen), what="mode dialog")
        await pilot.press(*"plan", "enter")
        await until(pilot, lambda: "Mode for session" in app.state.message, what="mode set")
        with Client(d.socket, role="admin") as c:
            status = c.call(protocol.Status())
        assert status.sessions.get("sess-mode") == "plan", status.sessions
        await pilot.press("n")
        await agent.result(pilot)


async def test_decisions_rules_and_status_screens_against_the_daemon(daemon_factory: Callable[..., Any]) -> None:
    from nexus_clients.tui.screens import AuditScreen, RulesScreen, StatusScreen
    from textual.widgets import DataTable

    d = daemon_factory()
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        agent = await ask(pilot, app, d, call("git push origin learned"))
        rule = app.state.current().item.verdict.suggestions[0]  # type: ignore[union-attr]
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen))
        await pilot.press("enter")
        if isinstance(app.screen, ConfirmScreen):
            await pilot.press("y")
        await agent.result(pilot)

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen))
        table = app.screen.query_one(DataTable)
        await until(pilot, lambda: table.row_count >= 1, what="audit rows")
        cells = [str(c) for c in table.get_row_at(0)]
        assert "allow" in cells and "user" in cells
        app.screen.query_one("#f-decision").value = "deny"  # type: ignore[attr-defined]
        await pilot.press("ctrl+r")
        await until(pilot, lambda: table.row_count == 0, what="filtered to nothing")
        await pilot.press("escape")

        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RulesScreen))
        screen = app.screen
        assert isinstance(screen, RulesScreen)
        await until(pilot, lambda: any(r.rule == rule for r in screen.rules), what="learned rule listed")
        row = next(i for i, r in enumerate(screen.rules) if r.rule == rule)
        assert screen.rules[row].removable
        screen.query_one(DataTable).move_cursor(row=row)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="remove confirmation")
        await pilot.press("y")
        await until(pilot, lambda: not any(r.rule == rule for r in screen.rules), what="rule removed")
        await pilot.press("escape")

        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, StatusScreen))
        status = app.screen
        assert isinstance(status, StatusScreen)
        await until(pilot, lambda: "connections:" in status.plain, what="status loaded")
        assert "ui: 1" in status.plain
        # the sandbox settings of the TUI's own directory, as the daemon applies them there
        await until(pilot, lambda: "sandbox for " in status.plain, what="workspace sandbox shown")
        assert "agents' shell calls: NOT sandboxed" in status.plain and "auto-allow if sandboxed: off" in status.plain


@pytest.mark.slow
async def test_first_hour_papercuts(daemon_factory: Callable[..., Any]) -> None:
    """Issue "first hour": one "? help" on screen, the deny-with-message box counts down and says when the
    request is decided meanwhile, and "Sent:" does not linger over the next request."""
    from textual.widgets import Static

    d = daemon_factory(pending_timeout=4)
    app = tui(d)
    async with app.run_test(size=SIZE) as pilot:
        from textual.widgets import Button

        shown_help = [
            b for b in app.screen.active_bindings.values() if b.binding.show and b.binding.action == "open('help')"
        ]
        buttons = [str(b.label) for b in app.screen.query(Button) if "help" in str(b.label)]
        assert len(shown_help) + len(buttons) == 1, (shown_help, buttons)

        agent = await ask(pilot, app, d)
        await pilot.press("N")
        await until(pilot, lambda: isinstance(app.screen, DenyMessageScreen), what="message dialog")
        label = app.screen.query_one("#deny-countdown", Static)
        await until(pilot, lambda: "time left" in str(label.render()), what="countdown shown")
        await until(pilot, lambda: "decided meanwhile" in str(label.render()), what="timeout shown", timeout=15)
        await pilot.press("escape")
        assert (await agent.result(pilot)).source == "timeout"

        agent = await ask(pilot, app, d)
        await pilot.press("y")
        await agent.result(pilot)
        await until(pilot, lambda: app.state.message.startswith("Sent"), what="sent message")
        agent = await ask(pilot, app, d)
        assert not app.state.message.startswith("Sent")
        await pilot.press("n")
        await agent.result(pilot)
