"""A socket file removed while the daemon runs is noticed within seconds, logged and bound again (issue 34, item
9). On 43de9e7 it was a silent outage that never ended: hooks denied, the daemon logged nothing and a new daemon
refused to start because the old one held the lock. Real daemons on temp sockets; the activated one gets its
socket the way systemd passes it (LISTEN_FDS, descriptor 3, LISTEN_PID of the daemon itself)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from nexusd import protocol as p
from nexusd.client import Client
from tests.conftest import DaemonHandle, short_tmpdir


def _reachable(path: Path, within: float = 10.0) -> float:
    """Seconds until a client is served again at ``path``; fails after ``within``."""
    start = time.monotonic()
    while True:
        try:
            with Client(socket_path=str(path), role="admin", name="t", timeout=5) as c:
                c.status()
            return time.monotonic() - start
        except Exception:
            assert time.monotonic() - start < within, f"{path} not served again within {within}s"
            time.sleep(0.1)


def _log_says(h: DaemonHandle, text: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while text not in h.log.read_text():
        assert time.monotonic() < deadline, h.log.read_text()[-2000:]
        time.sleep(0.1)


def test_a_removed_socket_is_bound_again_and_logged(daemon: DaemonHandle) -> None:
    ui = Client(socket_path=str(daemon.socket), role="admin", name="before")
    ui.__enter__()
    os.unlink(daemon.socket)
    took = _reachable(daemon.socket)
    assert took < 5, took
    _log_says(daemon, "socket file was removed")
    st = os.lstat(daemon.socket)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert ui.status()  # a connection made before is served as before
    ui.__exit__(None, None, None)
    # an agent's hook is decided again
    with Client(socket_path=str(daemon.socket), role="agent", name="hook") as c:
        d = c.request(p.CallInfo("claude", "s", "Read", {"file_path": "/tmp/x"}, "/tmp"))
        assert d.decision in ("allow", "deny")
    # and again, a second time
    os.unlink(daemon.socket)
    _reachable(daemon.socket)
    daemon.stop()
    assert not os.path.lexists(daemon.socket)  # the re-bound socket is removed at stop like the first


def test_what_takes_the_path_is_never_removed_but_logged(daemon: DaemonHandle) -> None:
    os.unlink(daemon.socket)
    daemon.socket.write_text("not a socket")  # something in the way (before the watcher saw the path empty)
    _log_says(daemon, "socket path taken by something else")
    assert daemon.socket.read_text() == "not a socket"
    daemon.socket.unlink()
    _reachable(daemon.socket)


def test_a_dead_socket_put_in_its_place_is_replaced(daemon: DaemonHandle) -> None:
    os.unlink(daemon.socket)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(daemon.socket))  # bound, never listening: a dead socket
    s.close()
    _reachable(daemon.socket)


def test_a_live_socket_of_someone_else_is_left_alone(daemon: DaemonHandle) -> None:
    os.unlink(daemon.socket)
    squat = socket.socket(socket.AF_UNIX)
    squat.bind(str(daemon.socket))
    squat.listen(1)
    try:
        _log_says(daemon, "socket path taken by something else")
        ident = os.lstat(daemon.socket).st_ino
        time.sleep(1.5)
        assert os.lstat(daemon.socket).st_ino == ident  # never replaced
    finally:
        squat.close()
    os.unlink(daemon.socket)
    _reachable(daemon.socket)


def test_a_socket_activated_daemon_binds_the_removed_path_again(daemon_factory) -> None:
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    old = os.umask(0o177)
    try:
        listener.bind(str(h.socket))
    finally:
        os.umask(old)
    listener.listen(16)
    env = {**h.env, "LISTEN_FDS": "1", "LISTEN_FDNAMES": "nexusd"}
    fd = listener.fileno()
    code = "import os, sys; os.environ['LISTEN_PID'] = str(os.getpid()); os.execv(sys.argv[1], sys.argv[1:])"
    with open(h.log, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, sys.executable, "-m", "nexusd.cli.daemon_main", *h.args],
            env=env,
            stdout=log,
            stderr=log,
            pass_fds=(3,),  # kept open past close_fds; the child's copy is made ours in preexec_fn
            preexec_fn=(lambda: os.dup2(fd, 3)) if fd != 3 else None,
            start_new_session=True,
        )
    h.proc = proc
    listener.close()
    try:
        _reachable(h.socket)
        os.unlink(h.socket)
        took = _reachable(h.socket)
        assert took < 5, took
        _log_says(h, "socket file was removed")
    finally:
        h.stop()


def test_rebind_keeps_the_directory_checks(tmp_path: Path) -> None:
    from nexusd.daemon.listener import ListenerError, bind_socket, rebind

    d = short_tmpdir() / "run"
    bound = bind_socket(d / "s.sock")
    try:
        os.unlink(d / "s.sock")
        os.chmod(d, 0o755)  # someone opened the directory up meanwhile: refuse, as at start
        try:
            rebind(bound, d / "s.sock")
            raise AssertionError("bound in a directory others can reach")
        except ListenerError as e:
            assert "0700" in str(e)
    finally:
        bound.release()
        bound.sock.close()
