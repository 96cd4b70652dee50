"""The socket and its directory: modes, the lock, live vs stale sockets, other uids, inherited sockets."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.daemon.listener import ListenerError, bind_socket, check_private_dir
from tests.conftest import short_tmpdir

NOBODY = 65534


def run_nexusd(handle, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexusd.cli.daemon_main", *handle.args],
        env=handle.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def hello_status(path) -> p.StatusReply:
    from nexusd.client import Client

    with Client(socket_path=path, role="admin") as c:
        return c.status()


def test_socket_is_0600_in_a_0700_dir(daemon):
    assert stat.S_IMODE(os.lstat(daemon.socket).st_mode) == 0o600
    assert stat.S_ISSOCK(os.lstat(daemon.socket).st_mode)
    assert stat.S_IMODE(os.lstat(daemon.socket.parent).st_mode) == 0o700


def test_socket_is_0600_even_with_a_permissive_umask():
    d = short_tmpdir() / "run"
    old = os.umask(0)
    try:
        bound = bind_socket(d / "s.sock")
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.lstat(d / "s.sock").st_mode) == 0o600
        assert os.umask(old) == old  # our umask is restored
    finally:
        bound.sock.close()
        bound.release()
    assert not (d / "s.sock").exists()


@pytest.mark.parametrize("mode", [0o755, 0o710, 0o701, 0o770])
def test_directory_with_group_or_other_bits_is_refused(daemon_factory, mode):
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700)
    os.chmod(h.socket.parent, mode)
    r = run_nexusd(h)
    assert r.returncode == 3
    assert "must be 0700" in r.stderr
    assert not h.socket.exists()


def test_directory_of_another_owner_or_a_symlink_is_refused(daemon_factory):
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700)
    os.chown(h.socket.parent, NOBODY, NOBODY)
    r = run_nexusd(h)
    assert r.returncode == 3 and "owned by uid" in r.stderr
    os.chown(h.socket.parent, 0, 0)
    real = h.root / "elsewhere"
    real.mkdir(mode=0o700)
    h.socket.parent.rmdir()
    h.socket.parent.symlink_to(real)
    with pytest.raises(ListenerError, match="not a directory"):
        check_private_dir(h.socket.parent)
    r = run_nexusd(h)
    assert r.returncode == 3 and "not a directory" in r.stderr


def test_a_live_daemon_is_never_replaced(daemon):
    before = os.lstat(daemon.socket).st_ino
    r = run_nexusd(daemon)
    assert r.returncode == 3
    assert "another nexusd" in r.stderr
    assert "Traceback" not in r.stderr
    assert os.lstat(daemon.socket).st_ino == before
    assert hello_status(daemon.socket).pid == daemon.proc.pid


def test_a_live_socket_without_our_lock_is_not_replaced(daemon_factory):
    """Someone else listening (an older daemon, a service manager) on the path: refuse, never unlink."""
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700)
    other = socket.socket(socket.AF_UNIX)
    other.bind(str(h.socket))
    other.listen(1)
    try:
        r = run_nexusd(h)
        assert r.returncode == 3 and "already listening" in r.stderr
        assert h.socket.exists()
    finally:
        other.close()


def test_a_stale_socket_is_replaced(daemon):
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    daemon.proc = None
    assert daemon.socket.exists()  # left behind by the kill
    daemon.start()
    assert hello_status(daemon.socket).pid == daemon.proc.pid


def test_a_stale_socket_from_elsewhere_is_replaced_but_a_regular_file_is_not(daemon_factory):
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(h.socket))
    dead.close()
    h.start()
    assert hello_status(h.socket).pid == h.proc.pid
    h.stop()
    assert not h.socket.exists()
    h.socket.write_text("precious")
    r = run_nexusd(h)
    assert r.returncode == 3 and "not a socket" in r.stderr
    assert h.socket.read_text() == "precious"


def test_a_peer_of_another_uid_gets_one_error_and_is_closed(daemon):
    """Tests run as root; the child switches to nobody. To let it reach the socket at all, a hard link to the
    socket inode sits in a world-searchable directory and the inode is made 0666 (a deliberate misconfiguration:
    the uid check is the second wall behind the file modes, and this test proves it stands alone)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch uid")
    pub = short_tmpdir()
    os.chmod(pub, 0o755)
    link = pub / "l.sock"
    os.link(daemon.socket, link)
    os.chmod(link, 0o666)
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody, then connect
        try:
            os.close(rd)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            s.connect(str(link))
            s.sendall(b'{"type":"hello","proto":1,"role":"admin","name":"x"}\n{"type":"status"}\n')
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            os.write(wr, f"{os.getuid()} ".encode() + data)
        except BaseException as e:
            os.write(wr, f"child failed: {e!r}".encode())
        finally:
            os._exit(0)
    os.close(wr)
    out = b""
    while chunk := os.read(rd, 65536):
        out += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    uid, _, rest = out.decode().partition(" ")
    assert uid == str(NOBODY)
    lines = rest.strip().splitlines()
    assert len(lines) == 1, lines
    err = p.decode_server(lines[0].encode())
    assert isinstance(err, p.Error) and err.code == "forbidden"
    assert hello_status(daemon.socket).connections == {"admin": 1}


def test_an_inherited_socket_is_adopted_and_never_unlinked(daemon_factory):
    h = daemon_factory(autostart=False)
    h.socket.parent.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(h.socket))
    listener.listen(16)
    env = {**h.env, "LISTEN_FDS": "1"}
    env.pop("LISTEN_PID", None)
    fd = listener.fileno()
    # A tiny exec wrapper puts the socket on fd 3, as systemd does.
    wrapper = (
        f"import os, sys; os.dup2({fd}, 3); os.environ['LISTEN_PID'] = str(os.getpid()); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", wrapper, "-m", "nexusd.cli.daemon_main", *h.args],
        env=env,
        pass_fds=(fd,),
    )
    try:
        import time

        deadline = time.monotonic() + 10
        while True:
            try:
                st = hello_status(h.socket)
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        assert st.pid == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        listener.close()
    assert h.socket.exists()  # the service manager's socket stays


def test_nofile_soft_limit_is_raised_to_hard(daemon):
    limits = Path(f"/proc/{daemon.proc.pid}/limits").read_text()
    line = next(ln for ln in limits.splitlines() if ln.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    assert soft == hard or int(soft) >= 1 << 20
