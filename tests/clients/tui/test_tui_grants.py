"""nexus-tui's timed answer (f) and grants screen (g) against a real daemon: the grant is listed with who gave
it and its expiry, x revokes it, and the next call asks again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.screens import ConfirmScreen, DurationScreen, GrantsScreen
from textual.widgets import DataTable, Input
from tui_driver import Agent, call, until

from nexusd.client import Client

pytestmark = pytest.mark.anyio

SIZE = (140, 40)


async def test_allow_for_a_while_then_revoke_in_the_grants_screen(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    app = NexusTui(d.socket, bell=False, arrival_guard=0)
    info = call("git push origin timed")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.connection == "connected", what="connected")
        agent = Agent(d.socket, info)
        await until(pilot, lambda: app.state.entries or agent.done, what="the prompt reached the TUI")
        assert not agent.done
        app.state.select(next(iter(app.state.entries)))
        await pilot.pause()
        rule = app.state.current().item.verdict.suggestions[0]  # type: ignore[union-attr]
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, DurationScreen), what="duration dialog")
        box = app.screen.query_one("#duration", Input)
        box.value = "never"  # not a duration: the dialog says so and stays
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DurationScreen)
        box.value = "2h"
        await pilot.press("enter")
        # the exact rule(s) the grant gives, checked by the daemon, then a yes
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the grant's rules")
        assert rule in app.screen.question.plain  # type: ignore[attr-defined]
        await pilot.press("y")
        decision = await agent.result(pilot)
        assert (decision.decision, decision.source) == ("allow", "user")

        with Client(socket_path=str(d.socket), role="agent", name="t") as c:  # the grant decides the next one
            again = c.request(info, timeout=10)
        assert (again.decision, again.source, again.rule) == ("allow", "rule", rule)

        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, GrantsScreen), what="grants screen")
        screen = app.screen
        assert isinstance(screen, GrantsScreen)
        await until(pilot, lambda: any(g.rule == rule for g in screen.grants), what="grant listed")
        g = next(g for g in screen.grants if g.rule == rule)
        assert g.scope == "timed" and g.given_by and "nexus-tui" in g.given_by and g.uses == 1
        assert g.expires is not None and g.given_at is not None and round(g.expires - g.given_at) == 7200
        table = screen.query_one(DataTable)
        row = screen.grants.index(g)
        cells = [str(c) for c in table.get_row_at(row)]
        assert g.id in cells and "timed" in cells and "1" in cells
        table.move_cursor(row=row)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="revoke confirmation")
        await pilot.press("y")
        await until(pilot, lambda: not any(x.rule == rule for x in screen.grants), what="grant revoked")

    with Client(socket_path=str(d.socket), role="agent", name="t") as c:  # no UI now: it asks, nobody answers
        after = c.request(info, timeout=10)
    assert after.decision == "deny" and after.source != "rule"


async def test_edit_before_approving_shows_the_diff_and_sends_the_edit(
    daemon_factory: Callable[..., Any], tmp_path: Any
) -> None:
    from nexus_clients.tui.screens import EditInputScreen

    ws = tmp_path / "ws"
    (ws / "build" / "tmp").mkdir(parents=True)
    d = daemon_factory(policy='[permissions]\nask = ["Bash"]\n')
    app = NexusTui(d.socket, bell=False, arrival_guard=0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.connection == "connected", what="connected")

        async def edit_to(cmd: str, new: str) -> Agent:
            before = set(app.state.entries)
            agent = Agent(d.socket, call(cmd, cwd=str(ws)))
            await until(pilot, lambda: set(app.state.entries) - before or agent.done, what="the prompt")
            (new_id,) = set(app.state.entries) - before
            app.state.select(new_id)
            await pilot.pause()
            await pilot.press("i")
            await until(pilot, lambda: isinstance(app.screen, EditInputScreen), what="edit dialog")
            app.screen.query_one("#edit-input", Input).value = new
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the diff")
            shown = app.screen.question.plain  # type: ignore[attr-defined]
            assert f'-command: "{cmd}"' in shown and f'+command: "{new}"' in shown
            await pilot.press("y")
            return agent

        agent = await edit_to("rm -rf build", "rm -rf build/tmp")
        decision = await agent.result(pilot)
        assert decision.decision == "allow" and decision.updated_input == {"command": "rm -rf build/tmp"}

        agent = await edit_to("rm -rf build", "rm -rf ~")  # widens: refused, still pending
        await until(pilot, lambda: "refused" in app.state.message, what="the refusal shown")
        assert not agent.done
        await pilot.press("n")
        assert (await agent.result(pilot)).decision == "deny"
