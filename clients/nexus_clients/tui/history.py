"""The undo history in the TUI: past calls that could change a workspace, each call's diff, and rewind.

A person's screen: the daemon refuses ``history`` and ``rewind`` from an agent's process tree whatever
the UI does. A rewind is shown as a dry run first (every path it would change, and the files changed
after the call by someone else), then confirmed; overwriting those needs a second, explicit yes.
Everything from the daemon is untrusted text (file names, commands): shown through ``safe_text``.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from nexus_clients.tui.escaping import safe_text
from nexus_clients.tui.link import DaemonCall, describe_error
from nexus_clients.tui.screens import ConfirmScreen
from nexusd import protocol

MAX_DIFF_LINES = 2000  # a screen, not a pager: `nexusctl history show` prints the whole diff


def diff_text(diff: str) -> Text:
    """A unified diff, coloured by line, every line escaped (a file's bytes are the agent's to choose)."""
    out = Text()
    lines = diff.splitlines()
    for line in lines[:MAX_DIFF_LINES]:
        style = ""
        if line.startswith(("+++", "---", "diff ", "index ")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        out.append_text(safe_text(line, style=style))
        out.append("\n")
    if len(lines) > MAX_DIFF_LINES:
        out.append(f"... {len(lines) - MAX_DIFF_LINES} more lines: nexusctl history show\n", style="dim")
    return out


def counts(e: protocol.HistoryEntry) -> str:
    if e.tree is None:
        return "no checkpoint"
    return f"+{e.added} ~{e.changed} -{e.deleted}  +{e.plus}/-{e.minus}"


class HistoryScreen(Screen[None]):
    """Checkpoints, newest last; the selected call's diff below; w rewinds to before it (after a dry run)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("ctrl+r", "refresh", "refresh"),
        Binding("w", "rewind", "rewind to before this call"),
    ]

    def __init__(self, call: DaemonCall, reply: protocol.HistoryReply | None = None) -> None:
        """``reply`` shows that instead of asking the daemon (snapshot tests)."""
        super().__init__()
        self.call = call
        self.entries: list[protocol.HistoryEntry] = []
        self.initial = reply

    def compose(self) -> ComposeResult:
        yield Label(Text("Undo history: calls that could change a workspace (w rewinds to before one)", style="bold"))
        yield Static(id="history-message")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="history-diff-box"):
            yield Static(id="history-diff")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.styles.height = "40%"
        table.add_columns("id", "when", "session", "tool", "what", "changes")
        if self.initial is None:
            self.action_refresh()
        else:
            self.show(self.initial)

    @work(exclusive=True, group="history")
    async def action_refresh(self) -> None:
        msg = self.query_one("#history-message", Static)
        try:
            reply = await self.call(protocol.History(limit=500))
        except Exception as e:
            msg.update(Text(f"cannot load the history: {describe_error(e)}", style="red"))
            return
        if not isinstance(reply, protocol.HistoryReply):
            msg.update(Text("unexpected reply", style="red"))
            return
        self.show(reply)

    def show(self, reply: protocol.HistoryReply) -> None:
        self.entries = list(reply.entries)
        table = self.query_one(DataTable)
        table.clear()
        for e in self.entries:
            what = e.summary.replace("\n", " ")
            table.add_row(
                str(e.id),
                time.strftime("%H:%M:%S", time.localtime(e.time)),
                safe_text(e.session[:12] if e.kind == "call" else "rescue"),
                safe_text(e.tool),
                safe_text(what[:60]),
                Text(counts(e), style="red" if e.tree is None else ""),
            )
        self.query_one("#history-message", Static).update(Text(f"{len(self.entries)} checkpoints", style="dim"))
        if self.entries:
            table.move_cursor(row=len(self.entries) - 1)

    def selected(self) -> protocol.HistoryEntry | None:
        row = self.query_one(DataTable).cursor_row
        return self.entries[row] if 0 <= row < len(self.entries) else None

    @on(DataTable.RowHighlighted)
    def highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self.load_diff()

    @work(exclusive=True, group="history-diff")
    async def load_diff(self) -> None:
        e = self.selected()
        pane = self.query_one("#history-diff", Static)
        if e is None:
            pane.update("")
            return
        if e.tree is None:
            pane.update(safe_text(e.note or "no checkpoint"))
            return
        try:
            reply = await self.call(protocol.History(id=e.id, diff=True))
        except Exception as err:
            pane.update(Text(f"cannot load the diff: {describe_error(err)}", style="red"))
            return
        if isinstance(reply, protocol.HistoryReply):
            head = Text(f"{e.id}  ", style="bold")
            head.append_text(safe_text(e.summary))
            head.append(f"\nin {e.workspace}\n\n", style="dim")
            pane.update(head + diff_text(reply.diff or "(no change)"))

    @work(exclusive=True, group="history-rewind")
    async def action_rewind(self) -> None:
        e = self.selected()
        msg = self.query_one("#history-message", Static)
        if e is None:
            return
        try:
            dry = await self.call(protocol.Rewind(id=e.id, dry_run=True))
        except Exception as err:
            msg.update(Text(f"cannot rewind: {describe_error(err)}", style="red"))
            return
        if not isinstance(dry, protocol.RewindReply) or not dry.ok or not dry.changes:
            detail = dry.detail if isinstance(dry, protocol.RewindReply) else "unexpected reply"
            msg.update(safe_text(detail))
            return
        question = Text(f"Rewind the workspace to before call {e.id}?\n", style="bold")
        for action, path in dry.changes[:40]:
            question.append(f"  {action:8} ")
            question.append_text(safe_text(path))
            question.append("\n")
        if len(dry.changes) > 40:
            question.append(f"  ... and {len(dry.changes) - 40} more\n")
        question.append("A rescue checkpoint is taken first: the rewind can be rewound.")
        if not await self.app.push_screen_wait(ConfirmScreen(question)):
            return
        force = False
        if dry.conflicts:
            warn = Text("Changed after the call by someone else (overwrite them too?):\n", style="bold red")
            for path in dry.conflicts[:40]:
                warn.append_text(safe_text(path))
                warn.append("\n")
            force = await self.app.push_screen_wait(ConfirmScreen(warn))
            if not force:
                msg.update(Text("not rewound: nothing changed", style="yellow"))
                return
        try:
            done = await self.call(protocol.Rewind(id=e.id, force=force))
        except Exception as err:
            msg.update(Text(f"not rewound: {describe_error(err)}", style="red"))
            return
        if isinstance(done, protocol.RewindReply):
            msg.update(safe_text(done.detail + ("; " + "; ".join(done.errors[:3]) if done.errors else "")))
        self.action_refresh()
