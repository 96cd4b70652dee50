"""nexus-tui's undo history (u) against a real daemon: a shell call that deleted and edited files is listed
with what it changed, its diff is shown, and w (a dry run shown, then confirmed) rewinds the workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.history import HistoryScreen
from nexus_clients.tui.screens import ConfirmScreen
from textual.widgets import Static
from tui_driver import call, until

from nexusd.client import Client
from tests.conftest import short_tmpdir

pytestmark = pytest.mark.anyio

SIZE = (140, 45)


async def test_history_shows_the_diff_and_rewinds(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    ws: Path = short_tmpdir() / "ws"
    ws.mkdir()
    (ws / "gone.txt").write_text("precious\n")
    (ws / "keep.txt").write_text("one\ntwo\n")
    command = "rm gone.txt && sed -i s/two/TWO/ keep.txt"
    info = call(command, cwd=str(ws), workspace=str(ws), mode="bypassPermissions")
    with Client(socket_path=str(d.socket), role="agent", name="t") as c:
        assert c.request(info, timeout=60).decision == "allow"
    (ws / "gone.txt").unlink()  # what the agent's shell then does
    (ws / "keep.txt").write_text("one\nTWO\n")

    app = NexusTui(d.socket, bell=False, arrival_guard=0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.connection == "connected", what="connected")
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), what="history screen")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await until(pilot, lambda: len(screen.entries) == 1, what="the call listed", timeout=60)
        e = screen.entries[0]
        assert e.summary == command and (e.changed, e.deleted) == (1, 1)
        pane = screen.query_one("#history-diff", Static)
        await until(pilot, lambda: "-precious" in str(pane.render()), what="the diff shown", timeout=60)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dry run", timeout=60)
        shown = app.screen.question.plain  # type: ignore[attr-defined]
        assert "gone.txt" in shown and "keep.txt" in shown and "rescue checkpoint" in shown
        assert not (ws / "gone.txt").exists()  # nothing changed before the yes
        await pilot.press("y")
        await until(pilot, lambda: (ws / "gone.txt").exists(), what="rewound", timeout=60)
        assert (ws / "keep.txt").read_text() == "one\ntwo\n"
        await until(pilot, lambda: any(x.kind == "rescue" for x in screen.entries), what="rescue listed", timeout=60)
