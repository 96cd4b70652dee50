"""Raw wire access for daemon tests: bytes in, decoded lines out, nothing hidden by a client library."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nexusd import protocol as p

CALL_BASH = {
    "provider": "claude",
    "session": "s-test",
    "tool": "Bash",
    "input": {"command": "npm install left-pad"},
    "cwd": "/tmp",
}


class Raw:
    """A bare socket speaking lines; ``recv`` returns decoded server messages."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        # generous: a reply that takes 5 s on a loaded 2-core machine is slow, not wrong; tests that wait
        # for silence set their own, shorter timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, obj: dict[str, Any] | msgspec.Struct) -> None:
        data = p.encode(obj) if isinstance(obj, msgspec.Struct) else msgspec.json.encode(obj) + b"\n"
        self.sock.sendall(data)

    def recv(self) -> p.ServerMessage:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"closed by daemon; leftover {self.buf!r}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return p.decode_server(line)

    def closed(self) -> bool:
        """True if the daemon closed the connection (EOF) with nothing more to read."""
        try:
            return self.sock.recv(1) == b"" and not self.buf
        except ConnectionResetError:
            return True

    def hello(self, role: str = "agent", name: str = "test") -> p.Welcome:
        self.send({"type": "hello", "proto": p.PROTOCOL_VERSION, "role": role, "name": name})
        msg = self.recv()
        assert isinstance(msg, p.Welcome), msg
        return msg

    def ask(self, obj: dict[str, Any] | msgspec.Struct) -> p.ServerMessage:
        self.send(obj)
        return self.recv()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_factory():
    conns: list[Raw] = []

    def make(path: Path, role: str | None = "agent", name: str = "test") -> Raw:
        r = Raw(path)
        conns.append(r)
        if role is not None:
            r.hello(role, name)
        return r

    yield make
    for c in conns:
        c.close()
