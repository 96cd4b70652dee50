"""The daemon's egress proxy for ``filtered`` sandboxes: HTTP (CONNECT and absolute-form) and SOCKS5.

Reaching it. For each filtered command the daemon registers a context (the command, cwd, workspace,
agent session) with the call's two FIFOs (``attach``). Its bubblewrap reports its first process on one
and waits on the other; the joiner (``nexusd.sandbox.netjoin``) makes listening sockets on the sandbox's
own loopback from outside, and this proxy accepts the command's connections on them directly. So the
sandbox needs no Unix socket and no process of ours inside, and every connection carries its sandbox's
context, which the sandbox cannot forge: it arrives on that sandbox's own listening socket.

Every new host:port is a decision of the gate (``decide``, supplied by the server). The proxy matches
the name the client *asked for* (``nexusd.core.netpolicy``), resolves it itself and connects to what it
resolved. Refusals are answered at once: HTTP 403 naming nexusd and the reason, SOCKS reply 0x02.
Everything is bounded: head size and time (slowloris), connections per sandbox and in total, asks in
flight per sandbox; a malformed request closes that connection only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import structlog

from nexusd.core.netpolicy import Target, TargetError, make_target, split_authority
from nexusd.sandbox import netjoin
from nexusd.sandbox.network import HTTP_PORT, SOCKS_PORT

log = structlog.get_logger("nexusd.proxy")

MAX_HEAD = 64 * 1024  # request line and headers
HEAD_TIMEOUT = 15.0  # a client that dribbles its head (slowloris) is dropped after this
CONNECT_TIMEOUT = 10.0
PLAN_TTL = 120.0  # a filtered call's FIFOs are served this long for its bubblewrap to report, then removed
MAX_SANDBOXES = 4096  # filtered calls planned and not ended, at once
MAX_PER_CHANNEL = 256  # connections at once per sandboxed command
MAX_TOTAL = 4096
MAX_ASKS_PER_CHANNEL = 16  # distinct host:port asks waiting for a person at once, per command
MAX_DECISIONS_PER_CHANNEL = 4096  # remembered answers per command
CHUNK = 256 * 1024
DNS_TTL = 5.0  # seconds a name's addresses are reused (a burst of connections resolves once)
PIPE_SIZE = 1 << 20
SPLICE_AFTER = 256 * 1024  # bytes of a direction copied before it is spliced (a pipe costs more than it saves)


@dataclass
class Context:
    """One sandboxed command: who it is, and what was decided for it (``once`` answers last for the command)."""

    command: str
    cwd: str
    workspace: str
    session: str
    provider: str = "sandbox"
    guard: frozenset[int] = frozenset()  # the requesting agent's pids: their answers are refused
    http_upstream: int | None = None  # [sandbox.network] http_proxy_port: the user's own proxy instead of ours
    socks_upstream: int | None = None
    created: float = field(default_factory=time.monotonic)
    decided: dict[tuple[str, int], tuple[bool, str]] = field(default_factory=dict)
    inflight: dict[tuple[str, int], anyio.Event] = field(default_factory=dict)
    pointed: set[tuple[str, ...]] = field(default_factory=set)  # (name, *addresses) found fit to connect to
    active: int = 0
    asks: int = 0


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    reason: str
    record: str = ""  # audit id of the decision, for the close record


Decide = Callable[[Context, Target, str], Awaitable[Outcome]]
Closed = Callable[[Context, Target, str, Outcome, int, int], None]
Resolved = Callable[[Context, Target, str, list[str]], str | None]  # why not to connect there, or None


class Refused(Exception):
    pass


def _unlink(paths: tuple[str, ...]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


class NetworkProxy:
    def __init__(
        self,
        decide: Decide,
        closed: Closed,
        resolved: Resolved | None = None,
        joiner: netjoin.Joiner | None = None,
    ) -> None:
        self.decide_fn = decide
        self.closed_fn = closed
        self.resolved_fn = resolved
        self.joiner = joiner if joiner is not None else netjoin.Joiner()
        self.sandboxes = 0  # filtered calls registered and not ended
        self.total = 0
        self._dns: dict[str, tuple[float, list[str]]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.ready = anyio.Event()

    # ------------------------------------------------------------------ the sandboxes' ports

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Holds the proxy's tasks (every sandbox's ports, every connection) until cancelled. The joiner
        starts with the first filtered call (most daemons never have one)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.ready.set()
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self.joiner.close()

    def attach(self, ctx: Context, info: str, go: str) -> bool:
        """Serve one filtered call's FIFOs (``wrapper.port_fifos``): when its bubblewrap reports its first
        process, the joiner makes the ports inside and this proxy accepts on them until the sandbox ends.
        False when it cannot (not serving, too many, not our FIFOs): the caller removes them. On the loop:
        two opens of FIFOs in the daemon's own run directory, which never wait."""
        if self._tg is None or self.sandboxes >= MAX_SANDBOXES:
            return False
        fds: list[int] = []
        try:
            fds.append(os.open(info, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW))
            fds.append(os.open(go, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW))
            if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in fds):
                raise OSError("not FIFOs")
        except OSError as e:
            log.warning("filtered sandbox not served", error=repr(e))
            for fd in fds:
                os.close(fd)
            return False
        self.sandboxes += 1
        self._tg.start_soon(self._sandbox, ctx, fds[0], fds[1], (info, go))
        return True

    async def _sandbox(self, ctx: Context, info: int, go: int, paths: tuple[str, str]) -> None:
        """The joiner waits for the sandbox's report and starts its command (``netjoin.serve``); here, its
        answer, then the ports until the sandbox ends. Whatever fails releases bubblewrap with no network."""
        pidfd: int | None = None
        listeners: list[socket.socket] = []
        try:
            try:
                if not self.joiner.running():  # the first filtered call (or the joiner died): off the loop
                    await anyio.to_thread.run_sync(self.joiner.start)
                answer = self.joiner.watch(info, go, [HTTP_PORT, SOCKS_PORT])
                with answer:
                    with anyio.move_on_after(PLAN_TTL):
                        await anyio.wait_readable(answer)
                    pidfd, listeners = netjoin.read_answer(answer)  # (not ready: "no report")
            except OSError as e:
                log.info("filtered sandbox without ports", why=str(e))
            finally:
                _unlink(paths)  # (first: once the command runs, nothing of its call is left to find)
                with contextlib.suppress(OSError):
                    os.write(go, b"x")  # (the joiner's fork wrote it once the ports listened; else no network)
            if not listeners or pidfd is None:
                return
            async with anyio.create_task_group() as tg:
                for ls in listeners:
                    tg.start_soon(self._accept, ls, ctx, ls.getsockname()[1] == HTTP_PORT)
                await anyio.wait_readable(pidfd)  # the sandbox's first process ended: so did the sandbox
                tg.cancel_scope.cancel()
        finally:
            self.sandboxes -= 1
            _unlink(paths)  # unlinked before closed: a late opener finds no FIFO rather than one nobody holds
            for fd in (info, go, pidfd):
                if fd is not None:
                    os.close(fd)
            for ls in listeners:
                ls.close()

    async def _accept(self, listener: socket.socket, ctx: Context, http: bool) -> None:
        while True:
            await anyio.wait_readable(listener)
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as e:  # out of descriptors: this connection waits in the backlog a little
                log.warning("proxy accept failed", error=repr(e))
                await anyio.sleep(0.1)
                continue
            if ctx.active >= MAX_PER_CHANNEL or self.total >= MAX_TOTAL or self._tg is None:
                sock.close()
                continue
            ctx.active += 1
            self.total += 1
            self._tg.start_soon(self._serve_one, sock, ctx, http)

    async def _serve_one(self, sock: socket.socket, ctx: Context, http: bool) -> None:
        try:
            stream = Conn(sock)
            own = ctx.http_upstream if http else ctx.socks_upstream
            if own is not None:
                await self._to_own_proxy(stream, ctx, own, "http-proxy" if http else "socks-proxy")
            elif http:
                await self._http(stream, ctx)
            else:
                await self._socks(stream, ctx)
        except Exception as e:  # one connection's trouble is never the daemon's
            log.debug("proxy connection ended", error=repr(e))
        finally:
            sock.close()  # closes the peer's end's counterpart: the client sees EOF, never a hang
            ctx.active -= 1
            self.total -= 1

    async def _to_own_proxy(self, stream: Conn, ctx: Context, port: int, scheme: str) -> None:
        """``http_proxy_port`` / ``socks_proxy_port``: the user's own proxy on the host's loopback decides;
        we only carry the bytes there (and audit their count)."""
        target = make_target("127.0.0.1", port)
        try:
            upstream = await self._connect(target)
        except (OSError, TimeoutError):
            return  # the client sees the connection close: the user's proxy is not listening
        with upstream.sock:
            up, down = await _relay(stream, upstream, b"")
        self.closed_fn(ctx, target, scheme, Outcome(True, f"to the user's own proxy on port {port}"), up, down)

    # ------------------------------------------------------------------ deciding

    async def _decide(self, ctx: Context, target: Target, scheme: str) -> Outcome:
        key = (target.host, target.port)
        while key in ctx.inflight:  # the same host:port asked by a parallel connection: one ask
            await ctx.inflight[key].wait()
        hit = ctx.decided.get(key)
        if hit is not None:
            return Outcome(hit[0], hit[1])
        if ctx.asks >= MAX_ASKS_PER_CHANNEL:
            return Outcome(False, f"too many network decisions pending for this command (limit {MAX_ASKS_PER_CHANNEL})")
        done = ctx.inflight[key] = anyio.Event()
        ctx.asks += 1
        try:
            outcome = await self.decide_fn(ctx, target, scheme)
        except Exception as e:
            log.exception("network decision failed; denying")
            outcome = Outcome(False, f"the decision failed ({type(e).__name__}); denied")
        finally:
            ctx.asks -= 1
            del ctx.inflight[key]
            done.set()
        if len(ctx.decided) < MAX_DECISIONS_PER_CHANNEL:
            ctx.decided[key] = (outcome.allowed, outcome.reason)
        return outcome

    async def _connect(self, target: Target, ctx: Context | None = None, scheme: str = "") -> Conn:
        """The proxy resolves the name itself (never the client's address) — only after the decision, so a
        refused name is never even looked up — checks where it points (``Refused``), and connects to what it
        found, address by address in the resolver's order. Answers are kept ``DNS_TTL`` seconds (bounded)."""
        with anyio.fail_after(CONNECT_TIMEOUT):
            addresses = [target.host] if target.is_ip else await self._resolve(target.host)
            if ctx is not None and self.resolved_fn is not None and (target.host, *addresses) not in ctx.pointed:
                why = self.resolved_fn(ctx, target, scheme, addresses)
                if why is not None:
                    raise Refused(why)
                if len(ctx.pointed) < MAX_DECISIONS_PER_CHANNEL:
                    ctx.pointed.add((target.host, *addresses))  # checked once per command and answer
            error: OSError = OSError(f"{target.host} has no address")
            for address in addresses:
                try:
                    return await _open(address, target.port)
                except OSError as e:
                    error = e
            raise error

    async def _resolve(self, host: str) -> list[str]:
        now = time.monotonic()
        hit = self._dns.get(host)
        if hit is not None and now - hit[0] < DNS_TTL:
            return hit[1]
        infos = await anyio.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if len(self._dns) >= 1024:
            self._dns.clear()
        self._dns[host] = (now, addresses)
        return addresses

    # ------------------------------------------------------------------ HTTP

    async def _http(self, stream: Conn, ctx: Context) -> None:
        reader = stream
        try:
            with anyio.fail_after(HEAD_TIMEOUT):
                head = await reader.receive_until(b"\r\n\r\n", MAX_HEAD)
        except anyio.DelimiterNotFound:
            await _http_error(stream, 431, "Request Header Fields Too Large", "the request head is too large")
            return
        except TimeoutError:
            await _http_error(stream, 408, "Request Timeout", "the request head did not arrive in time")
            return
        except (anyio.IncompleteRead, anyio.EndOfStream):
            return
        try:
            line, *headers = head.decode("latin-1").split("\r\n")
            method, uri, version = line.split(" ")
            if not version.startswith("HTTP/1.") or not method.isascii() or not method.isalpha():
                raise ValueError("not an HTTP/1 request line")
            if method.upper() == "CONNECT":
                target, scheme, path = split_authority(uri), "connect", ""
            else:
                target, path = _absolute(uri)
                scheme = "http"
        except (ValueError, TargetError) as e:
            await _http_error(stream, 400, "Bad Request", f"not a proxy request nexusd can honour: {e}")
            return
        outcome = await self._decide(ctx, target, scheme)
        if not outcome.allowed:
            await _http_error(stream, 403, "Forbidden", f"network access to {target.display} denied: {outcome.reason}")
            return
        try:
            upstream = await self._connect(target, ctx, scheme)
        except Refused as e:
            await _http_error(stream, 403, "Forbidden", f"network access to {target.display} denied: {e}")
            return
        except (OSError, TimeoutError) as e:
            await _http_error(stream, 502, "Bad Gateway", f"cannot connect to {target.display}: {e}")
            return
        with upstream.sock:
            first = reader.take_buffer()
            if scheme == "connect":
                await stream.send(b"HTTP/1.1 200 Connection established\r\nProxy-Agent: nexusd\r\n\r\n")
            else:
                first = _origin_request(method, path, version, headers) + first
            up, down = await _relay(stream, upstream, first)
        self.closed_fn(ctx, target, scheme, outcome, up, down)

    # ------------------------------------------------------------------ SOCKS5

    async def _socks(self, stream: Conn, ctx: Context) -> None:
        reader = stream
        try:
            with anyio.fail_after(HEAD_TIMEOUT):
                ver, n = await reader.receive_exactly(2)
                methods = await reader.receive_exactly(n)
                if ver != 5:
                    return
                if 0 not in methods:
                    await stream.send(b"\x05\xff")
                    return
                await stream.send(b"\x05\x00")
                ver, cmd, _rsv, atyp = await reader.receive_exactly(4)
                if atyp == 1:
                    host = socket.inet_ntop(socket.AF_INET, await reader.receive_exactly(4))
                elif atyp == 4:
                    host = socket.inet_ntop(socket.AF_INET6, await reader.receive_exactly(16))
                elif atyp == 3:
                    (length,) = await reader.receive_exactly(1)
                    host = (await reader.receive_exactly(length)).decode("utf-8")
                else:
                    await stream.send(_socks_reply(8))
                    return
                (port,) = struct.unpack("!H", await reader.receive_exactly(2))
        except (TimeoutError, anyio.IncompleteRead, anyio.EndOfStream, UnicodeDecodeError, ValueError):
            return
        if ver != 5 or cmd != 1:
            await stream.send(_socks_reply(7))  # only CONNECT: no BIND, no UDP
            return
        try:
            target = make_target(host, port)
        except TargetError:
            await stream.send(_socks_reply(4))
            return
        outcome = await self._decide(ctx, target, "socks")
        if not outcome.allowed:
            await stream.send(_socks_reply(2))  # connection not allowed by ruleset
            return
        try:
            upstream = await self._connect(target, ctx, "socks")
        except Refused:
            await stream.send(_socks_reply(2))
            return
        except TimeoutError:
            await stream.send(_socks_reply(4))
            return
        except OSError:
            await stream.send(_socks_reply(5))
            return
        with upstream.sock:
            await stream.send(_socks_reply(0))
            up, down = await _relay(stream, upstream, reader.take_buffer())
        self.closed_fn(ctx, target, "socks", outcome, up, down)


