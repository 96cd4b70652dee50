"""The daemon proxy's relay (``nexusd.sandbox.proxy._relay``) on real sockets in this process: bytes both
ways, whole and in order, and counted exactly (the counts are the audit's ``bytes_up``/``bytes_down``),
whether the kernel splices them or, with splice unavailable or no descriptor left for a pipe, they are
copied. The end-to-end path through the sandbox is in test_network.py."""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import threading

import anyio
import pytest

from nexusd.sandbox import proxy

pytestmark = pytest.mark.anyio
MB = 1024 * 1024


def _peer(sock: socket.socket, data: bytes, got: list[str]) -> None:
    """The far end of one side: sends ``data`` and half-closes, while reading until EOF."""
    reader = threading.Thread(target=lambda: got.append(_read(sock)))
    reader.start()
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    reader.join(60)
    sock.close()


def _read(sock: socket.socket) -> str:
    h, n = hashlib.sha256(), 0
    while chunk := sock.recv(1 << 18):
        h.update(chunk)
        n += len(chunk)
    return f"{n}:{h.hexdigest()}"


def _digest(data: bytes) -> str:
    return f"{len(data)}:{hashlib.sha256(data).hexdigest()}"


async def _run(first: bytes, up: bytes, down: bytes) -> tuple[tuple[int, int], str, str]:
    client_ours, client_far = socket.socketpair()  # the bridge's connection (a Unix socket pair)
    listener = socket.create_server(("127.0.0.1", 0))  # the upstream server (TCP)
    upstream_ours = socket.create_connection(listener.getsockname())
    upstream_far, _ = listener.accept()
    listener.close()
    got_by_server: list[str] = []
    got_by_client: list[str] = []
    threads = [
        threading.Thread(target=_peer, args=(client_far, up, got_by_client)),
        threading.Thread(target=_peer, args=(upstream_far, down, got_by_server)),
    ]
    for t in threads:
        t.start()
    with client_ours, upstream_ours:
        counts = await proxy._relay(proxy.Conn(client_ours), proxy.Conn(upstream_ours), first)
    for t in threads:
        await anyio.to_thread.run_sync(t.join, 60)
    return counts, got_by_server[0], got_by_client[0]


@pytest.mark.parametrize("way", ["splice", "no splice", "no pipe"])
async def test_bytes_both_ways_whole_and_counted(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if way == "no splice":
        monkeypatch.delattr(os, "splice", raising=False)  # as on macOS
    elif way == "no pipe":  # out of descriptors when the relay starts (the kernel's EMFILE, stood in for)

        def no_pipe(*_: object) -> tuple[int, int]:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(os, "pipe2", no_pipe)
    elif not hasattr(os, "splice"):
        pytest.skip("no splice on this system")
    first, up, down = b"GET / HTTP/1.1\r\n\r\n", os.urandom(5 * MB + 1), os.urandom(20 * MB + 7)
    counts, server_got, client_got = await _run(first, up, down)
    assert server_got == _digest(first + up) and client_got == _digest(down)
    assert counts == (len(first) + len(up), len(down))
