"""Client library for the nexusd socket: a blocking ``Client`` and an anyio ``AsyncClient``.

Both are thin drivers of ``nexusd.conversation.Conversation`` (the one client conversation, which the
hook's lean wire drives too) with ``StructCodec``, its msgspec spelling. Short-lived clients import this
once per call, so the module itself imports only the standard library, msgspec and the protocol; anyio is
imported inside ``AsyncClient``. Every failure is an exception callers turn into deny:
``DaemonUnreachable`` (cannot connect, connection lost, no reply in time), ``BadReply`` (undecodable or
unexpected reply), ``ClientError`` (the daemon answered with a protocol ``Error``).
"""

from __future__ import annotations

import contextlib
import os
import time
import typing
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec

from nexusd import protocol as p
from nexusd.channel import BlockingChannel
from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError, ReplyTimeout
from nexusd.conversation import NEED_DATA, Conversation, Pushed, Refused, Replied, Waiting, Welcomed
from nexusd.linesocket import why

__all__ = [
    "AsyncClient",
    "BadReply",
    "Client",
    "ClientError",
    "DaemonUnreachable",
    "NexusClientError",
    "ReplyTimeout",
    "StructCodec",
    "resolve_socket",
]

_UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_duration(text: str, now: float | None = None) -> float:
    """Seconds for a grant: ``90s``, ``15m``, ``15 min``, ``1h``, ``2 days``, or ``eod`` / ``end of day``
    (until the next local midnight). Raises ValueError."""
    import re
    from datetime import datetime, timedelta

    t = text.strip().lower()
    if t in ("eod", "end of day", "end-of-day", "until end of day", "today"):
        start = datetime.fromtimestamp(time.time() if now is None else now)
        midnight = (start + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return (midnight - start).total_seconds()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?", t)
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 15m, 1h, 2d, eod)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise ValueError(f"a duration must be more than 0: {text!r}")
    return seconds


def resolve_socket(socket_path: str | os.PathLike[str] | None) -> str:
    from nexusd.locations import socket_path as default_socket

    return str(default_socket(str(socket_path) if socket_path else None))


class StructCodec:
    """``nexusd.conversation``'s codec in msgspec Structs (``nexusd.protocol``)."""

    def build(self, tag: str, fields: dict[str, Any]) -> p.ClientMessage:
        msg: p.ClientMessage = CLIENT_CLASSES[tag](**fields)
        return msg

    def tag_of(self, msg: msgspec.Struct) -> str:
        return str(msg.__struct_config__.tag)

    def get(self, msg: msgspec.Struct, field: str) -> Any:
        return getattr(msg, field, None)

    def with_ref(self, msg: msgspec.Struct, ref: str) -> msgspec.Struct:
        return msgspec.structs.replace(msg, ref=ref)

    def with_field(self, msg: msgspec.Struct, field: str, value: Any) -> msgspec.Struct:
        return msgspec.structs.replace(msg, **{field: value})

    def encode(self, msg: msgspec.Struct) -> bytes:
        return p.encode(msg)

    def decode(self, line: bytes) -> p.ServerMessage:
        try:
            return p.decode_server(line)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError) as e:
            raise BadReply(f"undecodable reply from nexusd: {e}") from e


CLIENT_CLASSES: dict[str, Any] = {str(c.__struct_config__.tag): c for c in typing.get_args(p.ClientMessage)}


