"""The real daemon's sd_notify conversation, received on a datagram socket standing in for systemd's.

Order matters to systemd: READY=1 only once listening with the policy loaded; WATCHDOG=1 at half of
WATCHDOG_USEC; RELOADING=1 then READY=1 around a SIGHUP reload; STOPPING=1 on the way out.
"""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.client import Client
from tests.daemon.conftest import CALL_BASH, Raw

WATCHDOG_USEC = 200_000  # pings every 0.1 s, so a few arrive quickly


class Manager:
    """Collects datagrams in arrival order."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
        self.path = str(self.dir / "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages: list[list[str]] = []

    def until(self, pred: Callable[[list[str]], bool], timeout: float = 20.0) -> list[str]:
        """Receive until a datagram satisfies pred; returns that datagram."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"expected datagram not received; got {self.messages}")
            self.sock.settimeout(left)
            try:
                msg = self.sock.recv(4096).decode().split("\n")
            except TimeoutError:
                continue
            self.messages.append(msg)
            if pred(msg):
                return msg

    def drain(self, quiet: float = 0.3) -> None:
        self.sock.settimeout(quiet)
        try:
            while True:
                self.messages.append(self.sock.recv(4096).decode().split("\n"))
        except TimeoutError:
            pass

    def index(self, line: str, start: int = 0) -> int:
        for i in range(start, len(self.messages)):
            if line in self.messages[i]:
                return i
        raise AssertionError(f"{line} not among {self.messages[start:]}")

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def manager() -> Iterator[Manager]:
    m = Manager()
    yield m
    m.close()


def test_ready_status_watchdog_reload_stopping_in_order(daemon_factory, manager: Manager) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(env={"NOTIFY_SOCKET": manager.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    ready = manager.until(lambda m: "READY=1" in m)
    # Nothing but READY (with its STATUS) comes first: no ping or reload before the service is up.
    assert manager.messages == [ready]
    assert any(line.startswith("STATUS=") and line.endswith("pending") for line in ready), ready
    # READY=1 means listening with the policy loaded: a client is answered at once.
    with Client(h.socket, role="admin", name="notify-test", timeout=10) as c:
        assert c.status().pending == 0

    manager.until(lambda m: m == ["WATCHDOG=1"])
    manager.until(lambda m: m == ["WATCHDOG=1"])  # repeatedly, not once

    mark = len(manager.messages)
    assert h.proc is not None
    h.proc.send_signal(signal.SIGHUP)
    manager.until(lambda m: "READY=1" in m)
    reloading = manager.index("RELOADING=1", mark)
    ready_again = manager.index("READY=1", mark)
    assert reloading < ready_again
    assert any(line.startswith("MONOTONIC_USEC=") for line in manager.messages[reloading])
    with Client(h.socket, role="admin", name="after-reload", timeout=10) as c:
        c.status()  # still serving after the reload

    mark = len(manager.messages)
    assert h.stop() == 0
    manager.drain()
    stopping = manager.index("STOPPING=1", mark)
    assert not any("READY=1" in m for m in manager.messages[stopping:])


def test_status_line_reports_the_pending_count(daemon_factory, manager: Manager) -> None:  # type: ignore[no-untyped-def]
    daemon_factory(env={"NOTIFY_SOCKET": manager.path})
    ready = manager.until(lambda m: "READY=1" in m)
    assert "STATUS=0 pending" in ready


def test_without_watchdog_usec_there_are_no_pings(daemon_factory, manager: Manager) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(env={"NOTIFY_SOCKET": manager.path})
    manager.until(lambda m: "READY=1" in m)
    manager.drain(0.5)
    assert not any("WATCHDOG=1" in m for m in manager.messages)
    h.stop()


def test_a_reload_right_after_ready_reloads_rather_than_kills(daemon_factory, manager: Manager) -> None:  # type: ignore[no-untyped-def]
    # systemd may run ExecReload (SIGHUP) the moment READY=1 arrives; SIGHUP's default action is to
    # terminate, so the handler must be in place before READY=1 is sent.
    h = daemon_factory(env={"NOTIFY_SOCKET": manager.path}, autostart=False)
    h.start()
    manager.until(lambda m: "READY=1" in m)
    assert h.proc is not None
    h.proc.send_signal(signal.SIGHUP)
    mark = len(manager.messages)
    manager.until(lambda m: "READY=1" in m)
    assert manager.index("RELOADING=1", mark) >= mark
    assert h.proc.poll() is None
    assert h.stop() == 0


def test_status_follows_the_pending_count_live(daemon_factory, manager: Manager) -> None:  # type: ignore[no-untyped-def]
    """Not only at READY: a request waiting for a person shows as "1 pending" while it waits, "0 pending" once
    answered (what `systemctl --user status nexusd` shows)."""
    h = daemon_factory(env={"NOTIFY_SOCKET": manager.path})
    manager.until(lambda m: "READY=1" in m)
    ui = Raw(h.socket)
    ui.hello("ui", "notify-ui")
    ui.ask({"type": "subscribe"})
    agent = Raw(h.socket)
    agent.hello("agent", "notify-agent")
    agent.send({"type": "request", "call": CALL_BASH, "on_no_ui": "deny", "ref": "r"})
    pend = agent.recv()
    assert isinstance(pend, p.Pending), pend
    manager.until(lambda m: m == ["STATUS=1 pending"])
    ui.send({"type": "answer", "id": pend.id, "decision": "deny"})
    manager.until(lambda m: m == ["STATUS=0 pending"])
    assert agent.recv().decision == "deny"  # type: ignore[union-attr]
    ui.close()
    agent.close()
