"""Client library for the nexusd socket: a blocking ``Client`` and an anyio ``AsyncClient``.

Hooks import this once per tool call, so the module itself imports only the standard library, msgspec
and the protocol; anyio is imported inside ``AsyncClient``. Every failure is an exception callers turn
into deny: ``DaemonUnreachable`` (cannot connect, connection lost, no reply in time), ``BadReply``
(undecodable or unexpected reply), ``ClientError`` (the daemon answered with a protocol ``Error``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec

from nexusd import protocol as p
from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError, ReplyTimeout
from nexusd.linesocket import MAX_REPLY_BYTES, LineSocket, why

__all__ = [
    "AsyncClient",
    "BadReply",
    "Client",
    "ClientError",
    "DaemonUnreachable",
    "NexusClientError",
    "ReplyTimeout",
    "default_socket",
    "resolve_socket",
]

# Which reply type each query expects; anything else (besides Error) is a BadReply.
REPLY_TYPES: dict[type, tuple[type, ...]] = {
    p.Status: (p.StatusReply,),
    p.Check: (p.CheckResult,),
    p.Rules: (p.RulesReply,),
    p.Probe: (p.ProbeReply,),
    p.SandboxPlan: (p.SandboxPlanReply,),
    p.Audit: (p.AuditReply,),
    p.Subscribe: (p.Snapshot,),
    p.Answer: (p.Ack,),
    p.Cancel: (p.Ack,),
    p.SetMode: (p.Ack,),
    p.Reload: (p.Ack,),
    p.RuleChange: (p.Ack,),
    p.TrustChange: (p.Ack,),
    p.Grants: (p.GrantsReply,),
    p.RevokeGrant: (p.Ack,),
    p.SessionEnd: (p.Ack,),
}


_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
          "d": 86400, "day": 86400}


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


def _check_reply(msg: Any, query: msgspec.Struct) -> Any:
    if isinstance(msg, p.Error):
        raise ClientError(msg.code, msg.message)
    expected = REPLY_TYPES.get(type(query))
    if expected is not None and not isinstance(msg, expected):
        raise BadReply(f"expected {expected[0].__name__} for {type(query).__name__}, got {type(msg).__name__}")
    return msg


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
        self._line: LineSocket | None = None
        self._refs = itertools.count(1)
        self.events: deque[p.ServerMessage] = deque()  # pushes (Prompt, Resolved, ...) read while waiting
        self._ping_every = 0.0  # a third of the daemon's idle limit (from Welcome); 0: never
        self._last_sent = 0.0

    # ---------------------------------------------------------------- connection

    def connect(self) -> Client:
        self._line = LineSocket.connect(self.socket_path, self.timeout)
        try:
            ref = self._ref()
            self._send(p.Hello(proto=p.PROTOCOL_VERSION, role=self.role, name=self.name, ref=ref))
            msg = self._read_until(
                lambda m: getattr(m, "ref", None) == ref or isinstance(m, p.Error), time.monotonic() + self.timeout
            )
            if isinstance(msg, p.Error):
                raise ClientError(msg.code, msg.message)
            if not isinstance(msg, p.Welcome):
                raise BadReply(f"expected welcome, got {type(msg).__name__}")
            self.welcome = msg
            if msg.idle_timeout:
                self._ping_every = msg.idle_timeout / 3
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._line is not None:
            self._line.close()
            self._line = None

    def __enter__(self) -> Client:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- API

    def call(self, msg: msgspec.Struct, timeout: float | None = None) -> Any:
        """Send any query and return its reply (matched by ``ref``); a protocol Error raises ClientError."""
        ref = getattr(msg, "ref", None) or self._ref()
        msg = msgspec.structs.replace(msg, ref=ref)
        self._send(msg)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        reply = self._read_until(lambda m: getattr(m, "ref", None) == ref, deadline)
        return _check_reply(reply, msg)

    def request(self, call: p.CallInfo, on_no_ui: p.NoUi = "deny", timeout: float = 55.0) -> p.Decision:
        """Submit a tool call and wait (through Pending) for its Decision; give up at ``timeout``."""
        ref = self._ref()
        self._send(p.Request(call=call, on_no_ui=on_no_ui, ref=ref))
        deadline = time.monotonic() + timeout
        pending_id: str | None = None
        while True:
            try:
                msg = self._read_until(lambda m: getattr(m, "ref", None) == ref, deadline)
            except ReplyTimeout:
                if pending_id is not None:
                    with contextlib.suppress(NexusClientError):
                        self._send(p.Cancel(id=pending_id))
                raise
            if isinstance(msg, p.Pending):
                pending_id = msg.id
                continue
            if isinstance(msg, p.Decision):
                return msg
            if isinstance(msg, p.Error):
                raise ClientError(msg.code, msg.message)
            raise BadReply(f"expected decision, got {type(msg).__name__}")

    def status(self) -> p.StatusReply:
        return self.call(p.Status())

    def check(self, call: p.CallInfo) -> p.Verdict:
        return self.call(p.Check(call=call)).verdict

    def answer(
        self,
        pending_id: str,
        decision: str,
        scope: p.Scope = "once",
        message: str | None = None,
        rules: list[str] | None = None,
        abort: bool = False,
        duration: float | None = None,
        updated_input: dict[str, Any] | None = None,
    ) -> p.Ack:
        return self.call(p.Answer(id=pending_id, decision=decision, scope=scope, message=message, rules=rules,  # type: ignore[arg-type]
                                  abort=abort, duration=duration, updated_input=updated_input),
                         timeout=max(self.timeout, 30.0))

    def grants(self) -> list[p.GrantInfo]:
        return self.call(p.Grants()).grants  # type: ignore[no-any-return]

    def revoke(self, grant_id: str) -> p.Ack:
        return self.call(p.RevokeGrant(id=grant_id))

    def subscribe(self) -> p.Snapshot:
        """Start the stream; read further events with ``next_event``."""
        return self.call(p.Subscribe())

    def next_event(self, timeout: float | None = None) -> p.ServerMessage:
        """The next pushed message (Prompt, Resolved, PolicyNotice, Bye); ReplyTimeout when none arrives."""
        if self.events:
            return self.events.popleft()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        return self._read_until(lambda m: True, deadline, stash=False)

    # ---------------------------------------------------------------- wire

    def _ref(self) -> str:
        return f"c{next(self._refs)}"

    def _send(self, msg: msgspec.Struct) -> None:
        if self._line is None:
            raise DaemonUnreachable("not connected")
        self._line.send(p.encode(msg))
        self._last_sent = time.monotonic()

    def _read_until(self, want: Any, deadline: float, stash: bool = True) -> Any:
        while True:
            line = self._read_line(deadline)
            try:
                msg = p.decode_server(line)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError) as e:
                raise BadReply(f"undecodable reply from nexusd: {e}") from e
            if isinstance(msg, p.Pong) and msg.ref is None:
                continue  # the answer to a keep-alive
            if want(msg):
                return msg
            if isinstance(msg, p.Bye):
                self.close()
                raise DaemonUnreachable(f"nexusd is stopping: {msg.reason}")
            if isinstance(msg, p.Error) and msg.ref is None:
                # An unsolicited error is the daemon closing on us (framing, forbidden, protocol version).
                raise ClientError(msg.code, msg.message)
            if stash:
                self.events.append(msg)

    def _read_line(self, deadline: float) -> bytes:
        while True:
            if self._line is None:
                raise DaemonUnreachable("not connected")
            if not self._ping_every:
                return self._line.read_line(deadline)
            ping_at = self._last_sent + self._ping_every
            try:
                return self._line.read_line(min(deadline, ping_at))
            except ReplyTimeout:
                if time.monotonic() >= deadline:
                    raise
            self._send(p.Ping())  # a long wait (a UI in next_event): keep the connection



class AsyncClient:
    """anyio client for UIs and bridges: concurrent calls on one connection, plus a subscription stream.

    ``async with AsyncClient(role="ui") as c: async for event in c.subscribe(): ...``
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
        self._refs = itertools.count(1)
        self._waiters: dict[str, Any] = {}  # ref -> MemoryObjectSendStream
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
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reader)
        try:
            self.welcome = await self.call(p.Hello(proto=p.PROTOCOL_VERSION, role=self.role, name=self.name))
            if not isinstance(self.welcome, p.Welcome):
                raise BadReply(f"expected welcome, got {type(self.welcome).__name__}")
            if self.welcome.idle_timeout:
                self._tg.start_soon(self._keepalive, self.welcome.idle_timeout / 3)
        except BaseException:
            await self.aclose()
            raise
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
        """Send a message and return its reply (matched by ``ref``); Error raises ClientError."""
        import anyio

        ref = getattr(msg, "ref", None) or f"a{next(self._refs)}"
        msg = msgspec.structs.replace(msg, ref=ref)
        send, recv = anyio.create_memory_object_stream[Any](4)
        self._waiters[ref] = send
        try:
            await self._send(msg)
            try:
                with anyio.fail_after(self.timeout if timeout is None else timeout):
                    reply = await self._next(recv)
            except TimeoutError as e:
                raise ReplyTimeout(f"no reply to {type(msg).__name__} in time") from e
        finally:
            self._waiters.pop(ref, None)
            send.close()
            recv.close()
        return _check_reply(reply, msg)

    async def request(self, call: p.CallInfo, on_no_ui: p.NoUi = "deny", timeout: float = 55.0) -> p.Decision:
        """Submit a tool call and wait (through Pending) for the Decision."""
        import anyio

        ref = f"a{next(self._refs)}"
        send, recv = anyio.create_memory_object_stream[Any](4)
        self._waiters[ref] = send
        pending_id: str | None = None
        try:
            await self._send(p.Request(call=call, on_no_ui=on_no_ui, ref=ref))
            try:
                with anyio.fail_after(timeout):
                    while True:
                        msg = await self._next(recv)
                        if isinstance(msg, p.Pending):
                            pending_id = msg.id
                            continue
                        if isinstance(msg, p.Decision):
                            return msg
                        if isinstance(msg, p.Error):
                            raise ClientError(msg.code, msg.message)
                        raise BadReply(f"expected decision, got {type(msg).__name__}")
            except TimeoutError as e:
                if pending_id is not None:
                    with contextlib.suppress(NexusClientError):
                        await self._send(p.Cancel(id=pending_id))
                raise ReplyTimeout("no decision in time") from e
        finally:
            self._waiters.pop(ref, None)
            send.close()
            recv.close()

    async def status(self) -> p.StatusReply:
        return await self.call(p.Status())

    async def check(self, call: p.CallInfo) -> p.Verdict:
        return (await self.call(p.Check(call=call))).verdict

    async def answer(
        self,
        pending_id: str,
        decision: str,
        scope: p.Scope = "once",
        message: str | None = None,
        rules: list[str] | None = None,
        abort: bool = False,
        duration: float | None = None,
    ) -> p.Ack:
        return await self.call(p.Answer(id=pending_id, decision=decision, scope=scope, message=message,  # type: ignore[arg-type]
                                        rules=rules, abort=abort, duration=duration))

    async def grants(self) -> list[p.GrantInfo]:
        return (await self.call(p.Grants())).grants  # type: ignore[no-any-return]

    async def revoke(self, grant_id: str) -> p.Ack:
        return await self.call(p.RevokeGrant(id=grant_id))

    async def subscribe(self) -> AsyncIterator[p.ServerMessage]:
        """Snapshot first, then Prompt / Resolved / PolicyNotice, ending with Bye (then DaemonUnreachable)."""
        ref = f"a{next(self._refs)}"
        self._subscribe_ref = ref
        await self._send(p.Subscribe(ref=ref))
        while True:
            try:
                msg = await self._events_recv.receive()
            except Exception as e:
                raise DaemonUnreachable(self._closed_reason or "connection to nexusd lost") from e
            if isinstance(msg, p.Error) and msg.ref == ref:
                raise ClientError(msg.code, msg.message)
            yield msg
            if isinstance(msg, p.Bye):
                return

    # ---------------------------------------------------------------- wire

    async def _next(self, recv: Any) -> Any:
        try:
            return await recv.receive()
        except Exception as e:
            import anyio

            if isinstance(e, anyio.get_cancelled_exc_class()):
                raise
            raise DaemonUnreachable(self._closed_reason or "connection to nexusd lost") from e

    async def _send(self, msg: msgspec.Struct) -> None:
        import anyio

        if self._closed_reason is not None:
            raise DaemonUnreachable(self._closed_reason)
        try:
            async with self._send_lock:
                with anyio.fail_after(self.timeout):
                    await self._stream.send(p.encode(msg))
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
                await self._send(p.Ping())
            except NexusClientError:
                return

    async def _reader(self) -> None:
        import anyio

        buf = b""
        reason = "nexusd closed the connection"
        try:
            while True:
                try:
                    chunk = await self._stream.receive(1 << 16)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    break
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line, buf = buf[:nl], buf[nl + 1 :]
                    try:
                        msg = p.decode_server(line)
                    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError):
                        reason = "undecodable message from nexusd"
                        return
                    if not self._dispatch(msg):
                        reason = (f"this client fell {MAX_QUEUED_EVENTS} pushed messages behind; reconnect for a "
                                  "fresh snapshot")
                        return
                    if isinstance(msg, p.Bye):
                        reason = f"nexusd is stopping: {msg.reason}"
                if len(buf) > MAX_REPLY_BYTES:
                    reason = "reply line too long"
                    return
        finally:
            self._closed_reason = reason
            for send in list(self._waiters.values()):
                send.close()
            self._events_send.close()

    def _dispatch(self, msg: Any) -> bool:
        """Route one message; False when the subscriber fell too far behind (the connection must end)."""
        ref = getattr(msg, "ref", None)
        if ref is not None and ref != self._subscribe_ref:
            waiter = self._waiters.get(ref)
            if waiter is not None:
                with contextlib.suppress(Exception):
                    waiter.send_nowait(msg)
            return True
        # Never drop a push silently: a lost prompt is a request nobody sees, a lost resolved a stale one.
        # A subscriber that fell this far behind ends the connection; a new one starts from a snapshot.
        try:
            self._events_send.send_nowait(msg)
        except Exception:  # WouldBlock (full); closed when nobody subscribes: nothing to lose
            return self._subscribe_ref is None
        return True


MAX_QUEUED_EVENTS = 100_000  # pushes an AsyncClient holds for a slow subscriber before it disconnects


def default_socket() -> Path:
    """The socket every client uses unless told otherwise."""
    return Path(resolve_socket(None))
