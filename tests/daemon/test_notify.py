"""sd_notify datagrams, received on a real datagram socket standing in for systemd's.

The ordering through the real daemon (READY, STATUS, WATCHDOG, RELOADING, STOPPING) is tested in
``tests/service/test_notify_wire.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.daemon.notify import Notifier


@pytest.fixture
def manager() -> Iterator[tuple[str, socket.socket]]:
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
    path = str(d / "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(2)
    yield path, s
    s.close()
    shutil.rmtree(d, ignore_errors=True)


def _recv(s: socket.socket) -> list[str]:
    return s.recv(4096).decode().split("\n")


def test_without_notify_socket_everything_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = Notifier.from_env()
    assert not n.enabled
    n.ready("x")
    n.watchdog()
    n.stopping()


def test_states_arrive_as_one_datagram_each(
    manager: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, s = manager
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    n = Notifier.from_env()
    assert "NOTIFY_SOCKET" not in os.environ  # children (hooks, sandboxed commands) cannot speak for us
    n.ready("0 pending")
    assert _recv(s) == ["READY=1", "STATUS=0 pending"]
    n.status("3 pending")
    assert _recv(s) == ["STATUS=3 pending"]
    n.watchdog()
    assert _recv(s) == ["WATCHDOG=1"]
    n.reloading()
    first, second = _recv(s)
    assert first == "RELOADING=1"
    assert second.startswith("MONOTONIC_USEC=") and int(second.split("=")[1]) > 0
    n.stopping()
    assert _recv(s) == ["STOPPING=1"]
    n.close()
    n.ready()  # after close: silent


def test_status_text_cannot_smuggle_assignments(manager: tuple[str, socket.socket]) -> None:
    path, s = manager
    n = Notifier(path)
    n.status("policy error in /x\nREADY=1\r\nMAINPID=1")
    lines = _recv(s)
    assert len(lines) == 1 and lines[0].startswith("STATUS=")
    n.ready("a\nSTOPPING=1")
    assert _recv(s) == ["READY=1", "STATUS=a STOPPING=1"]


def test_abstract_address() -> None:
    name = f"nexus-notify-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(2)
        Notifier("@" + name).ready()
        assert _recv(s) == ["READY=1"]


@pytest.mark.parametrize("address", ["relative/path", "vsock:2:1234", ""])
def test_addresses_we_do_not_speak_are_ignored(address: str) -> None:
    assert not Notifier(address).enabled


def test_manager_gone_does_not_raise(manager: tuple[str, socket.socket]) -> None:
    path, s = manager
    n = Notifier(path)
    s.close()
    os.unlink(path)
    n.ready()
    n.stopping()


def test_a_manager_that_stops_reading_never_blocks_the_sender(manager: tuple[str, socket.socket]) -> None:
    # A blocking sendto would stall the daemon's event loop once the receive queue is full; the
    # pytest timeout turns such a hang into a failure.
    path, _s = manager
    n = Notifier(path)
    for _ in range(5000):
        n.status("x" * 150)


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        ("2000000", None, 1.0),
        ("2000000", "self", 1.0),
        ("2000000", "other", None),
        ("2000000", "junk", None),
        ("0", None, None),
        ("-5", None, None),
        ("lots", None, None),
        (None, None, None),
    ],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    if usec is None:
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    else:
        monkeypatch.setenv("WATCHDOG_USEC", usec)
    if pid is None:
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
    else:
        monkeypatch.setenv("WATCHDOG_PID", {"self": str(os.getpid()), "other": str(os.getpid() + 1)}.get(pid, pid))
    assert Notifier.watchdog_interval() == expected