def _socks_reply(code: int) -> bytes:
    return bytes((5, code, 0, 1, 0, 0, 0, 0, 0, 0))


def _absolute(uri: str) -> tuple[Target, str]:
    """An absolute-form ``http://host[:port]/path`` request target: the target and the origin-form path."""
    if not uri.lower().startswith("http://"):
        raise ValueError("a plain request must be absolute-form http:// (use CONNECT for TLS)")
    rest = uri[7:]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "\\" in authority or not authority:
        raise ValueError("malformed authority")
    if not path.startswith("/"):
        path = "/" + path
    return split_authority(authority, 80), path.split("#", 1)[0]


_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


def _origin_request(method: str, path: str, version: str, headers: list[str]) -> bytes:
    kept = [h for h in headers if h and h.split(":", 1)[0].strip().lower() not in _HOP]
    # one request per connection: a keep-alive client's next request (maybe to another host) gets a new decision
    lines = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _http_error(stream: Conn, code: int, title: str, why: str) -> None:
    body = f"nexusd: {why}\n".encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {code} {title}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\nProxy-Agent: nexusd\r\n\r\n"
    ).encode("latin-1")
    with contextlib.suppress(Exception):
        await stream.send(head + body)


async def _relay(client: Conn, upstream: Conn, first: bytes) -> tuple[int, int]:
    """Copy both ways until both sides are done; (bytes up, bytes down). Zero-copy (``splice`` through a
    pipe) where the kernel can, else through our buffers; bytes are counted either way."""
    counts = [0, 0]
    if first:
        await upstream.send(first)
        counts[0] += len(first)

    async def copy(src: Conn, dst: Conn, i: int, limit: float) -> None:
        while counts[i] < limit:
            data = await src.receive(CHUNK)
            await dst.send(data)
            counts[i] += len(data)

    async def pump(src: Conn, dst: Conn, i: int) -> None:
        try:
            await copy(src, dst, i, SPLICE_AFTER)  # a request and a small answer: no pipe opened for them
            try:
                await _splice(src.sock, dst.sock, counts, i)
            except _NoSplice:
                await copy(src, dst, i, float("inf"))
        except (OSError, anyio.EndOfStream):
            pass
        finally:
            dst.send_eof()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump, client, upstream, 0)
        tg.start_soon(pump, upstream, client, 1)
    return counts[0], counts[1]


