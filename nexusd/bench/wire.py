"""A lean JSON-lines connection for load generation.

The load generator shares the machine with the daemon it measures, so it stays as thin as asyncio streams
allow: requests are encoded before the clock starts and replies are only decoded to find the final one.
It speaks the protocol directly (not ``nexusd.client``) so one connection can carry thousands of
multiplexed requests, matched by ``ref``.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import msgspec

from nexusd import protocol

LIMIT = protocol.MAX_LINE_BYTES + 1


class WireError(Exception):
    """The peer closed, or answered the handshake with something other than a welcome."""


class Conn:
    """One Unix-socket connection speaking JSON lines."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(
        cls, path: str | Path, role: str = "agent", name: str = "nexus-bench", *, echo: bool = False
    ) -> Conn:
        """Connect and say hello; against the echo server any reply line completes the handshake."""
        reader, writer = await asyncio.open_unix_connection(str(path), limit=LIMIT)
        conn = cls(reader, writer)
        conn.send(protocol.encode(protocol.Hello(proto=protocol.PROTOCOL_VERSION, role=role, name=name)))  # type: ignore[arg-type]
        line = await conn.recv_line()
        if not echo:
            msg = protocol.decode_server(line)
            if not isinstance(msg, protocol.Welcome):
                await conn.close()
                raise WireError(f"handshake refused: {line[:200]!r}")
        return conn

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()

    async def recv_line(self) -> bytes:
        line = await self.reader.readline()
        if not line.endswith(b"\n"):
            raise WireError("connection closed by peer")
        return line

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self.writer.wait_closed()


def decode(line: bytes) -> protocol.ServerMessage | None:
    """A server message, or None for a line that is not one (the echo server's echoes)."""
    try:
        return protocol.decode_server(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


async def query(path: str | Path, msg: msgspec.Struct, role: str = "admin") -> protocol.ServerMessage:
    """One call on a fresh connection (status, for instance)."""
    conn = await Conn.open(path, role=role, name="nexus-bench")
    try:
        conn.send(protocol.encode(msg))
        return protocol.decode_server(await conn.recv_line())
    finally:
        await conn.close()
