"""Inside the sandbox: the relay between loopback proxy ports and the daemon's proxy.

``nexusd/sandbox/bridge_front.py`` (run as ``python -I -S -c FRONT RELAY_SOURCE FD HTTP SOCKS -- CMD...``)
binds the ports, forks, and execs the command; the forked child compiles this file's source, passed to it
as ``RELAY_SOURCE``, and calls ``serve_fds``. So the command never waits for these imports.

The sandbox has its own network namespace (no route anywhere) and a seccomp filter that refuses every
new ``AF_UNIX`` socket, so nothing inside can reach the daemon by a path. The runner, outside, opened
one channel to the daemon's proxy broker and passes it in as descriptor ``FD``. For every connection a
program makes to ``127.0.0.1:HTTP_PORT`` / ``SOCKS_PORT`` the bridge writes one byte on the channel
(``H`` or ``S``) and receives a fresh connected socket by descriptor passing (``recvmsg``/SCM_RIGHTS:
receiving a descriptor creates no socket, so the filter allows it); it then copies bytes both ways, every
connection in one non-blocking loop (no thread per connection: measured ~0.3 ms less per request).
The bridge is convenience, not a boundary: every decision is the daemon's, and what the bridge could do
with the channel the command could too.

The relay holds none of the command's stdio and ends when the command does (the sandbox's pid namespace
ends with it; the relay also checks its parent every second). Standard library only, no nexusd imports.
"""

from __future__ import annotations

import array
import collections
import contextlib
import errno
import os
import selectors
import socket
import time

_BUF = 1024 * 1024
# one scratch buffer for every read (one thread): no 1 MiB allocation per chunk, and a chunk the other side
# takes whole (the common case on a download) is never copied; only a partial write keeps its rest
_SCRATCH = memoryview(bytearray(_BUF))
SPARE_TTL = 10.0  # below the daemon's 15 s for a request head

# Bulk bytes go socket -> pipe -> socket with splice(2): the kernel moves page references, no copy through
# us (a download through the bridge cost two copies per byte, the largest share of its CPU). Only once a
# flow has carried SPLICE_AFTER bytes (a request's head and a small answer never touch a pipe), and a flow
# holds a pipe only while bytes sit in it: pipes come from a small pool, at most MAX_PIPES at once (the
# bridge's descriptors stay bounded whatever a program opens); without one (pool used up, no splice on
# this system, the kernel refuses these sockets) the flow copies through _SCRATCH as before.
SPLICE = hasattr(os, "splice")
SPLICE_AFTER = 256 * 1024
PIPE_SIZE = 1 << 20
MAX_PIPES = 64
SPARE_PIPES = 4
_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_NO_SPLICE = (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS)


class _Pipes:
    """Pipes for splice, lent to a flow while bytes sit in them. At most ``MAX_PIPES`` lent at once and
    ``SPARE_PIPES`` kept empty for the next burst (no pipe opened and closed per chunk)."""

    def __init__(self, enabled: bool = SPLICE) -> None:
        self.enabled = enabled
        self.free: list[tuple[int, int]] = []
        self.lent = 0
        self.loans = 0  # pipes lent so far (how a test sees that bytes went the spliced way)

    def take(self) -> tuple[int, int] | None:
        if not self.enabled or self.lent >= MAX_PIPES:
            return None
        if self.free:
            pipe = self.free.pop()
        else:
            try:
                pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:  # out of descriptors: this chunk is copied
                return None
            with contextlib.suppress(OSError, ImportError):
                import fcntl

                fcntl.fcntl(pipe[1], getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)  # fewer calls a megabyte
        self.lent += 1
        self.loans += 1
        return pipe

    def give(self, pipe: tuple[int, int], empty: bool = True) -> None:
        self.lent -= 1
        if empty and len(self.free) < SPARE_PIPES:
            self.free.append(pipe)
        else:
            os.close(pipe[0])
            os.close(pipe[1])


