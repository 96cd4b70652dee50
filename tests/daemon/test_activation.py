"""Adopting an inherited socket: every check fails closed, and the socket file is never touched.

These run in-process with real sockets dup'ed onto free descriptors (``first_fd``) and an injected
environment, so no test depends on fd 3 or on our own pid. The end-to-end path through
systemd-socket-activate and the real daemon is in ``tests/service/test_socket_activation.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.daemon.activation import ActivationError, inherited_listener, listener_path

FD = 230  # far above anything pytest has open


@pytest.fixture
def rundir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp")) / "run"  # short: AF_UNIX paths are limited
    d.mkdir(mode=0o700)
    yield d
    shutil.rmtree(d.parent, ignore_errors=True)


def _listening(path: Path, mode: int = 0o600) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    os.chmod(path, mode)
    s.listen(8)
    return s


def _place(*socks: socket.socket) -> None:
    """Put the sockets on FD, FD+1, ... as a service manager would on 3, 4, ..."""
    for i, s in enumerate(socks):
        os.dup2(s.fileno(), FD + i)
        s.close()


def _env(count: int = 1, names: str | None = None, pid: int | None = None) -> dict[str, str]:
    env = {"LISTEN_FDS": str(count), "LISTEN_PID": str(os.getpid() if pid is None else pid), "OTHER": "x"}
    if names is not None:
        env["LISTEN_FDNAMES"] = names
    return env


def _close_fds(n: int = 3) -> None:
    for i in range(n):
        with contextlib.suppress(OSError):
            os.close(FD + i)


@pytest.fixture(autouse=True)
def _cleanup_fds() -> Iterator[None]:
    yield
    _close_fds()


def test_no_listen_fds_means_not_activated() -> None:
    assert inherited_listener({}, first_fd=FD) is None


def test_adopts_the_socket_without_touching_its_file(rundir: Path) -> None:
    path = rundir / "nexusd.sock"
    _place(_listening(path))
    before = os.lstat(path)
    env = _env(names="nexusd")
    sock = inherited_listener(env, first_fd=FD)
    assert sock is not None
    assert sock.fileno() == FD
    assert listener_path(sock) == str(path)
    assert not os.get_inheritable(FD)  # children must not inherit the listener
    assert env == {"OTHER": "x"}  # LISTEN_* removed so children do not think fd 3 is theirs
    # It really listens: a client connecting now is queued by the kernel and accepted.
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(str(path))
        conn, _ = sock.accept()
        conn.close()
    sock.close()
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_listen_pid_of_another_process_is_ignored_and_cleared(rundir: Path) -> None:
    _place(_listening(rundir / "s"))
    env = _env(pid=os.getpid() + 1)
    assert inherited_listener(env, first_fd=FD) is None
    assert "LISTEN_FDS" not in env and "LISTEN_PID" not in env
    os.fstat(FD)  # not ours to close either


def test_missing_listen_pid_is_ignored(rundir: Path) -> None:
    _place(_listening(rundir / "s"))
    env = {"LISTEN_FDS": "1"}
    assert inherited_listener(env, first_fd=FD) is None


@pytest.mark.parametrize("value", ["x", "-1", "1.0", "", "999999"])
def test_garbage_listen_fds_refuses(value: str) -> None:
    env = {"LISTEN_FDS": value, "LISTEN_PID": str(os.getpid())}
    with pytest.raises(ActivationError):
        inherited_listener(env, first_fd=FD)


def test_zero_fds_is_not_activated() -> None:
    assert inherited_listener(_env(count=0), first_fd=FD) is None


def test_fd_not_open_refuses() -> None:
    with pytest.raises(ActivationError, match="not open"):
        inherited_listener(_env(), first_fd=FD)


def test_regular_file_refuses(rundir: Path) -> None:
    fd = os.open(rundir / "f", os.O_CREAT | os.O_RDWR, 0o600)
    os.dup2(fd, FD)
    os.close(fd)
    with pytest.raises(ActivationError, match="not a socket"):
        inherited_listener(_env(), first_fd=FD)


def test_datagram_socket_refuses(rundir: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(rundir / "d"))
    _place(s)
    with pytest.raises(ActivationError, match="not a stream socket"):
        inherited_listener(_env(), first_fd=FD)
    os.fstat(FD)  # a refused descriptor is left as found (detached, not closed twice)


def test_tcp_socket_refuses() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen()
    _place(s)
    with pytest.raises(ActivationError, match="not AF_UNIX"):
        inherited_listener(_env(), first_fd=FD)


def test_not_listening_refuses(rundir: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(rundir / "s"))
    _place(s)
    with pytest.raises(ActivationError, match="not listening"):
        inherited_listener(_env(), first_fd=FD)


def test_abstract_socket_refuses() -> None:
    # CVE-2020-15257: abstract sockets have no permissions; anyone in the network namespace can connect.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"\0nexus-test-{os.getpid()}")
    s.listen()
    _place(s)
    with pytest.raises(ActivationError, match="abstract"):
        inherited_listener(_env(), first_fd=FD)


def test_world_connectable_socket_refuses(rundir: Path) -> None:
    # systemd's default SocketMode is 0666; with every directory above searchable, others could connect.
    os.chmod(rundir.parent, 0o755)
    os.chmod(rundir, 0o755)
    path = rundir / "s"
    _place(_listening(path, 0o666))
    with pytest.raises(ActivationError, match="SocketMode=0600"):
        inherited_listener(_env(), first_fd=FD)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o666  # refused, not "fixed" behind the manager's back


def test_permissive_socket_in_private_directory_is_accepted(rundir: Path) -> None:
    # Connecting needs search permission on the directory: a 0700 directory keeps a 0666 socket private.
    path = rundir / "s"
    _place(_listening(path, 0o666))
    sock = inherited_listener(_env(), first_fd=FD)
    assert sock is not None
    sock.close()


def test_names_must_match_the_count(rundir: Path) -> None:
    _place(_listening(rundir / "s"))
    with pytest.raises(ActivationError, match="LISTEN_FDNAMES"):
        inherited_listener(_env(names="nexusd:extra"), first_fd=FD)


def test_several_sockets_pick_ours_by_name_and_close_the_rest(rundir: Path) -> None:
    _place(_listening(rundir / "other"), _listening(rundir / "ours"))
    sock = inherited_listener(_env(count=2, names="stored:nexusd"), first_fd=FD)
    assert sock is not None
    assert listener_path(sock) == str(rundir / "ours")
    with pytest.raises(OSError):
        os.fstat(FD)  # the unnamed one is closed, not leaked to children
    sock.close()


@pytest.mark.parametrize("names", [None, "a:b", "nexusd:nexusd"])
def test_several_sockets_without_exactly_one_of_ours_refuse(rundir: Path, names: str | None) -> None:
    _place(_listening(rundir / "a"), _listening(rundir / "b"))
    with pytest.raises(ActivationError, match="exactly one"):
        inherited_listener(_env(count=2, names=names), first_fd=FD)


# ----------------------------------------------------------------------------------------- launchd


def test_launchd_socket_is_checked_like_systemd(rundir: Path) -> None:
    path = rundir / "s"
    s = _listening(path)
    asked: list[str] = []

    def fake_launchd(name: str) -> list[int]:
        asked.append(name)
        return [s.detach()]

    sock = inherited_listener({}, launchd=fake_launchd)
    assert asked == ["Listeners"]  # the key under Sockets in the plist
    assert sock is not None and listener_path(sock) == str(path)
    sock.close()


def test_launchd_wrong_socket_refuses() -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with pytest.raises(ActivationError):
        inherited_listener({}, launchd=lambda name: [s.fileno()])
    s.close()


def test_launchd_not_managed_is_not_activated() -> None:
    assert inherited_listener({}, launchd=lambda name: None) is None


def test_launchd_failure_refuses() -> None:
    def failing(name: str) -> list[int]:
        raise OSError(37, "already activated")

    with pytest.raises(ActivationError, match="launchd"):
        inherited_listener({}, launchd=failing)


def test_launchd_several_sockets_refuse_and_are_closed(rundir: Path) -> None:
    a, b = _listening(rundir / "a"), _listening(rundir / "b")
    fds = [a.detach(), b.detach()]
    with pytest.raises(ActivationError, match="expected one"):
        inherited_listener({}, launchd=lambda name: fds)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
