"""The daemon's egress proxy for ``filtered`` sandboxes: HTTP (CONNECT and absolute-form) and SOCKS5.

Reaching it. The broker is a Unix socket in a private directory of its own (0700, not the control
socket's, never bound into a sandbox). For each sandboxed command the daemon registers a context (the
command, cwd, workspace, agent session) under a one-time token it puts in the plan. The runner, outside the
sandbox, connects to the broker, presents the token and passes the connection into the sandbox as a
descriptor: the *channel*. The bridge inside writes one byte per new connection (``H`` HTTP, ``S`` SOCKS)
and receives, by descriptor passing, one end of a fresh socket pair whose other end this module serves.
So the sandbox needs no Unix socket path and no ``socket(AF_UNIX)`` (which its seccomp filter refuses),
and every connection carries its sandbox's context, which the sandbox cannot forge.

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
import secrets
import socket
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream

from nexusd.core.netpolicy import Target, TargetError, make_target, split_authority

log = structlog.get_logger("nexusd.proxy")

MAX_HEAD = 64 * 1024  # request line and headers
HEAD_TIMEOUT = 15.0  # a client that dribbles its head (slowloris) is dropped after this
CONNECT_TIMEOUT = 10.0
TOKEN_TTL = 120.0  # a plan's token unused this long is forgotten
MAX_TOKENS = 4096
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


def _broker_dir(base_dir: str | None) -> Path:
    """``<state-dir>/proxy`` (0700): private to the user, hidden from every sandbox with the rest of the state
    directory, and outside a service's private /tmp; a fresh temporary directory when that path would be
    too long for a Unix socket (or no state directory is given)."""
    if base_dir is not None:
        d = Path(base_dir) / "proxy"
        if len(str(d / "broker.sock").encode()) <= 100:
            try:
                d.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(d, 0o700)
                with contextlib.suppress(FileNotFoundError):
                    (d / "broker.sock").unlink()  # a previous daemon's (the control socket's lock says it is gone)
                return d
            except OSError:
                pass
    return Path(tempfile.mkdtemp(prefix="nexusd-proxy-"))


class NetworkProxy:
    def __init__(
        self, decide: Decide, closed: Closed, base_dir: str | None = None, resolved: Resolved | None = None
    ) -> None:
        self.decide_fn = decide
        self.closed_fn = closed
        self.resolved_fn = resolved
        self.dir = _broker_dir(base_dir)
        self.broker = self.dir / "broker.sock"
        self.tokens: dict[str, Context] = {}
        self.total = 0
        self._dns: dict[str, tuple[float, list[str]]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.ready = anyio.Event()

    # ------------------------------------------------------------------ registry

    def register(self, ctx: Context) -> str:
        now = time.monotonic()
        for tok, c in list(self.tokens.items()):
            if now - c.created > TOKEN_TTL:
                del self.tokens[tok]
        while len(self.tokens) >= MAX_TOKENS:
            self.tokens.pop(next(iter(self.tokens)))
        token = secrets.token_hex(16)
        self.tokens[token] = ctx
        return token

    # ------------------------------------------------------------------ broker

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_unix_listener(self.broker)
        os.chmod(self.broker, 0o600)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.ready.set()
                task_status.started()
                while True:  # never dies: out of descriptors (EMFILE) now is a refused connection, not a crash
                    try:
                        stream = await listener.accept()
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
                    except Exception as e:
                        log.warning("proxy broker accept failed; retrying", error=repr(e))
                        await anyio.sleep(0.1)
                        continue
                    tg.start_soon(self._broker_guarded, stream)
        finally:
            with contextlib.suppress(OSError):
                self.broker.unlink()
            with contextlib.suppress(OSError):
                self.dir.rmdir()

    async def _broker_guarded(self, stream: anyio.abc.SocketStream) -> None:
        try:
            await self._broker_conn(stream)
        except Exception as e:  # one channel's trouble ends that channel, never the daemon
            log.warning("proxy channel ended", error=repr(e))
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def _broker_conn(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            try:
                cred = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                _pid, uid, _gid = struct.unpack("3i", cred)
            except OSError:
                return
            if uid != os.geteuid():
                return  # the directory is 0700 already; a stranger gets nothing either way
            reader = BufferedByteReceiveStream(stream)
            try:
                with anyio.fail_after(5):
                    token = (await reader.receive_until(b"\n", 64)).decode("ascii", "replace").strip()
            except Exception:
                return
            ctx = self.tokens.pop(token, None)
            if ctx is None:
                with contextlib.suppress(Exception):
                    await stream.send(b"unknown token\n")
                return
            await stream.send(b"ok\n")
            assert isinstance(stream, anyio.abc.UNIXSocketStream)
            await self._channel(stream, reader, ctx)

    async def _channel(
        self, stream: anyio.abc.UNIXSocketStream, reader: BufferedByteReceiveStream, ctx: Context
    ) -> None:
        """One byte per connection the bridge wants; answered with ``+`` and a descriptor, or ``-``."""
        while True:
            try:
                kinds = await reader.receive(64)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            for kind in kinds:
                if kind not in b"HS" or ctx.active >= MAX_PER_CHANNEL or self.total >= MAX_TOTAL:
                    await stream.send(b"-")
                    continue
                try:
                    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                except OSError:  # out of descriptors: this connection is refused, the channel lives
                    await stream.send(b"-")
                    continue
                for end in (ours, theirs):  # bigger bursts per wakeup on a download
                    with contextlib.suppress(OSError):
                        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 21)
                try:
                    await stream.send_fds(b"+", [theirs.fileno()])
                except Exception:
                    ours.close()
                    return
                finally:
                    theirs.close()
                ctx.active += 1
                self.total += 1
                assert self._tg is not None
                self._tg.start_soon(self._serve_one, ours, ctx, kind == ord("H"))

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
