"""The TUI's whole state in one place: the queue, the selection, the connection, the last message.

Plain data and plain methods, no Textual and no I/O: the daemon link feeds protocol events in, the
widgets read it out, and the tests drive it directly. The clock is injected so countdowns and the
arrival guard are deterministic under test.

Two rules here protect a person from answering the wrong request:
- the selection moves on its own only when nothing is selected or the selected request was decided,
  never away from a request still waiting (a key press meant for it must not land on another);
- a request that has just appeared, or that the selection has just moved to on its own, cannot be
  answered for ``arrival_guard`` seconds, so a key already on its way is not taken as its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from nexusd.protocol import Held, PendingItem, Resolved

Connection = Literal["connecting", "connected", "disconnected"]

RESOLVED_KEEP = 60.0  # seconds an answered request stays in the queue, greyed, with who answered it
RESOLVED_MAX = 20  # at most this many answered requests are kept
URGENT = 10.0  # seconds left from which the countdown turns urgent and the person is told to hold or answer
HOLD_SECONDS = 60.0  # what one hold asks for (the daemon caps it at what the agent waits)


@dataclass
class Entry:
    """One request as this TUI knows it: pending, or resolved (and kept for a while to say by whom)."""

    item: PendingItem
    seen_at: float  # when this TUI first learned of it (the arrival guard counts from here)
    resolved: Resolved | None = None
    resolved_at: float | None = None
    answered_here: str | None = None  # what this TUI sent, if it answered ("allow once", ...)

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def pending(self) -> bool:
        return self.resolved is None

    def remaining(self, now: float) -> float:
        return max(0.0, self.item.deadline - now)

    def holdable(self, now: float) -> bool:
        """Whether a hold can still push the deadline (the agent waits longer than the deadline)."""
        limit = self.item.hold_limit
        return self.pending and limit is not None and limit > self.item.deadline + 0.5 and self.remaining(now) > 0

    def urgent(self, now: float) -> bool:
        return self.pending and self.remaining(now) <= URGENT

    def outcome(self) -> str:
        """One line for the queue and detail: what happened to it, and who decided."""
        r = self.resolved
        if r is None:
            return "pending"
        if r.source == "timeout":
            return "denied: timed out (nobody answered)"
        if r.source == "cancelled":
            return "cancelled: the agent went away"
        if r.source == "error":  # nexusd itself failed or stopped: no person answered
            return f"denied by nexusd: {r.reason or 'an error'}"
        if r.source == "hook":  # a policy hook that ran while the person was asked denied first
            return f"denied by a policy hook before anyone answered: {r.reason or 'no reason given'}"
        who = r.answered_by or r.source
        scope = f" ({r.scope})" if r.scope and r.scope != "once" else ""
        return f"{r.decision}{scope}, answered by {who}"


@dataclass
class TuiState:
    clock: Callable[[], float]
    arrival_guard: float = 0.6
    entries: dict[str, Entry] = field(default_factory=dict)
    selected: str | None = None
    connection: Connection = "connecting"
    connection_detail: str = ""
    daemon_version: str = ""
    message: str = ""  # the last thing the person should read (lost race, sent, refused, ...)
    message_level: Literal["info", "warning", "error"] = "info"
    message_about: str | None = None  # the request the message is about; it goes when that one is no longer shown
    policy_errors: list[str] = field(default_factory=list)
    auto_selected_at: float = float("-inf")  # when the selection last moved without the person

    # ------------------------------------------------------------------ events from the daemon

    def apply_snapshot(self, items: list[PendingItem]) -> None:
        """A (re)subscription: the daemon's list is the truth; requests it no longer has are gone."""
        now = self.clock()
        known = self.entries
        self.entries = {}
        for item in items:
            old = known.get(item.id)
            self.entries[item.id] = Entry(item, old.seen_at if old else now)
        self._order()
        if self.selected not in self.entries:
            self.selected = None
        self._select_if_none()

    def apply_prompt(self, item: PendingItem) -> bool:
        """A new request; returns True when it is new to this TUI (ring the bell)."""
        if item.id in self.entries:
            return False
        self.entries[item.id] = Entry(item, self.clock())
        self._order()
        self._select_if_none()
        if self.message_level == "info":
            self.say("")  # "Sent: …" was about the last request; a warning or an error stays until read
        return True

    def apply_held(self, held: Held) -> Entry | None:
        """A person (here or elsewhere) held a request: its new deadline and how far it may still go."""
        entry = self.entries.get(held.id)
        if entry is None or not entry.pending:
            return None
        entry.item.deadline = held.deadline
        entry.item.hold_limit = held.limit
        return entry

    def apply_resolved(self, res: Resolved) -> Entry | None:
        entry = self.entries.get(res.id)
        if entry is None or entry.resolved is not None:
            return None
        entry.resolved = res
        entry.resolved_at = self.clock()
        self._order()
        if self.selected == res.id:
            self._select_if_none()  # if nothing else waits it stays, showing what happened to it
            if entry.answered_here is None:
                if self.selected == res.id:
                    self.say(f"The selected request was {entry.outcome()}.", "warning", about=res.id)
                else:  # the selection moved on: the message names the request it is about, never the live one
                    call = entry.item.call
                    gist = f"{call.tool} {_gist(call.input)}"
                    self.say(
                        f"The request you were reading ({gist}) was {entry.outcome()}; now showing the next one.",
                        "warning",
                        about=self.selected,
                    )
        return entry

    def disconnected(self, detail: str) -> None:
        """The daemon went away: it denied everything pending, and nothing is kept to send later."""
        self.connection = "disconnected"
        self.connection_detail = detail
        self.entries.clear()
        self.selected = None

    def connected(self, version: str) -> None:
        self.connection = "connected"
        self.connection_detail = ""
        self.daemon_version = version

    # ------------------------------------------------------------------ the queue

    def _order(self) -> None:
        """Waiting requests first (oldest first), then the decided ones: a decided row never pushes one that
        still waits down the list."""
        self.entries = dict(sorted(self.entries.items(), key=lambda kv: (not kv[1].pending, kv[1].item.created, kv[0])))

    def _select_if_none(self) -> None:
        """Select the oldest waiting request if nothing is selected or the selection was decided."""
        current = self.entries.get(self.selected) if self.selected else None
        if current is None or not current.pending:
            first = next((e for e in self.entries.values() if e.pending), None)
            if first is not None:
                self.selected = first.id
                self.auto_selected_at = self.clock()
                self._message_follows()
            elif current is None:
                self.selected = None

    def _message_follows(self) -> None:
        """A message about one request ("… was denied: timed out") must not stand over another one."""
        if self.message_about is not None and self.message_about != self.selected:
            self.message, self.message_level, self.message_about = "", "info", None

    def prune(self) -> None:
        """Forget answered requests after a while, never the selected one."""
        now = self.clock()
        done = [e for e in self.entries.values() if not e.pending and e.id != self.selected]
        drop = {e.id for e in done if e.resolved_at is not None and now - e.resolved_at > RESOLVED_KEEP}
        extra = [e.id for e in done if e.id not in drop]
        drop.update(extra[: max(0, len(extra) - RESOLVED_MAX)])
        for key in drop:
            del self.entries[key]

    def queue(self) -> list[Entry]:
        return list(self.entries.values())

    def pending(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.pending]

    def current(self) -> Entry | None:
        return self.entries.get(self.selected) if self.selected else None

    def select(self, entry_id: str | None) -> None:
        """The person chose: no guard for the choice itself."""
        if entry_id is None or entry_id in self.entries:
            self.selected = entry_id
            self.auto_selected_at = float("-inf")
            self._message_follows()

    def move(self, step: int) -> None:
        """Up/down through the whole queue, answered entries included."""
        ids = list(self.entries)
        if not ids:
            self.selected = None
            return
        if self.selected not in self.entries:
            self.selected = ids[0] if step > 0 else ids[-1]
            return
        i = ids.index(self.selected)
        self.select(ids[max(0, min(len(ids) - 1, i + step))])

    def next_pending(self, step: int = 1) -> None:
        """Jump to the next (or previous) request still waiting, wrapping around."""
        ids = list(self.entries)
        waiting = [e.id for e in self.entries.values() if e.pending]
        if not waiting:
            return
        if self.selected not in self.entries:
            self.selected = waiting[0]
            return
        i = ids.index(self.selected)
        order = ids[i + 1 :] + ids[: i + 1] if step > 0 else list(reversed(ids[:i])) + list(reversed(ids[i:]))
        self.select(next(x for x in order if x in waiting))

    # ------------------------------------------------------------------ answering

    def answerable(self) -> tuple[Entry | None, str]:
        """The selected entry if it may be answered now, else None and why not."""
        if self.connection != "connected":
            return None, "Not connected to nexusd: nothing was sent (answers are never kept to send later)."
        entry = self.current()
        if entry is None:
            return None, "No request selected."
        if not entry.pending:
            return None, f"Already {entry.outcome()}."
        if entry.remaining(self.clock()) <= 0:
            return None, "Too late: this request has timed out and is being denied."
        if self.clock() - entry.seen_at < self.arrival_guard:
            return None, "This request just arrived: read it first, then answer."
        if self.clock() - self.auto_selected_at < self.arrival_guard:
            return None, "The selection just moved to this request: read it first, then answer."
        return entry, ""

    def say(self, message: str, level: Literal["info", "warning", "error"] = "info", about: str | None = None) -> None:
        self.message = message
        self.message_level = level
        self.message_about = about


def _gist(inp: dict[str, object], width: int = 50) -> str:
    """A few words of a call, to name it in a message (escaped by whoever shows the message)."""
    for key in ("command", "file_path", "path", "url", "pattern"):
        value = inp.get(key)
        if isinstance(value, str):
            return value if len(value) <= width else value[: width - 1] + "…"
    return ""
