"""One client connection as an asyncio Protocol: framing, line limits, backpressure, timers, polite close.

It knows nothing of messages or roles: each complete line goes to its owner (the ``Server``) through the
small ``ConnectionOwner`` interface, so this module never imports the server. ``ClientErrorLog`` keeps
what any same-user client can make the daemon log to a bounded number of lines.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import structlog

from nexusd import protocol as p
from nexusd.daemon.peer import PeerCred
from nexusd.daemon.uploads import Uploads

log = structlog.get_logger("nexusd")

MAX_OUTBOX_BYTES = 32 << 20  # a UI that stops reading is dropped beyond this


class _LineLimit(Protocol):
    max_line_bytes: int
    max_ui_output: int
    idle_timeout: float
    line_timeout: float


class ConnectionOwner(Protocol):
    """What a connection needs of the server: its line limit, a way to run a task, and four callbacks."""

    @property
    def config(self) -> _LineLimit: ...

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None: ...

    def accepted(self, conn: Connection) -> None: ...

    def detached(self, conn: Connection) -> None: ...

    def framing_error(self, conn: Connection, code: p.ErrorCode, message: str) -> None: ...

    def client_fault(self, conn: Connection, event: str, **fields: Any) -> None: ...

    def on_line(self, conn: Connection, line: bytes) -> bool | Coroutine[Any, Any, None]: ...


class Connection(asyncio.Protocol):
    """One accepted client as an asyncio Protocol: an idle connection costs no task and no stream object.

    ``data_received`` splits input into lines; one short-lived task per burst handles them in order (a
    handler may await the policy). A reply goes straight into the transport's buffer; lines pushed from
    elsewhere (``post``) wait in an outbox until the end of the loop's turn, and a reply behind them waits
    there too, so lines leave in the order the daemon produced them. Backpressure: while the transport's
    buffer is above its high-water mark the daemon stops reading from the client and handles none of its
    queued lines (it must read its replies before it can ask for more), and a client with more than
    ``MAX_OUTBOX_BYTES`` unread is dropped.
    """

    __slots__ = (
        "agents",
        "buf",
        "busy",
        "cid",
        "closed",
        "deciding",
        "eof",
        "last_input",
        "line_since",
        "lines",
        "linger_budget",
        "name",
        "outbox",
        "outbox_bytes",
        "over_since",
        "peer",
        "pending",
        "queued",
        "read_mark",
        "role",
        "ruled",
        "seen",
        "sent",
        "server",
        "subscribed",
        "timer",
        "transport",
        "uploads",
        "write_paused",
    )

    def __init__(self, server: ConnectionOwner) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = _NO_PEER
        self.cid = 0
        self.role: str | None = None
        self.name = ""
        self.pending: list[str] | None = None  # ids of its pending requests; a list is the smallest container
        self.deciding = 0  # its requests whose decision is under way (requests.py)
        self.ruled: asyncio.Future[None] | None = None  # settled when its latest request has been settled
        self.subscribed = False
        self.closed = False  # nothing more is sent or handled (refused, lingering, killed, gone)
        self.eof = False
        self.buf = b""
        self.lines: deque[bytes] | None = None
        self.queued = 0  # bytes in ``lines``
        self.busy = False  # a task is handling ``lines``
        self.timer: asyncio.TimerHandle | None = None  # hello deadline, then the linger deadline
        self.linger_budget = -1  # >= 0 while lingering
        self.write_paused = False
        self.last_input = time.monotonic()  # when the last complete line arrived (or a pending request ended)
        self.line_since = 0.0  # when the unfinished line in ``buf`` began; 0: no line in progress
        self.sent = 0  # bytes ever queued for the client
        self.over_since = 0.0  # a subscribed UI: when its backlog went over max_ui_output; 0: it is not
        self.read_mark = 0  # bytes it had read by then (``sent`` minus unread)
        # (declared agent pid, the agent pids its asks are guarded against): resolved at its first ask
        self.agents: tuple[int | None, frozenset[int]] | None = None
        # (declared agent pid, the agents guard.AgentRegistry.saw found for it): touched on later requests
        self.seen: tuple[int | None, tuple[tuple[int, int], ...]] | None = None
        self.uploads: Uploads | None = None  # large input strings in transit (``part`` lines), made on first use
        self.outbox: list[bytes] | None = None  # pushed lines not yet written (see ``post``)
        self.outbox_bytes = 0

    @property
    def label(self) -> str:
        return f"{self.name or '?'} (pid {self.peer.pid})"

    # ------------------------------------------------------------------ output

    def send(self, data: bytes) -> bool:
        """Queue a line; never blocks. False if the client is gone (or was just dropped for not reading).

        A subscribed UI that stops reading while asks pour in is dropped once its unread output stays over
        ``max_ui_output`` (a few MB) for ``UI_STALL_SECONDS`` without it reading a byte (``check_timeouts``),
        or at once past four times that: its memory is bounded, other clients are not slowed, and the asks it
        was shown stay pending for every other UI. A UI that reads, however slowly, rides out a burst. Any
        other client is dropped past ``MAX_OUTBOX_BYTES``."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False  # the connection is going; connection_lost will detach it
        if self.outbox is not None:  # behind lines pushed earlier in this turn of the loop
            self.outbox.append(data)
            self.outbox_bytes += len(data)
        else:
            self.transport.write(data)
        return self._account(len(data))

    def post(self, data: bytes) -> bool:
        """Queue a line pushed from elsewhere (a prompt fan-out, a timer, another client's answer). To a
        subscribed UI it is written at the end of this turn of the event loop, together with every other
        line pushed to it meanwhile (up to ``_OUTBOX_BYTES``): a UI shown 32 asks that arrived together gets
        one write, not 32 (issue 21). Anything else gets its line at once: an agent is pushed one decision,
        and 10,000 of them timing out together must not each hold a buffer until the turn ends."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False
        if not self.subscribed:
            return self.send(data)
        if self.outbox is None:
            self.outbox = [data]
            self.outbox_bytes = len(data)
            asyncio.get_running_loop().call_soon(self.flush)
        else:
            self.outbox.append(data)
            self.outbox_bytes += len(data)
        ok = self._account(len(data))
        if self.outbox_bytes > _OUTBOX_BYTES:
            self.flush()  # a burst leaves in large writes, but is never held whole in a second copy
        return ok

    def flush(self) -> None:
        """Write what ``post`` queued (nothing once the connection is closed)."""
        out = self.outbox
        if out is None:
            return
        self.outbox = None
        self.outbox_bytes = 0
        t = self.transport
        if t is None or t.is_closing():
            return
        if len(out) == 1 or t.get_write_buffer_size():
            for data in out:  # behind unsent output: each line only joins the transport's buffer
                t.write(data)
        else:
            t.write(b"".join(out))

    def unsent(self) -> int:
        """Bytes queued for the client and not yet taken by it: the transport's buffer and the outbox."""
        t = self.transport
        return (t.get_write_buffer_size() if t is not None else 0) + self.outbox_bytes

    def _account(self, size: int) -> bool:
        self.sent += size
        unread = self.unsent()
        backlog = unread - size  # before this message (a big snapshot alone is fine)
        if self.subscribed:
            limit = self.server.config.max_ui_output
            if backlog > limit * _UI_HARD_FACTOR:
                return self._drop_slow_reader(unread, limit * _UI_HARD_FACTOR)
            if backlog > limit and not self.over_since:
                self.over_since = time.monotonic()
                self.read_mark = self.sent - unread
        elif backlog > MAX_OUTBOX_BYTES:
            return self._drop_slow_reader(unread, MAX_OUTBOX_BYTES)
        return True

    def _drop_slow_reader(self, unread: int, limit: int) -> bool:
        self.server.client_fault(
            self,
            "client stopped reading its messages; dropping it (its asks stay pending for other UIs)",
            unread_bytes=unread,
            limit=limit,
        )
        self.kill()
        return False

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.over_since = 0.0  # drained to the low-water mark
        if self.lines and not self.busy:
            self._pump()
        else:
            self._update_reading()

    def _update_reading(self) -> None:
        t = self.transport
        if t is None or self.closed or t.is_closing():
            return
        # a subscribed UI keeps being read while its output waits: its answers and cancels cost almost no
        # output, and a UI that writes an answer before reading on must not wedge (its output is bounded)
        if self.reading_paused():
            t.pause_reading()
        else:
            t.resume_reading()

    # ------------------------------------------------------------------ input

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.accepted(self)

    def data_received(self, data: bytes) -> None:
        if self.linger_budget >= 0:  # closing politely: discard, up to a budget
            self.linger_budget -= len(data)
            if self.linger_budget < 0 and self.transport is not None:
                self.transport.close()
            return
        if self.closed or self.eof:
            return
        limit = self.server.config.max_line_bytes
        buf = self.buf + data if self.buf else data
        start = 0
        now = time.monotonic()
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if len(line) > limit:
                self._queue(_TOO_LONG)
                return
            self._queue(line)
        if start:
            buf = buf[start:]
            self.last_input = now
            self.line_since = now if buf else 0.0  # a new line began in this chunk
        elif not self.line_since:
            self.line_since = now
        if len(buf) > limit:
            self._queue(_TOO_LONG)
            return
        self.buf = buf
        if self.lines and not self.busy:
            self._pump()

    def _queue(self, line: bytes) -> None:
        if self.lines is None:
            self.lines = deque()
        self.lines.append(line)
        self.queued += len(line)
        if line is _TOO_LONG:  # nothing after a framing error is read
            self.eof = True
            self.buf = b""
            if not self.busy:
                self._pump()
        elif self.queued > _MAX_QUEUED_INPUT:
            self._update_reading()

    def eof_received(self) -> bool:
        if self.linger_budget >= 0:
            return False  # the transport closes (after flushing what we sent)
        self.eof = True
        self.buf = b""  # half a line then EOF: the half is discarded
        if not self.busy and not self.lines:
            self.close_politely()
        return True  # keep our side open until the lines already read are answered

    def _pump(self) -> None:
        """Handle queued lines in order, inline while their handlers are synchronous (most are: an idle
        client has no task and a status query costs none); a handler that must await (the policy, a
        thread) gets one short task, which pumps on when it is done."""
        server = self.server
        try:
            while self.lines and not self.closed and not self.busy:
                if self.write_paused and not self.subscribed:
                    return  # resume_writing pumps again
                line = self.lines.popleft()
                self.queued -= len(line)
                if line is _TOO_LONG:
                    limit = server.config.max_line_bytes
                    server.framing_error(self, "line_too_long", f"line exceeds {limit} bytes")
                    self.close_politely()
                    return
                outcome = server.on_line(self, line)
                if outcome is False:
                    if not self.closed:
                        self.close_politely()
                    return
                if outcome is not True:
                    self.busy = True
                    server.spawn(self._await, outcome)
                    return
        except Exception:
            log.exception("connection handler failed", client=self.label)
            self.close_politely()
            return
        if not self.lines:
            self.lines = None  # an idle connection keeps no queue
            if self.eof and not self.closed:
                self.close_politely()
                return
        self._update_reading()

    async def _await(self, pending: Coroutine[Any, Any, None]) -> None:
        try:
            await pending
        finally:
            self.busy = False
        self._pump()

    # ------------------------------------------------------------------ ending

    def check_timeouts(self, now: float, idle: float, line: float) -> None:
        """Close a connection that stalls: a line begun and not finished within ``line`` seconds, or (after
        hello) nothing received for ``idle`` seconds while nothing of its own is pending or being handled.
        A UI keeps itself open with ``ping``. 0 turns either limit off."""
        if self.closed or self.linger_budget >= 0:
            return
        if self.over_since and now - self.over_since > UI_STALL_SECONDS:
            self._check_backlog(now)
            if self.closed:
                return
        if self.reading_paused():
            # we are not reading it (its replies wait unread, or our own backlog): its line cannot finish,
            # and only a client that reads nothing at all for the idle limit is closed
            if self.line_since:
                self.line_since = now
            if idle and self.write_paused and self.role is not None and now - self.last_input > idle:
                self._time_out("idle", f"read none of its replies for {idle:g} s")
            return
        if line and self.line_since and now - self.line_since > line:
            self._time_out("line", f"a line was begun and not finished within {line:g} s")
        elif line and self.line_since:
            return  # a line is arriving: the line limit, not the idle one, decides (it was a race under load)
        elif self.role is None:
            return  # the hello timer covers the handshake
        elif self.pending or self.busy or self.lines:
            self.last_input = now  # waiting for a person or the policy is not idleness; the clock starts after
        elif idle and now - self.last_input > idle:
            self._time_out("idle", f"idle for {idle:g} s (send ping to stay connected)")

    def _check_backlog(self, now: float) -> None:
        """A subscribed UI over ``max_ui_output`` for a while: dropped if it read nothing meanwhile."""
        if self.transport is None:
            return
        unread = self.unsent()
        read = self.sent - unread
        limit = self.server.config.max_ui_output
        if unread <= limit:
            self.over_since = 0.0
        elif read > self.read_mark:  # it reads, slowly: give it another while
            self.over_since, self.read_mark = now, read
        else:
            self._drop_slow_reader(unread, limit)

    def reading_paused(self) -> bool:
        return (self.write_paused and not self.subscribed) or self.queued > _MAX_QUEUED_INPUT

    def _time_out(self, kind: str, message: str) -> None:
        self.server.client_fault(self, f"connection closed: {kind} timeout", detail=message)
        self.send(p.encode(p.Error(code="timeout", message=f"closing: {message}")))
        self.buf = b""
        self.close_politely()  # input from here on is discarded while the error line is read

    def hello_expired(self) -> None:
        self.timer = None
        if self.role is None and not self.closed:
            self.send(p.encode(p.Error(code="protocol_version", message="no hello in time")))
            self.close_politely()

    def close_politely(self) -> None:
        """Stop sending (EOF after what is queued), then discard input for a moment before closing.

        Closing a Unix socket with unread input resets it, and the peer may lose the error line we just sent.
        """
        t = self.transport
        self.flush()  # what was queued leaves before the EOF
        self._detach()
        if t is None or t.is_closing() or self.linger_budget >= 0:
            return
        if self.eof:  # the peer already finished sending: nothing to discard
            t.close()
            return
        self.linger_budget = _LINGER_BYTES
        try:
            if t.can_write_eof():
                t.write_eof()
            t.resume_reading()
        except (OSError, RuntimeError):
            t.abort()
            return
        self.timer = asyncio.get_running_loop().call_later(_LINGER_SECONDS, self._end_linger)

    def _end_linger(self) -> None:
        self.timer = None
        t = self.transport
        if t is not None and not t.is_closing():
            t.abort() if t.get_write_buffer_size() else t.close()  # still unread after the linger: give up

    def kill(self) -> None:
        self.outbox = None
        self._detach()
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._detach()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _detach(self) -> None:
        """Leave the server: no more output, and every request still pending is cancelled (never allowed)."""
        if self.closed:
            return
        self.closed = True
        self.lines = None
        self.queued = 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.server.detached(self)