class Conn:
    """A non-blocking socket driven by the event loop's readiness alone (no transport reads ahead of us),
    so that after the head the two sockets can be spliced; a small buffer for parsing the head."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.buf = bytearray()

    def take_buffer(self) -> bytes:
        data, self.buf = bytes(self.buf), bytearray()
        return data

    async def _recv(self, n: int) -> bytes:
        while True:
            try:
                return self.sock.recv(n)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)

    async def receive(self, n: int = 65536) -> bytes:
        if self.buf:
            return self.take_buffer()
        data = await self._recv(n)
        if not data:
            raise anyio.EndOfStream
        return data

    async def receive_exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = await self._recv(65536)
            if not data:
                raise anyio.IncompleteRead
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def receive_until(self, delimiter: bytes, max_bytes: int) -> bytes:
        start = 0
        while True:
            i = self.buf.find(delimiter, start)
            if 0 <= i <= max_bytes:
                out = bytes(self.buf[:i])
                del self.buf[: i + len(delimiter)]
                return out
            if len(self.buf) >= max_bytes:
                raise anyio.DelimiterNotFound(max_bytes)
            start = max(0, len(self.buf) - len(delimiter) + 1)
            data = await self._recv(65536)
            if not data:
                raise anyio.IncompleteRead
            self.buf += data

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    def send_eof(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)


async def _open(address: str, port: int) -> Conn:
    """A TCP connection to an address (never a name: the proxy has resolved it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = sock.connect_ex((address, port))
        if err in (errno.EINPROGRESS, errno.EAGAIN):
            await anyio.wait_writable(sock)
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, f"{os.strerror(err)} ({address} port {port})")
    except BaseException:
        sock.close()
        raise
    return Conn(sock)


