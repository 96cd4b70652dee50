"""nexus-tui under the clock, against a real daemon (Textual pilot): holding an ask, the time left in every
dialog, the daemon's one narrowness check in the rule editor, the agent's stated reason, person words,
look-alike domains, and a footer that shows every key the help lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.screens import HELP, ConfirmScreen, DurationScreen, RuleEditScreen, TimeLeft
from tui_driver import Agent, call, until

from nexusd import protocol

pytestmark = pytest.mark.anyio


def tui(daemon: Any, **kw: Any) -> NexusTui:
    kw.setdefault("arrival_guard", 0)
    return NexusTui(daemon.socket, bell=False, **kw)


async def ask(pilot: Any, app: NexusTui, daemon: Any, info: Any = None, wait: float = 30.0) -> Agent:
    await until(pilot, lambda: app.state.connection == "connected", what="connected")
    before = set(app.state.entries)
    agent = Agent(daemon.socket, info or call(), timeout=wait)
    await until(pilot, lambda: set(app.state.entries) - before or agent.done, what="the prompt reached the TUI")
    assert not agent.done, f"decided without a person: {agent.decision or agent.error!r}"
    (new,) = set(app.state.entries) - before
    app.state.select(new)
    await pilot.pause()
    return agent


def detail_text(app: NexusTui) -> str:
    from nexus_clients.tui.widgets import RequestDetail

    app.queue_screen.refresh_all()
    return app.queue_screen.query_one(RequestDetail).plain


async def test_hold_warns_extends_to_the_agents_wait_and_shows_in_dialogs(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=8)
    app = tui(d)
    async with app.run_test(size=(120, 40)) as pilot:
        agent = await ask(pilot, app, d, wait=25)  # the agent waits 25 s: a hold may reach ~23.5 s
        entry = app.state.current()
        assert entry is not None and entry.holdable(app.state.clock())
        first = entry.item.deadline
        text = detail_text(app)
        assert "h: hold for more time" in text and "⚠" in text, "urgent from the start: 8 s left"
        assert "answer now, or h to hold it" in text
        await pilot.press("f")  # every dialog shows the time left and the hold key
        await until(pilot, lambda: isinstance(app.screen, DurationScreen), what="duration dialog")
        line = app.screen.query_one(TimeLeft)
        await until(pilot, lambda: "time left" in str(line.render()) and "ctrl+o" in str(line.render()))
        await pilot.press("ctrl+o")  # hold from inside the dialog
        await until(pilot, lambda: entry.item.deadline > first + 5, what="the hold reached every UI")
        await pilot.press("escape")
        assert entry.item.deadline <= entry.item.created + 25, "never past what the agent waits"
        assert "Held by" in app.state.message
        await until(pilot, lambda: not entry.holdable(app.state.clock()), what="at the limit")
        await pilot.press("h")
        await until(pilot, lambda: "Cannot be held longer" in app.state.message, what="the limit is said")
        await pilot.pause(9)  # past the 8 s default: still waiting, because it is held
        assert entry.pending and not agent.done
        await pilot.press("n")
        assert (await agent.result(pilot)).decision == "deny"


async def test_the_rule_editor_asks_the_daemons_one_check(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=60)
    app = tui(d)
    async with app.run_test(size=(120, 40)) as pilot:
        agent = await ask(pilot, app, d, call("rm -r build/x"))
        if not app.state.current().item.verdict.suggestions:  # type: ignore[union-attr]
            pytest.fail("the engine offered no rule for rm -r build/x")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen), what="rule editor")
        editor = app.screen
        assert isinstance(editor, RuleEditScreen)
        box = editor.query("Input").first()
        box.value = "Bash(rm *)"  # what issue 39 saw saved as "ok: narrow enough"
        await until(pilot, lambda: editor.checked == ["Bash(rm *)"], what="the daemon's verdict")
        assert [v.status for v in editor.verdicts] == ["confirm"]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the explicit confirmation")
        assert "wide" in app.screen.question.plain and "delete" in app.screen.question.plain  # type: ignore[attr-defined]
        await pilot.press("n")
        await pilot.pause(0.3)
        assert not agent.done and app.state.current().pending  # type: ignore[union-attr]
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, RuleEditScreen), what="rule editor")
        editor = app.screen
        assert isinstance(editor, RuleEditScreen)
        editor.query("Input").first().value = "Bash(bash *)"
        await until(pilot, lambda: editor.checked == ["Bash(bash *)"], what="the daemon's verdict")
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is editor, "a refused rule cannot be confirmed"
        assert [v.status for v in editor.verdicts] == ["refused"]
        await pilot.press("escape")
        await pilot.press("n")
        assert (await agent.result(pilot)).decision == "deny"


async def test_stated_reason_person_words_and_lookalike_domains(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory(pending_timeout=60)
    app = tui(d)
    async with app.run_test(size=(160, 48)) as pilot:
        info = call(tool_input={"command": "curl -s https://xn--pple-43d.com/x", "description": "Fetch the docs"})
        agent = await ask(pilot, app, d, info)
        text = detail_text(app)
        assert "the agent says: “Fetch the docs” (its own words, not checked)" in text
        assert "look-alike domain: xn--pple-43d.com (displayed as аpple.com)" in text
        assert "danger-full-access" not in text and "beyond the workspace" in text
        from nexus_clients.tui.widgets import QueueView

        queue = app.queue_screen.query_one(QueueView).render().plain
        assert "⚠ look-alike domain" in queue
        await pilot.press("n")
        assert (await agent.result(pilot)).decision == "deny"


async def test_the_footer_and_action_bar_show_every_key_the_help_lists(daemon_factory: Callable[..., Any]) -> None:
    from textual.widgets import Button

    d = daemon_factory()
    app = tui(d)
    for size in ((80, 24), (160, 48)):
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            screen = app.queue_screen
            footer = {b.binding.key_display or b.binding.key for b in screen.active_bindings.values() if b.binding.show}
            buttons = {str(b.label).split()[0] for b in screen.query(Button) if b.region.width and b.region.height}
            shown = {k.split(",")[0] for k in footer} | buttons
            for keys, _what in HELP:
                first = keys.split()[0].replace("?", "?")
                assert first in shown or first.replace("/", "") in shown or f"{first}/k" in shown, (size, keys, shown)
        app = tui(d)


async def test_a_resolved_by_daemon_error_is_not_an_answer() -> None:
    from nexus_clients.tui.state import Entry

    item = protocol.PendingItem(
        id="a" * 32,
        call=call(),
        verdict=protocol.Verdict("ask", "r", "mode"),
        created=1.0,
        deadline=2.0,
    )
    e = Entry(item, 0.0, resolved=protocol.Resolved(id="a" * 32, decision="deny", source="error", reason="stopping"))
    assert e.outcome() == "denied by nexusd: stopping"


async def test_history_is_dated_and_flags_lookalike_domains() -> None:
    import time

    from nexus_clients.tui.screens import AuditScreen
    from textual.widgets import DataTable

    now = time.time()
    records = [
        protocol.AuditRecord(
            now, "1" * 32, "claude", "s", "WebFetch", "https://xn--pple-43d.com/", "deny", "user", "r"
        ),
        protocol.AuditRecord(now, "2" * 32, "claude", "s", "Bash", "ls -la", "allow", "rule", "r"),
    ]
    app = NexusTui(None, bell=False, connect=False)
    async with app.run_test(size=(160, 40)) as pilot:
        app.push_screen(AuditScreen(app.link.call, records))
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert all(row[0].startswith(time.strftime("%Y-%m-%d", time.localtime(now))) for row in rows), rows
        flagged = [row for row in rows if "look-alike" in row[5]]
        assert len(flagged) == 1 and "xn--pple-43d.com" in flagged[0][5]
