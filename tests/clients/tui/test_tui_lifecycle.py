"""The app's screens and their lifecycle: events that arrive before the queue screen is composed, and the
import direction between the app and its screens."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from nexus_clients.tui import app as app_module
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.link import LinkUp
from nexus_clients.tui.widgets import ConnectionBar, QueueView
from tui_items import T0, item

from nexusd import protocol

pytestmark = pytest.mark.anyio


class EarlyEvents(NexusTui):
    """Delivers a tick and daemon events in the same turn that pushes the queue screen, before that screen
    has composed its widgets: the ordering a loaded machine produces when the first interval tick or the
    link's first events win the race against the screen's Compose."""

    def on_mount(self) -> None:
        super().on_mount()
        assert not self.queue_screen.children, "the queue screen composed synchronously: the test shows nothing"
        self.tick()
        self.on_daemon_event(LinkUp("0.1.0"))
        self.on_daemon_event(protocol.Snapshot(items=[item(1)]))


async def test_events_before_the_queue_screen_is_composed_are_shown_once_it_is() -> None:
    app = EarlyEvents(clock=lambda: T0, connect=False, bell=False, arrival_guard=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        screen = app.queue_screen
        assert "connected" in screen.query_one(ConnectionBar).render().plain
        assert app.state.pending() and screen.query_one(QueueView).is_mounted
        assert app.bells == 1
    assert app.return_code in (None, 0), "the app died on an early event"


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any level (TYPE_CHECKING blocks and function bodies included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against this package
                base = ["nexus_clients", "tui"][: 3 - node.level]
                module = ".".join([*base, *([module] if module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_no_tui_module_imports_the_app() -> None:
    """The app composes screens, widgets and the link; they return results (dismiss, messages) and never
    reach back up into it, so the app can change without them and no import cycle hides in the package."""
    package = Path(app_module.__file__).parent
    offenders = {
        p.name: sorted(
            n for n in _imported_modules(p) if n == "nexus_clients.tui.app" or n.startswith("nexus_clients.tui.app.")
        )
        for p in package.glob("*.py")
        if p.name != "app.py"
    }
    assert not {k: v for k, v in offenders.items() if v}, offenders


async def test_events_while_the_app_shuts_down_do_not_touch_removed_widgets() -> None:
    """The link keeps delivering until its worker is cancelled, which is after the screens start closing: an
    event then must not redraw a queue screen whose widgets are already gone (seen as NoMatches at exit)."""
    import asyncio

    app = NexusTui(clock=lambda: T0, connect=False, bell=False, arrival_guard=0)
    stop = False
    fed = 0

    async def feed() -> None:
        nonlocal fed
        while not stop:
            app.on_daemon_event(protocol.Snapshot(items=[item(1 + fed % 3)]))
            fed += 1
            await asyncio.sleep(0)

    async with app.run_test(size=(100, 30)) as pilot:
        app.on_daemon_event(LinkUp("0.1.0"))
        await pilot.pause()
        feeder = asyncio.create_task(feed())
        await pilot.pause()
    stop = True
    await feeder
    assert fed > 2
    assert app.return_code in (None, 0), "the app died on a late event"
