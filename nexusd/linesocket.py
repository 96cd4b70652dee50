"""The blocking byte level of the wire: connect, send whole lines, read lines against a deadline.

Standard library only, shared by the client library and the hook's lean wire (spawned once per tool
call), so both fail the same way: DaemonUnreachable, ReplyTimeout, or BadReply for an endless line.
"""

from __future__ import annotations

import socket
import time

from nexusd.client_errors import BadReply, DaemonUnreachable, ReplyTimeout

MAX_REPLY_BYTES = 64 << 20  # replies (audit tails, snapshots, rewritten tool input) may be long


def why(e: BaseException) -> str:
    """A short reason for a socket failure, fit for a deny message."""
    if isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


class LineSocket:
    """One Unix stream connection read as newline-terminated lines. Closed on any failure."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self._buf = b""

    @classmethod
    def connect(cls, path: str, timeout: float) -> LineSocket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as e:  # TimeoutError is an OSError
            sock.close()
            raise DaemonUnreachable(f"cannot connect to nexusd at {path}: {why(e)}") from e
        return cls(sock)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def send(self, data: bytes) -> None:
        if self.sock is None:
            raise DaemonUnreachable("not connected")
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.close()
            raise DaemonUnreachable(f"connection to nexusd lost: {why(e)}") from e

    def read_line(self, deadline: float) -> bytes:
        """The next line without its newline; ReplyTimeout at ``deadline`` (time.monotonic())."""
        if self.sock is None:
            raise DaemonUnreachable("not connected")
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1 :]
                return line
            if len(self._buf) > MAX_REPLY_BYTES:
                self.close()
                raise BadReply("reply line too long")
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
            self._buf += chunk
