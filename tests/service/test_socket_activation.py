"""Socket activation end to end: systemd-socket-activate holds the socket and starts the real nexusd.

systemd-socket-activate binds the socket, waits for the first connection, then execs nexusd with the
socket on fd 3 (LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES) exactly as the user manager does for nexusd.socket.
The connections made before the daemon runs sit in the kernel's queue and must be served.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.client import Client

ACTIVATE = shutil.which("systemd-socket-activate")
pytestmark = pytest.mark.skipif(
    ACTIVATE is None, reason="systemd-socket-activate not installed (apt-get install systemd)"
)


@dataclass
class Activated:
    root: Path
    socket: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def wait_for_socket(self, timeout: float = 10.0) -> None:
        """Until the socket listens. Its file appears at bind(), a moment before listen(): a connect in between is
        refused (seen under load). Read from /proc/net/unix, because a probe connection would start the daemon."""
        deadline = time.monotonic() + timeout
        while not self.listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"no socket from systemd-socket-activate:\n{self.log.read_text()}")
            time.sleep(0.01)

    def listening(self) -> bool:
        """Bound, and listening if it is a stream socket (a datagram socket never listens)."""
        listen_flag, stream = 0x10000, "0001"  # /proc/net/unix: Flags __SO_ACCEPTCON once listen() ran; Type
        with open("/proc/net/unix") as table:
            next(table)
            for line in table:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == str(self.socket):
                    return fields[4] != stream or bool(int(fields[3], 16) & listen_flag)
        return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


@pytest.fixture
def activate() -> Iterator[Callable[..., Activated]]:
    started: list[Activated] = []

    def start(*extra: str) -> Activated:
        root = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
        # The layout the user manager creates: %t/nexus (DirectoryMode=0700)/nexusd.sock.
        (root / "nexus").mkdir(mode=0o700)
        for d in ("config", "state", "managed"):
            (root / d).mkdir()
        sock = root / "nexus" / "nexusd.sock"
        env = {
            "XDG_RUNTIME_DIR": str(root),
            "NEXUS_CONFIG_DIR": str(root / "config"),
            "NEXUS_STATE_DIR": str(root / "state"),
            "NEXUS_MANAGED_DIR": str(root / "managed"),
            "PYTHONUNBUFFERED": "1",
        }
        argv = [ACTIVATE, "-l", str(sock), *extra]
        for k, v in env.items():
            argv += ["-E", f"{k}={v}"]  # systemd-socket-activate passes only PATH, HOME, TERM otherwise
        argv += [sys.executable, "-m", "nexusd.cli.daemon_main", "--log-level", "debug"]
        log = root / "nexusd.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(argv, stdout=f, stderr=f, umask=0o077, start_new_session=True)
        a = Activated(root, sock, log, proc)
        started.append(a)
        a.wait_for_socket()
        return a

    yield start
    for a in started:
        if a.proc.poll() is None:
            a.proc.kill()
            a.proc.wait()
        shutil.rmtree(a.root, ignore_errors=True)


def _hello_line(name: str) -> bytes:
    return p.encode(p.Hello(proto=p.PROTOCOL_VERSION, role="admin", name=name, ref=name))


def _read_line(s: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def test_first_connection_is_served_and_the_socket_is_left_alone(activate: Callable[..., Activated]) -> None:
    a = activate("--fdname=nexusd")
    before = os.lstat(a.socket)
    # The daemon is not running yet: this connection is what makes systemd-socket-activate exec it.
    with Client(a.socket, role="admin", name="first", timeout=30.0) as c:
        assert isinstance(c.welcome, p.Welcome)
        st = c.status()
    assert st.pid == a.proc.pid  # served by the activated daemon (socket-activate execs in place)
    assert a.stop() == 0, a.log.read_text()
    after = os.lstat(a.socket)  # the daemon neither unlinked nor chmodded the inherited socket
    assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)
    assert "<inherited>" in a.log.read_text()  # the daemon says it adopted, not bound, its socket


def test_connections_queued_during_start_up_are_all_served(activate: Callable[..., Activated]) -> None:
    a = activate("--fdname=nexusd")
    conns = []
    for i in range(5):  # all connected and written before the daemon has even been exec'ed
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(str(a.socket))
        s.sendall(_hello_line(f"early-{i}"))
        conns.append(s)
    for i, s in enumerate(conns):
        reply = p.decode_server(_read_line(s))
        assert isinstance(reply, p.Welcome) and reply.ref == f"early-{i}"
        s.close()
    assert a.stop() == 0, a.log.read_text()
    assert a.socket.exists()


def test_without_a_name_the_single_socket_is_still_adopted(activate: Callable[..., Activated]) -> None:
    a = activate()  # no LISTEN_FDNAMES at all
    with Client(a.socket, role="admin", name="unnamed", timeout=30.0) as c:
        assert c.status().pid == a.proc.pid
    assert a.stop() == 0


def test_a_datagram_socket_is_refused(activate: Callable[..., Activated]) -> None:
    a = activate("--datagram")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", str(a.socket))  # the "first connection" that triggers the exec
    rc = a.proc.wait(30)
    assert rc != 0
    assert "not a stream socket" in a.log.read_text()
    assert a.socket.exists()
