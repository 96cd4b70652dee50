"""Holds: a person asks for more time on a pending ask (a UI's Hold, a desktop notification's), up to the
moment its agent stops waiting. A hold only delays the deny a timeout would give; every UI is told the new
deadline (``Held``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog

from nexusd import protocol as p
from nexusd.daemon.connection import Connection
from nexusd.daemon.pending import PendingEntry

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")

HOLD_STEP = 60.0  # seconds a notification's Hold asks for (capped at what the agent can wait)


class Holds:
    """Pushing a pending ask's deadline, for a UI or a notification."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state

    def hold_from_notification(self, rid: str) -> None:
        """A desktop notification's Hold: the same as a UI's (it only delays a deny)."""
        entry = self.state.pending.get(rid)
        if entry is not None:
            self.hold(entry, HOLD_STEP, "desktop notification")

    def hold(self, entry: PendingEntry, seconds: float, by: str) -> bool:
        """Push ``entry``'s deadline (at most to its limit) and tell every UI; False when it cannot move."""
        if not self.state.pending.extend(entry, seconds):
            return False
        held = p.encode(
            p.Held(
                id=entry.id,
                deadline=entry.deadline_wall,
                limit=entry.deadline_wall + (entry.limit - entry.deadline),
                by=by,
            )
        )
        for ui in list(self.state.subscribers):
            ui.post(held)
        log.info("ask held", id=entry.id, by=by, left=round(entry.deadline - time.monotonic(), 1))
        return True

    def on_hold(self, conn: Connection, msg: p.Hold) -> None:
        entry = self.state.pending.get(msg.id)
        if entry is None:
            code: p.ErrorCode = "already_decided" if self.state.pending.decided(msg.id) else "not_found"
            self.state.reply_error(conn, code, "no pending request with that id", msg.ref)
            return
        if not self.hold(entry, msg.seconds, conn.label):
            if entry.limit <= entry.deadline + 0.001:
                why = (
                    "cannot be held longer: its agent stops waiting then (its hook's timeout, or it did not "
                    "say how long it waits); answer now"
                )
            else:
                why = "already held that long"
            self.state.reply_error(conn, "refused", why, msg.ref)
            return
        left = entry.deadline - time.monotonic()
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"held: {left:.0f} s left")))