class _Flow:
    """One direction of one connection: bytes read from ``src`` not yet written to ``dst``, either in
    ``pending`` (copied) or ``inpipe`` bytes in ``pipe`` (spliced); never both."""

    __slots__ = ("dst", "eof", "inpipe", "moved", "pending", "pipe", "splice", "src")

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src, self.dst = src, dst
        self.pending: bytes | memoryview = b""
        self.eof = False
        self.pipe: tuple[int, int] | None = None
        self.inpipe = 0
        self.moved = 0
        self.splice = True  # cleared when the kernel refuses to splice these sockets

    @property
    def busy(self) -> bool:
        return bool(self.pending) or self.inpipe > 0


class _Loop:
    """Every connection in one thread, non-blocking: a request through us costs no thread start or
    switch. A direction reads only while its previous bytes are written (memory stays bounded)."""

    def __init__(self, pipes: _Pipes | None = None) -> None:
        self.sel = selectors.DefaultSelector()
        self.flows: dict[socket.socket, tuple[_Flow, _Flow]] = {}  # sock -> (out of it, into it)
        self.pipes = pipes if pipes is not None else _Pipes()

    def add(self, a: socket.socket, b: socket.socket) -> None:
        for s in (a, b):
            s.setblocking(False)
            with contextlib.suppress(OSError):  # bigger bursts per wakeup on a download
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        ab, ba = _Flow(a, b), _Flow(b, a)
        self.flows[a], self.flows[b] = (ab, ba), (ba, ab)
        self._update(a)
        self._update(b)

    def _update(self, sock: socket.socket) -> None:
        out, into = self.flows[sock]
        ev = (selectors.EVENT_READ if not out.eof and not out.busy else 0) | (selectors.EVENT_WRITE if into.busy else 0)
        try:
            key = self.sel.get_key(sock)
        except KeyError:
            key = None
        if ev and key is None:
            self.sel.register(sock, ev, "flow")
        elif ev and key is not None and key.events != ev:
            self.sel.modify(sock, ev, "flow")
        elif not ev and key is not None:
            self.sel.unregister(sock)
        if out.eof and not out.busy and into.eof and not into.busy:
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        flows = self.flows.get(sock)
        if flows is None:
            return
        for flow in flows:
            self._drop(flow)
        for s in (flows[0].src, flows[0].dst):
            self.flows.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(s)
            s.close()

    def _drop(self, flow: _Flow) -> None:
        """That direction is over: forget its bytes, give back its pipe."""
        if flow.pipe is not None:
            self.pipes.give(flow.pipe, empty=not flow.inpipe)
            flow.pipe = None
        flow.pending, flow.inpipe, flow.eof = b"", 0, True

    def _write(self, flow: _Flow) -> None:
        if flow.inpipe:
            assert flow.pipe is not None
            try:
                while flow.inpipe:
                    flow.inpipe -= os.splice(flow.pipe[0], flow.dst.fileno(), flow.inpipe, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno not in _NO_SPLICE:
                    raise
                # the kernel will not splice into this socket: take the bytes back and copy them
                flow.splice, flow.pending = False, self._unpipe(flow)
            if not flow.inpipe and flow.pipe is not None:
                self.pipes.give(flow.pipe)
                flow.pipe = None
        if flow.pending:
            try:
                n = flow.dst.send(flow.pending)
            except BlockingIOError:
                n = 0
            flow.pending = flow.pending[n:]
        if flow.eof and not flow.busy:
            with contextlib.suppress(OSError):
                flow.dst.shutdown(socket.SHUT_WR)

    def _unpipe(self, flow: _Flow) -> bytes:
        assert flow.pipe is not None
        data = bytearray()
        while len(data) < flow.inpipe:
            data += os.read(flow.pipe[0], flow.inpipe - len(data))
        flow.inpipe = 0
        return bytes(data)

    def _read(self, sock: socket.socket, out: _Flow) -> None:
        """Bytes from ``sock`` for ``out``: spliced into a pipe once the flow is bulk, else copied."""
        if out.splice and out.moved >= SPLICE_AFTER:
            out.pipe = self.pipes.take()
        if out.pipe is not None:
            try:
                n: int | None = os.splice(sock.fileno(), out.pipe[1], PIPE_SIZE, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                n = None
            except OSError as e:
                if e.errno in _NO_SPLICE:
                    out.splice = False  # not for these sockets: copy from now on
                    self.pipes.give(out.pipe)
                    out.pipe = None
                    return self._read(sock, out)
                n = 0
            if n is None or n == 0:
                self.pipes.give(out.pipe)
                out.pipe = None
                if n is None:
                    return
            out.inpipe, out.eof = n, not n
            out.moved += n
            try:
                self._write(out)
            except OSError:
                self._drop(out)
            return
        try:
            k: int | None = sock.recv_into(_SCRATCH)
        except BlockingIOError:
            k = None
        except OSError:
            k = 0
        if k is not None:
            out.pending, out.eof = _SCRATCH[:k], not k
            out.moved += k
            try:
                self._write(out)
            except OSError:
                self._drop(out)
            if out.pending:
                out.pending = bytes(out.pending)  # the scratch buffer is the next read's

    def event(self, sock: socket.socket, mask: int) -> None:
        if sock not in self.flows:
            return
        out, into = self.flows[sock]
        if mask & selectors.EVENT_WRITE:
            try:
                self._write(into)
            except OSError:  # sock stopped taking bytes: that direction is over, the other one goes on
                self._drop(into)
        if mask & selectors.EVENT_READ and not out.busy and not out.eof:
            self._read(sock, out)
        for s in (sock, out.dst):
            if s in self.flows:
                self._update(s)


class Relay:
    """Asks the daemon for connections over the channel. One request is kept outstanding per kind (sent
    before it is needed), so a program's connection costs no round trip to the daemon; a spare older than
    ``SPARE_TTL`` is dropped (the daemon closes a connection whose head does not arrive in time)."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.order: collections.deque[bytes] = collections.deque()  # kinds asked, replies come in this order
        self.spares: dict[bytes, collections.deque[tuple[float, socket.socket | None]]] = {
            b"H": collections.deque(),
            b"S": collections.deque(),
        }

    def _ask(self, kind: bytes) -> None:
        self.channel.sendall(kind)
        self.order.append(kind)

    def _reply(self) -> None:
        fds = array.array("i")
        msg, anc, _flags, _addr = self.channel.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
        if not msg:
            raise OSError("the daemon closed the channel")
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        sock = None
        if msg == b"+" and len(fds) == 1:
            sock = socket.socket(fileno=fds[0])
        else:
            for fd in fds:
                os.close(fd)
        self.spares[self.order.popleft()].append((time.monotonic(), sock))

    def upstream(self, kind: bytes) -> socket.socket | None:
        """A fresh connection to the daemon's proxy, or None (refused, or the daemon is gone)."""
        asked = time.monotonic()
        try:
            while True:
                if not self.spares[kind] and kind not in self.order:
                    self._ask(kind)
                while not self.spares[kind]:
                    self._reply()
                born, sock = self.spares[kind].popleft()
                if sock is not None and time.monotonic() - born > SPARE_TTL:
                    sock.close()
                    continue
                if sock is None and born < asked:
                    continue  # a refusal (the limit) given earlier: ask afresh
                self._ask(kind)  # the next one, ready before it is needed
                return sock
        except OSError:
            return None

    def serve(self, listeners: dict[socket.socket, bytes], parent: int) -> None:
        loop = _Loop()
        for s in listeners:
            loop.sel.register(s, selectors.EVENT_READ, "listen")
        while os.getppid() == parent:  # the command is gone: so are we
            for key, mask in loop.sel.select(1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "flow":
                    loop.event(sock, mask)
                    continue
                try:
                    client, _ = sock.accept()
                except OSError:
                    continue
                up = self.upstream(listeners[sock])
                if up is None:
                    client.close()
                else:
                    loop.add(client, up)


def serve_fds(channel: int, listeners: list[tuple[int, bytes]], parent: int) -> None:
    """The relay loop over the front's listening descriptors (kind ``H`` or ``S`` each) until ``parent``,
    the command, is gone."""
    socks = {socket.socket(fileno=fd): kind for fd, kind in listeners}
    Relay(socket.socket(fileno=channel)).serve(socks, parent)
