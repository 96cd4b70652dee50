"""The main screen's widgets. Each reads the one ``TuiState`` and renders Rich ``Text``, never markup.

The queue is a small custom widget rather than a ``DataTable``: the selection must live in the state
alone, because a table's cursor moves by row *index* when rows come and go, and a person's key press
must never land on a different request than the one they are looking at.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Static

from nexus_clients.tui import request_view
from nexus_clients.tui.escaping import safe_text
from nexus_clients.tui.filediff import Change
from nexus_clients.tui.state import Entry, TuiState


def short_tail(text: str, width: int) -> str:
    """Keep the end of a path: the project's own directory name is what tells workspaces apart."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _pad(text: Text, width: int) -> Text:
    text = text.copy()
    text.truncate(width, overflow="ellipsis", pad=True)
    return text


class ConnectionBar(Static):
    """Top line: connected or not, daemon version, how many requests wait."""

    def __init__(self, state: TuiState, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.state = state

    def render(self) -> Text:
        s = self.state
        waiting = len(s.pending())
        if s.connection == "connected":
            line = Text(" nexus-tui ", style="bold reverse")
            line.append(f" connected to nexusd {s.daemon_version} ", style="green")
            line.append(f" {waiting} waiting ", style="bold yellow" if waiting else "dim")
        elif s.connection == "connecting":
            line = Text(" nexus-tui ", style="bold reverse")
            line.append(" connecting to nexusd… ", style="yellow")
        else:
            line = Text(" nexus-tui ", style="bold reverse")
            line.append(" nexusd is not reachable ", style="bold reverse red")
            line.append(" ")
            line.append_text(safe_text(s.connection_detail, style="red"))
        if s.policy_errors:
            line.append(f"  policy errors: {len(s.policy_errors)} (t: status)", style="bold red")
        line.no_wrap = True
        line.overflow = "ellipsis"
        return line


class QueueView(Widget, can_focus=True):
    """Every known request, oldest first; pending ones with a countdown, answered ones greyed."""

    class Picked(Message):
        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    def __init__(self, state: TuiState, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.state = state
        self._first = 0  # index of the first entry shown

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(2, len(self.state.entries) + 1)

    def _widths(self, width: int) -> list[int]:
        wide = width >= 120
        cols = [2, 5, 8, 14 if wide else 9, 30 if wide else 14, 22 if wide else 10]
        return [*cols, max(8, width - sum(cols) - len(cols))]

    def render(self) -> Text:
        now = self.state.clock()
        widths = self._widths(self.size.width)
        header = ["", "left", "agent", "session", "workspace", "tool", "request"]
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        for n, (title, w) in enumerate(zip(header, widths, strict=True)):
            out.append(("" if n == 0 else " ") + title.ljust(w)[:w], style="bold dim")
        entries = self.state.queue()
        if not entries:
            out.append("\n")
            msg = "no requests waiting" if self.state.connection == "connected" else "nothing to answer while offline"
            out.append("  " + msg, style="dim italic")
            return out
        rows = max(1, self.size.height - 1)
        ids = [e.id for e in entries]
        sel = ids.index(self.state.selected) if self.state.selected in ids else 0
        if sel < self._first:
            self._first = sel
        elif sel >= self._first + rows:
            self._first = sel - rows + 1
        self._first = max(0, min(self._first, max(0, len(entries) - rows)))
        for entry in entries[self._first : self._first + rows]:
            out.append("\n")
            out.append_text(self._row(entry, now, widths))
        return out

    def _row(self, entry: Entry, now: float, widths: list[int]) -> Text:
        cells = request_view.queue_cells(entry, now)
        selected = entry.id == self.state.selected
        cells[3] = safe_text(short_tail(request_view.workspace(entry), widths[4]), style=cells[3].style)
        row = Text("▶ " if selected else "  ", style="bold")
        for cell, w in zip(cells, widths[1:], strict=True):
            row.append(" ")
            row.append_text(_pad(cell, w))
        if selected:
            row.stylize("reverse")
        return row

    def on_click(self, event: events.Click) -> None:
        index = self._first + event.y - 1
        entries = self.state.queue()
        if event.y >= 1 and 0 <= index < len(entries):
            self.post_message(self.Picked(entries[index].id))


class RequestDetail(VerticalScroll):
    """The selected request in full. The file diff is computed once per request (it reads the disk)."""

    def __init__(self, state: TuiState, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.state = state
        self._changes: dict[str, Change | None] = {}
        self._shown: str | None = None
        self.plain = ""  # what is shown, as plain text (tests and the tmux smoke test read it)

    def compose(self) -> ComposeResult:
        yield Static(id="detail-body")

    def refresh_detail(self) -> None:
        entry = self.state.current()
        body = self.query_one("#detail-body", Static)
        if entry is None:
            text = Text("No request selected.", style="dim italic")
            if self.state.connection != "connected":
                text = Text("Waiting for nexusd. Nothing is pending while it is away.", style="dim italic")
            body.update(text)
            self.plain = text.plain
            self._shown = None
            return
        if entry.id not in self._changes:
            self._changes[entry.id] = request_view.file_change(entry)
            for stale in [k for k in self._changes if k not in self.state.entries]:
                del self._changes[stale]
        lines = request_view.detail(entry, self.state.clock(), self._changes[entry.id])
        self.plain = "\n".join(t.plain for t in lines)
        body.update(Group(*lines))
        if self._shown != entry.id:
            self._shown = entry.id
            self.scroll_home(animate=False)


class MessageLine(Static):
    def __init__(self, state: TuiState, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.state = state

    def render(self) -> Text:
        style = {"info": "", "warning": "bold yellow", "error": "bold red"}[self.state.message_level]
        text = safe_text(self.state.message, style=style)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text


# The allow answers first, the deny answers after help: Deny never sits beside Always (two rows when narrow).
ACTIONS: list[tuple[str, str, str]] = [
    ("allow_once", "y allow", "success"),
    ("allow_session", "s session", "success"),
    ("allow_for", "f while", "success"),
    ("edit_input", "i edit", "success"),
    ("always", "a always", "primary"),
    ("help", "? help", "default"),
    ("deny", "n deny", "error"),
    ("deny_message", "N +msg", "error"),
    ("abort", "x stop", "error"),
    ("never", "e never", "error"),
    ("mode", "m mode", "default"),
]


class ActionBar(Horizontal):
    """The answers as buttons, for the mouse; each does exactly what its key does."""

    def compose(self) -> ComposeResult:
        for action, label, variant in ACTIONS:
            yield Button(label, id=f"act-{action}", variant=variant, compact=True)  # type: ignore[arg-type]