class _NoSplice(Exception):
    pass


_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)


async def _splice(src: socket.socket, dst: socket.socket, counts: list[int], i: int) -> None:
    """src -> pipe -> dst with ``splice`` on non-blocking sockets, waiting on the event loop; bytes written
    to ``dst`` are added to ``counts[i]`` as they go. Raises _NoSplice before moving anything when the kernel cannot."""
    if not hasattr(os, "splice"):
        raise _NoSplice
    try:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # out of descriptors: this connection's bytes are copied, never cut short
        raise _NoSplice from None
    total = 0
    try:
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(w, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: fewer round trips per megabyte
        while True:
            try:  # try first, wait only when the kernel says so: one loop round trip per burst, not per call
                n = os.splice(src.fileno(), w, PIPE_SIZE, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                await anyio.wait_readable(src)
                continue
            except OSError as e:
                if total == 0 and e.errno in (22, 95):  # EINVAL, EOPNOTSUPP: not for these descriptors
                    raise _NoSplice from None
                raise
            if n == 0:
                return
            total += n
            while n:
                try:
                    moved = os.splice(r, dst.fileno(), n, flags=_SPLICE_FLAGS)
                except BlockingIOError:
                    await anyio.wait_writable(dst)
                    continue
                n -= moved
                counts[i] += moved  # what reached the other side, as the copy below counts it
            await anyio.lowlevel.checkpoint()  # a fast sender never starves the other connections
    finally:
        os.close(r)
        os.close(w)