_NO_PEER = PeerCred(-1, -1, None)
_TOO_LONG = b"\n"  # sentinel in the line queue (a real line never contains a newline)
_LINGER_SECONDS = 0.5
_LINGER_BYTES = 1 << 20
_OUTBOX_BYTES = 1 << 16  # pushed lines held for one write at most
_MAX_QUEUED_INPUT = 1 << 18  # lines read but not yet handled, before reading from that client pauses
UI_STALL_SECONDS = 5.0  # a UI over max_ui_output that reads nothing for this long is dropped
_UI_HARD_FACTOR = 4  # ... and one over four times max_ui_output at once, reading or not


class ClientErrorLog:
    """What clients make the daemon log, at a bounded rate: any same-user process could otherwise fill the
    disk through the log (one line per garbage connection).

    Per window of ``interval`` seconds: the first fault of each client (its name and pid) is logged at once
    while fewer than ``max_lines`` lines were written in the window; later faults are counted, and when the
    window ends each client with uncounted faults gets one line with the count (at most ``max_lines``), and
    the rest one summary line. So a window writes at most ``2 * max_lines + 1`` lines, each short (client
    text is cut to ``_MAX_TEXT``), whatever the clients do.
    """

    def __init__(self, interval: float = 60.0, max_lines: int = 20) -> None:
        self.interval = interval
        self.max_lines = max_lines
        self.window_end = time.monotonic() + interval
        self.lines = 0  # lines logged at once in this window
        self.counts: dict[tuple[str, str], list[Any]] = {}  # (client, event) -> [faults not logged, fields]
        self.overflow = 0  # faults of clients beyond _MAX_TRACKED in this window
        self.total = 0  # every fault since start (status, tests)

    def note(self, client: str, event: str, fields: dict[str, Any], now: float) -> None:
        self.total += 1
        if now >= self.window_end:
            self.flush(now)
        key = (client, event)
        entry = self.counts.get(key)
        if entry is None:
            if len(self.counts) >= _MAX_TRACKED:
                self.overflow += 1
                return
            if self.lines < self.max_lines:
                self.lines += 1
                self.counts[key] = [0, None]
                log.warning(event, client=_cut(client), **{k: _cut(v) for k, v in fields.items()})
                return
            entry = self.counts[key] = [0, None]
        entry[0] += 1
        entry[1] = fields

    def flush(self, now: float) -> None:
        """At the end of a window: one line per client with faults not yet logged, then a summary."""
        if now < self.window_end:
            return
        written = 0
        rest_clients = rest_faults = 0
        for (client, event), (count, fields) in self.counts.items():
            if not count:
                continue
            if written < self.max_lines:
                written += 1
                log.warning(
                    f"{event} (repeated)",
                    client=_cut(client),
                    count=count,
                    interval_s=self.interval,
                    **{f"last_{k}": _cut(v) for k, v in (fields or {}).items()},
                )
            else:
                rest_clients += 1
                rest_faults += count
        rest_faults += self.overflow
        if rest_faults:
            log.warning(
                "client faults not logged one by one (rate limit)",
                clients=rest_clients,
                faults=rest_faults,
                interval_s=self.interval,
            )
        self.counts = {}
        self.overflow = 0
        self.lines = 0
        self.window_end = now + self.interval


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[:_MAX_TEXT] + "…"
    return value


_MAX_TRACKED = 10_000  # clients whose faults one window counts one by one
_MAX_TEXT = 200  # longest client-influenced text in a log line
