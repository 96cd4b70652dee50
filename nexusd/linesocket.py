"""The blocking byte level of the wire: connect, send whole lines, read lines against a deadline.

Standard library only, shared by the client library and the hook's lean wire (spawned once per tool
call), so both fail the same way: DaemonUnreachable, ReplyTimeout, or BadReply for an endless line.

A send never waits with its ears shut: while a line cannot be written, whatever the daemon sends is read
into the line buffer. The daemon stops reading a connection that leaves its replies unread; a client
blocked in a plain ``sendall`` then never reads them, and both would wait for ever.
"""

import time

from nexusd.client_errors import BadReply, DaemonUnreachable, ReplyTimeout

# ``_socket`` is the C type ``socket.socket`` wraps: the per-call hook needs none of the wrapper (makefile,
# enum-typed families) and the ``socket`` module costs it ~1.5 ms of imports (enum, selectors).
try:
    import _socket as socket
except ImportError:  # pragma: no cover - not CPython
    import socket  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import selectors

MAX_REPLY_BYTES = 64 << 20  # replies (audit tails, snapshots, rewritten tool input) may be long
MAX_BUFFERED_BYTES = 2 * MAX_REPLY_BYTES  # read while a send waits, before the client gives up


def _selector(
    sock: "socket.socket", sel: "selectors.BaseSelector | None" = None, read: bool = True
) -> "selectors.BaseSelector":
    """A selector on ``sock``'s write (and read) readiness, made or changed; ``selectors`` is imported only
    here, on the rare path of a full socket buffer (the hook never pays for it)."""
    import selectors

    events = selectors.EVENT_WRITE | (selectors.EVENT_READ if read else 0)
    if sel is None:
        sel = selectors.DefaultSelector()
        sel.register(sock, events)
    else:
        sel.modify(sock, events)
    return sel


def why(e: BaseException) -> str:
    """A short reason for a socket failure, fit for a deny message."""
    if isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


class LineSocket:
    """One Unix stream connection read as newline-terminated lines. Closed on any failure."""

    def __init__(self, sock: "socket.socket", timeout: float = 5.0) -> None:
        self.sock: socket.socket | None = sock
        self.timeout = timeout  # how long a send may make no progress
        self._buf = bytearray()
        self._pos = 0  # where the unread part of ``_buf`` begins (no copy per line of a long buffer)
        self._eof = False  # the daemon closed its side (seen while sending); lines already read still count

    @classmethod
    def connect(cls, path: str, timeout: float) -> "LineSocket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as e:  # TimeoutError is an OSError
            sock.close()
            raise DaemonUnreachable(f"cannot connect to nexusd at {path}: {why(e)}") from e
        return cls(sock, timeout)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def send(self, data: bytes) -> None:
        """Write all of ``data``, reading what arrives meanwhile; DaemonUnreachable after ``timeout`` seconds
        without progress (the daemon reads nothing and sends nothing)."""
        sock = self.sock
        if sock is None:
            raise DaemonUnreachable("not connected")
        view = memoryview(data)
        sel: selectors.BaseSelector | None = None
        try:
            sock.settimeout(0.0)
            while view:
                try:
                    view = view[sock.send(view) :]
                    continue
                except (BlockingIOError, InterruptedError):
                    pass
                if sel is None:  # the slow path: the socket's buffer is full
                    sel = _selector(sock)
                if not sel.select(self.timeout):
                    raise TimeoutError("nexusd read nothing and sent nothing")
                if not self._eof:
                    self._read_some(sock)
                    if self._eof:  # nothing more to read: wait for room to write only (or the error)
                        _selector(sock, sel, read=False)
        except OSError as e:  # TimeoutError is an OSError
            self.close()
            raise DaemonUnreachable(f"connection to nexusd lost: {why(e)}") from e
        finally:
            if sel is not None:
                sel.close()

    def _read_some(self, sock: "socket.socket") -> None:
        """Whatever is readable now, into the line buffer (a non-blocking socket)."""
        try:
            chunk = sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            self._eof = True
            return
        self._buf += chunk
        if len(self._buf) - self._pos > MAX_BUFFERED_BYTES:
            self.close()
            raise BadReply("too much unread from nexusd while sending")

    def read_some(self, deadline: float) -> bytes:
        """Whatever the daemon sent (what a send read first), ``b""`` at the end of the stream; ReplyTimeout at
        ``deadline`` (time.monotonic()). For a caller that frames lines itself (``nexusd.conversation``)."""
        if self.sock is None:
            raise DaemonUnreachable("not connected")
        if self._pos < len(self._buf):
            data = bytes(self._buf[self._pos :])
            self._buf.clear()
            self._pos = 0
            return data
        if self._eof:
            return b""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReplyTimeout("no reply from nexusd in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except TimeoutError as e:
            raise ReplyTimeout("no reply from nexusd in time") from e
        except OSError as e:
            self.close()
            raise DaemonUnreachable(f"connection to nexusd lost: {why(e)}") from e
        if not chunk:
            self._eof = True
        return chunk

    def read_line(self, deadline: float) -> bytes:
        """The next line without its newline; ReplyTimeout at ``deadline`` (time.monotonic())."""
        if self.sock is None:
            raise DaemonUnreachable("not connected")
        scan = self._pos  # where a newline may still be (a long line is not searched again from its start)
        while True:
            nl = self._buf.find(b"\n", scan)
            if nl >= 0:
                line = bytes(self._buf[self._pos : nl])
                self._pos = nl + 1
                if self._pos == len(self._buf):
                    self._buf.clear()
                    self._pos = 0
                elif self._pos > 1 << 16 and self._pos * 2 > len(self._buf):
                    del self._buf[: self._pos]
                    self._pos = 0
                return line
            if len(self._buf) - self._pos > MAX_REPLY_BYTES:
                self.close()
                raise BadReply("reply line too long")
            if self._eof:
                self.close()
                raise DaemonUnreachable("nexusd closed the connection")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReplyTimeout("no reply from nexusd in time")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError as e:
                raise ReplyTimeout("no reply from nexusd in time") from e
            except OSError as e:
                self.close()
                raise DaemonUnreachable(f"connection to nexusd lost: {why(e)}") from e
            if not chunk:
                self.close()
                raise DaemonUnreachable("nexusd closed the connection")
            scan = len(self._buf)
            self._buf += chunk
