"""LineSocket: lines across chunks, and every failure is one of the client errors (callers deny on them)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from nexusd import linesocket
from nexusd.client_errors import BadReply, DaemonUnreachable, ReplyTimeout
from nexusd.linesocket import LineSocket


def _pair() -> tuple[LineSocket, socket.socket]:
    ours, theirs = socket.socketpair()
    return LineSocket(ours), theirs


def test_lines_split_across_chunks_and_joined_in_one() -> None:
    line, peer = _pair()
    peer.sendall(b'{"a":')
    peer.sendall(b'1}\n{"b":2}\n')
    soon = time.monotonic() + 2
    assert line.read_line(soon) == b'{"a":1}'
    assert line.read_line(soon) == b'{"b":2}'
    line.close()
    peer.close()


def test_silence_is_a_timeout() -> None:
    line, peer = _pair()
    with pytest.raises(ReplyTimeout):
        line.read_line(time.monotonic() + 0.05)
    line.close()
    peer.close()


def test_peer_closing_mid_line_is_unreachable() -> None:
    line, peer = _pair()
    peer.sendall(b'{"half":')
    peer.close()
    with pytest.raises(DaemonUnreachable):
        line.read_line(time.monotonic() + 2)
    assert line.sock is None


def test_endless_line_is_a_bad_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linesocket, "MAX_REPLY_BYTES", 1024)
    line, peer = _pair()
    peer.sendall(b"x" * 4096)
    with pytest.raises(BadReply):
        line.read_line(time.monotonic() + 2)
    peer.close()


def test_no_daemon_is_unreachable(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnreachable, match="cannot connect"):
        LineSocket.connect(str(tmp_path / "none.sock"), 1.0)


def test_send_after_close_is_unreachable() -> None:
    line, peer = _pair()
    line.close()
    with pytest.raises(DaemonUnreachable):
        line.send(b"x\n")
    peer.close()
