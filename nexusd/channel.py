"""The blocking driver of ``nexusd.conversation``: one ``Conversation`` over one ``LineSocket``.

Standard library only: the hook's lean wire and the blocking ``nexusd.client.Client`` both talk through
it, so connecting, waiting against a deadline, cancelling on a timeout and keeping a quiet connection
alive are written once. All the protocol's rules are the conversation's; this only moves bytes and waits.
"""

import time

from nexusd.client_errors import DaemonUnreachable, NexusClientError, ReplyTimeout
from nexusd.conversation import NEED_DATA, Conversation, Pushed, Refused, Replied, Waiting, Welcomed
from nexusd.linesocket import LineSocket

TYPE_CHECKING = False  # the per-call hook imports this module: typing, collections, contextlib cost it ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class BlockingChannel:
    """Calls one at a time; pushes that arrive meanwhile are kept in ``events`` (a UI reads them with
    ``next_push``). While a wait lasts longer than a third of the daemon's idle limit it sends a keep-alive
    ``ping``, so a UI blocked waiting for prompts stays connected."""

    def __init__(self, conv: "Conversation", line: "LineSocket") -> None:
        self.conv = conv
        self.line = line
        self.events: list[Any] = []  # few: the pushes that came while a call waited
        self._last_sent = time.monotonic()

    @classmethod
    def connect(cls, conv: "Conversation", path: str, timeout: float) -> "BlockingChannel":
        """Connect, say hello and wait for the welcome; closed again on any failure."""
        chan = cls(conv, LineSocket.connect(path, timeout))
        try:
            chan.send(conv.hello())
            deadline = time.monotonic() + timeout
            while True:
                event = chan._next(deadline)
                if isinstance(event, Welcomed):
                    return chan
        except BaseException:
            chan.close()
            raise

    def close(self) -> None:
        self.line.close()

    def send(self, data: bytes) -> None:
        if data:
            self.line.send(data)
            self._last_sent = time.monotonic()

    def call(self, ref: str, data: bytes, deadline: float, on_waiting: "Callable[[Any], None] | None" = None) -> "Any":
        """Send one call's line and return its final reply; ClientError if the daemon refused it,
        ReplyTimeout at ``deadline`` (the call is given up, and cancelled if a person was being asked)."""
        try:
            self.send(data)
            while True:
                event = self._next(deadline)
                if isinstance(event, Replied) and event.ref == ref:
                    return event.message
                if isinstance(event, Refused) and event.ref == ref:
                    raise event.error
                if isinstance(event, Waiting) and event.ref == ref:
                    if on_waiting is not None:
                        on_waiting(event.message)
                    continue
                if isinstance(event, Pushed):
                    self.events.append(event.message)
                    if self.conv.codec.tag_of(event.message) == "bye":
                        reason = self.conv.codec.get(event.message, "reason")
                        self.close()
                        raise DaemonUnreachable(f"nexusd is stopping: {reason}")
        except ReplyTimeout:
            cancel = self.conv.give_up(ref)
            try:  # noqa: SIM105 - best effort; no contextlib on the hook path
                self.send(cancel)
            except (NexusClientError, ValueError):
                pass
            raise
        except BaseException:
            self.conv.give_up(ref)
            raise

    def next_push(self, deadline: float) -> "Any":
        """The next pushed message (prompt, resolved, notice, bye); ReplyTimeout at ``deadline``."""
        if self.events:
            return self.events.pop(0)
        while True:
            event = self._next(deadline)
            if isinstance(event, Pushed):
                return event.message

    def _next(self, deadline: float) -> "Any":
        """The conversation's next event, reading (and keeping the connection alive) as needed."""
        while True:
            event = self.conv.next_event()
            owed = self.conv.data_to_send()
            if owed:
                try:  # noqa: SIM105 - best effort cancel; no contextlib on the hook path
                    self.send(owed)
                except NexusClientError:
                    pass
            if event is not NEED_DATA:
                return event
            self.conv.receive_data(self._read(deadline))

    def _read(self, deadline: float) -> bytes:
        idle = self.conv.idle_timeout
        while True:
            if not idle:
                return self.line.read_some(deadline)
            ping_at = self._last_sent + idle / 3
            try:
                return self.line.read_some(min(deadline, ping_at))
            except ReplyTimeout:
                if time.monotonic() >= deadline:
                    raise
            self.send(self.conv.keepalive())  # a long wait (a UI waiting for prompts): keep the connection