class Client:
    """Blocking client. ``with Client(role="agent") as c: c.request(call)``; one thread at a time.

    It cannot wedge against the daemon's backpressure: a send reads whatever arrives while it waits
    (``LineSocket.send``), and pushes read while waiting for a reply are kept in ``events`` (in memory,
    without bound: a UI must go on calling ``next_event``). While it waits in a read longer than a third of
    the daemon's idle limit it sends ``ping``, so a UI blocked in ``next_event`` stays connected; a client
    that does not call into this object at all for longer than the idle limit is closed by the daemon.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        role: p.Role = "agent",
        name: str = "nexus-client",
        timeout: float = 5.0,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.role = role
        self.name = name
        self.timeout = timeout
        self.welcome: p.Welcome | None = None
        self._chan: BlockingChannel | None = None

    # ---------------------------------------------------------------- connection

    def connect(self) -> Client:
        conv = Conversation(StructCodec(), self.role, self.name, ref_prefix="c")
        self._chan = BlockingChannel.connect(conv, self.socket_path, self.timeout)
        self.welcome = conv.welcome
        return self

    def close(self) -> None:
        if self._chan is not None:
            self._chan.close()
            self._chan = None

    def __enter__(self) -> Client:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def events(self) -> list[Any]:
        """Pushes (Prompt, Resolved, ...) read while waiting for a reply."""
        return self._connected().events

    # ---------------------------------------------------------------- API

    def call(self, msg: msgspec.Struct, timeout: float | None = None) -> Any:
        """Send any query and return its one reply (matched by ``ref``); a protocol Error raises ClientError."""
        chan = self._connected()
        ref, data = chan.conv.send_call(msg)
        return chan.call(ref, data, time.monotonic() + (self.timeout if timeout is None else timeout))

    def request(
        self,
        call: p.CallInfo,
        on_no_ui: p.NoUi = "deny",
        timeout: float = 55.0,
        on_pending: Callable[[p.Pending], None] | None = None,
    ) -> p.Decision:
        """Submit a tool call and wait (through Pending, shown to ``on_pending``) for its Decision; give up
        (and cancel) at ``timeout``."""
        chan = self._connected()
        ref, data = chan.conv.send_request(call, on_no_ui, max_wait=_max_wait(timeout))
        decision: p.Decision = chan.call(ref, data, time.monotonic() + timeout, on_pending)
        return decision

    def status(self) -> p.StatusReply:
        reply: p.StatusReply = self.call(p.Status())
        return reply

    def check(self, call: p.CallInfo) -> p.Verdict:
        reply: p.CheckResult = self.call(p.Check(call=call))
        return reply.verdict

    def answer(
        self,
        pending_id: str,
        decision: typing.Literal["allow", "deny"],
        scope: p.Scope = "once",
        message: str | None = None,
        rules: list[str] | None = None,
        abort: bool = False,
        duration: float | None = None,
        updated_input: dict[str, Any] | None = None,
        confirm_broad: bool = False,
    ) -> p.Ack:
        ack: p.Ack = self.call(
            p.Answer(
                id=pending_id,
                decision=decision,
                scope=scope,
                message=message,
                rules=rules,
                abort=abort,
                duration=duration,
                updated_input=updated_input,
                confirm_broad=confirm_broad,
            ),
            timeout=max(self.timeout, 30.0),
        )
        return ack

    def grants(self) -> list[p.GrantInfo]:
        reply: p.GrantsReply = self.call(p.Grants())
        return reply.grants

    def revoke(self, grant_id: str) -> p.Ack:
        ack: p.Ack = self.call(p.RevokeGrant(id=grant_id))
        return ack

    def subscribe(self) -> p.Snapshot:
        """Start the stream; read further events with ``next_event``."""
        snapshot: p.Snapshot = self.call(p.Subscribe())
        return snapshot

    def next_event(self, timeout: float | None = None) -> p.ServerMessage:
        """The next pushed message (Prompt, Resolved, PolicyNotice, Bye); ReplyTimeout when none arrives."""
        chan = self._connected()
        event: p.ServerMessage = chan.next_push(time.monotonic() + (self.timeout if timeout is None else timeout))
        return event

    def _connected(self) -> BlockingChannel:
        if self._chan is None:
            raise DaemonUnreachable("not connected")
        return self._chan


class AsyncClient:
    """anyio client for UIs and bridges: concurrent calls on one connection, plus a subscription stream.

    ``async with AsyncClient(role="ui") as c: async for event in c.subscribe(): ...``. The conversation's
    events are routed by a reader task: replies to the call waiting for them, pushes to the subscription.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        role: p.Role = "ui",
        name: str = "nexus-client",
        timeout: float = 5.0,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.role = role
        self.name = name
        self.timeout = timeout
        self.welcome: p.Welcome | None = None
        self._conv = Conversation(StructCodec(), role, name, ref_prefix="a")
        self._waiters: dict[str, Any] = {}  # ref -> MemoryObjectSendStream of events
        self._events_send: Any = None
        self._events_recv: Any = None
        self._subscribe_ref: str | None = None
        self._stream: Any = None
        self._tg: Any = None
        self._send_lock: Any = None
        self._closed_reason: str | None = None
        self._last_sent = 0.0

    async def __aenter__(self) -> AsyncClient:
        import anyio

        try:
            with anyio.fail_after(self.timeout):
                self._stream = await anyio.connect_unix(self.socket_path)
        except TimeoutError as e:
            raise DaemonUnreachable(f"cannot connect to nexusd at {self.socket_path}: timed out") from e
        except OSError as e:
            raise DaemonUnreachable(f"cannot connect to nexusd at {self.socket_path}: {why(e)}") from e
        self._send_lock = anyio.Lock()
        self._events_send, self._events_recv = anyio.create_memory_object_stream[Any](MAX_QUEUED_EVENTS)
        try:
            await self._greet()
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._stream.aclose()
            raise
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reader)
        if self._conv.idle_timeout:
            self._tg.start_soon(self._keepalive, self._conv.idle_timeout / 3)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._tg is None:
            return
        tg, self._tg = self._tg, None
        import anyio

        tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await self._stream.aclose()
        await tg.__aexit__(None, None, None)

    # ---------------------------------------------------------------- API

    async def call(self, msg: msgspec.Struct, timeout: float | None = None) -> Any:
        """Send a message and return its one reply (matched by ``ref``); Error raises ClientError."""
        return await self._roundtrip(
            *self._conv_call(lambda: self._conv.send_call(msg)), self.timeout if timeout is None else timeout
        )

    async def request(self, call: p.CallInfo, on_no_ui: p.NoUi = "deny", timeout: float = 55.0) -> p.Decision:
        """Submit a tool call and wait (through Pending) for the Decision; give up (and cancel) at ``timeout``."""
        decision: p.Decision = await self._roundtrip(
            *self._conv_call(lambda: self._conv.send_request(call, on_no_ui, max_wait=_max_wait(timeout))), timeout
        )
        return decision

    async def status(self) -> p.StatusReply:
        reply: p.StatusReply = await self.call(p.Status())
        return reply

    async def check(self, call: p.CallInfo) -> p.Verdict:
        reply: p.CheckResult = await self.call(p.Check(call=call))
        return reply.verdict

    async def answer(
        self,
        pending_id: str,
        decision: typing.Literal["allow", "deny"],
        scope: p.Scope = "once",
        message: str | None = None,
        rules: list[str] | None = None,
        abort: bool = False,
        duration: float | None = None,
    ) -> p.Ack:
        ack: p.Ack = await self.call(
            p.Answer(
                id=pending_id,
                decision=decision,
                scope=scope,
                message=message,
                rules=rules,
                abort=abort,
                duration=duration,
            )
        )
        return ack

    async def grants(self) -> list[p.GrantInfo]:
        reply: p.GrantsReply = await self.call(p.Grants())
        return reply.grants

    async def revoke(self, grant_id: str) -> p.Ack:
        ack: p.Ack = await self.call(p.RevokeGrant(id=grant_id))
        return ack

    async def subscribe(self) -> AsyncIterator[p.ServerMessage]:
        """Snapshot first, then Prompt / Resolved / PolicyNotice, ending with Bye (then DaemonUnreachable)."""
        ref, data = self._conv_call(lambda: self._conv.send_call(p.Subscribe()))
        self._subscribe_ref = ref
        await self._send(data)
        while True:
            try:
                event = await self._events_recv.receive()
            except Exception as e:
                raise DaemonUnreachable(self._closed_reason or "connection to nexusd lost") from e
            if isinstance(event, Refused):
                raise event.error
            msg = event.message
            yield msg
            if isinstance(msg, p.Bye):
                return

    # ---------------------------------------------------------------- wire

    def _conv_call(self, start: Callable[[], tuple[str, bytes]]) -> tuple[str, bytes]:
        if self._closed_reason is not None:
            raise DaemonUnreachable(self._closed_reason)
        return start()

    async def _roundtrip(self, ref: str, data: bytes, timeout: float) -> Any:
        """Send one call's line and wait for its final reply (skipping a Pending); give up at ``timeout``."""
        import anyio

        send, recv = anyio.create_memory_object_stream[Any](4)
        self._waiters[ref] = send
        try:
            try:
                with anyio.fail_after(timeout):
                    await self._send(data)
                    while True:
                        event = await self._next(recv)
                        if isinstance(event, Replied):
                            return event.message
                        if isinstance(event, Refused):
                            raise event.error
            except TimeoutError as e:
                with contextlib.suppress(NexusClientError, ValueError):
                    await self._send(self._conv.give_up(ref))
                raise ReplyTimeout("no reply from nexusd in time") from e
        finally:
            self._conv.give_up(ref)  # a no-op once answered
            self._waiters.pop(ref, None)
            send.close()
            recv.close()

    async def _next(self, recv: Any) -> Any:
        try:
            return await recv.receive()
        except Exception as e:
            import anyio

            if isinstance(e, anyio.get_cancelled_exc_class()):
                raise
            raise DaemonUnreachable(self._closed_reason or "connection to nexusd lost") from e

    async def _greet(self) -> None:
        """Hello, then read until the welcome (before the reader task runs)."""
        import anyio

        await self._send(self._conv.hello())
        try:
            with anyio.fail_after(self.timeout):
                while True:
                    event = self._conv.next_event()
                    if isinstance(event, Welcomed):
                        self.welcome = event.message
                        return
                    if event is NEED_DATA:
                        try:
                            self._conv.receive_data(await self._stream.receive(1 << 16))
                        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                            self._conv.receive_data(b"")
        except TimeoutError as e:
            raise ReplyTimeout("no welcome from nexusd in time") from e

    async def _send(self, data: bytes) -> None:
        import anyio

        if not data:
            return
        if self._closed_reason is not None:
            raise DaemonUnreachable(self._closed_reason)
        try:
            async with self._send_lock:
                with anyio.fail_after(self.timeout):
                    await self._stream.send(data)
                self._last_sent = anyio.current_time()
        except TimeoutError as e:
            raise ReplyTimeout("could not send to nexusd in time") from e
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as e:
            raise DaemonUnreachable(f"connection to nexusd lost: {why(e)}") from e

    async def _keepalive(self, every: float) -> None:
        """A ``ping`` whenever nothing was sent for ``every`` seconds: a quiet UI is not idle."""
        import anyio

        while self._closed_reason is None:
            wait = self._last_sent + every - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)
                continue
            try:
                await self._send(self._conv.keepalive())
            except NexusClientError:
                return

    async def _reader(self) -> None:
        import anyio

        reason = "nexusd closed the connection"
        try:
            while True:
                while True:  # what is buffered first (the greeting's read may have taken more than the welcome)
                    event = self._conv.next_event()  # raises at the end of the stream, or on a protocol error
                    if event is NEED_DATA:
                        break
                    if not self._dispatch(event):
                        reason = (
                            f"this client fell {MAX_QUEUED_EVENTS} pushed messages behind; reconnect for a "
                            "fresh snapshot"
                        )
                        return
                    if isinstance(event, Pushed) and isinstance(event.message, p.Bye):
                        reason = f"nexusd is stopping: {event.message.reason}"
                owed = self._conv.data_to_send()
                if owed:
                    with contextlib.suppress(NexusClientError):  # a cancel for a call given up: best effort
                        await self._send(owed)
                try:
                    chunk = await self._stream.receive(1 << 16)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    chunk = b""
                self._conv.receive_data(chunk)
        except DaemonUnreachable:
            pass  # the end of the stream: the reason stands (closed, or the bye's)
        except NexusClientError as e:  # a protocol error (fail closed: every waiter gets DaemonUnreachable)
            reason = f"nexusd broke the protocol: {e}"
        finally:
            self._closed_reason = reason
            for send in list(self._waiters.values()):
                send.close()
            self._events_send.close()

    def _dispatch(self, event: Any) -> bool:
        """Route one event; False when the subscriber fell too far behind (the connection must end)."""
        ref = getattr(event, "ref", None)
        if isinstance(event, Waiting):
            return True  # a request's pending: its decision follows
        if ref is not None and ref != self._subscribe_ref:
            waiter = self._waiters.get(ref)
            if waiter is not None:
                with contextlib.suppress(Exception):
                    waiter.send_nowait(event)
            return True
        # Never drop a push silently: a lost prompt is a request nobody sees, a lost resolved a stale one.
        # A subscriber that fell this far behind ends the connection; a new one starts from a snapshot.
        try:
            self._events_send.send_nowait(event)
        except Exception:  # WouldBlock (full); closed when nobody subscribes: nothing to lose
            return self._subscribe_ref is None
        return True


MAX_QUEUED_EVENTS = 100_000  # pushes an AsyncClient holds for a slow subscriber before it disconnects


def _max_wait(timeout: float) -> float | None:
    """What the daemon is told of our wait (a person may hold the ask up to it): the wire's bounds."""
    return round(min(timeout, 86_400.0), 3) if timeout > 0 else None
