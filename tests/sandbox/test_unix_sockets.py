"""Host Unix sockets are closed to sandboxed commands (real bubblewrap, real listening sockets).

A listening socket of the host (docker.sock, the session bus, ssh-agent are the real-world cases) is
reachable through the bind-mounted file system and, for abstract sockets, through no path at all; the
seccomp filter refuses new AF_UNIX sockets, and ``[sandbox.network] allow_all_unix_sockets`` re-opens them.
"""

from __future__ import annotations

import contextlib
import platform
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.sandbox.plan import plan_command
from nexusd.sandbox.probe import probe
from nexusd.sandbox.runner import execute
from nexusd.sandbox.seccomp import (
    AF_UNIX,
    ARCHES,
    RET_ALLOW,
    RET_EPERM,
    RET_USER_NOTIF,
    notify_filter,
    unix_socket_filter,
)
from tests.sandbox.conftest import run_wrapped

SECRET = b"host-socket-secret"
# the base interpreter: a venv in a checkout under /tmp is hidden by the sandbox's own /tmp
PY = getattr(sys, "_base_executable", sys.executable)


@pytest.fixture(scope="module")
def found():
    p = probe()
    assert p.available and p.backend == "bwrap", p.reason
    assert p.checks.get("seccomp") == "ok", p.checks
    return p


class Listener:
    """A host socket that sends SECRET to whoever connects (path or abstract name)."""

    def __init__(self, address: str | bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            with conn, contextlib.suppress(OSError):  # a client that left at once (the race test's)
                conn.sendall(SECRET)

    def close(self) -> None:
        self.stop = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    # short (AF_UNIX paths are limited to 108 bytes), and not under /tmp, which the sandbox replaces
    root = Path(tempfile.mkdtemp(prefix="nxus", dir="/var/tmp"))
    ws = root / "ws"
    ws.mkdir()
    (root / "cfg").mkdir()
    yield root, ws
    shutil.rmtree(root, ignore_errors=True)


VIA = {"now": "runner"}


@pytest.fixture(autouse=True, params=["runner", "wrapper"])
def via(request: pytest.FixtureRequest) -> Iterator[str]:
    """Through ``nexusctl run``'s runner, and through the agent's wrapper (which opens the filter itself)."""
    VIA["now"] = str(request.param)
    yield VIA["now"]
    VIA["now"] = "runner"


def run_sandboxed(root: Path, ws: Path, found, code: str, policy: str = "") -> str:
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n" + policy)
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    if VIA["now"] == "wrapper":
        r = run_wrapped(store, found, f"{shlex.quote(PY)} -c {shlex.quote(code)}", ws, ws)
        return f"rc={r.rc} out={r.out} err={r.err}"
    plan = plan_command(f"{shlex.quote(PY)} -c {shlex.quote(code)}", str(ws), store, found, workspace=str(ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        rc = execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        out.seek(0)
        err.seek(0)
        return f"rc={rc} out={out.read().decode(errors='replace')} err={err.read()}"


CONNECT = """import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({addr!r})
print(s.recv(100).decode())
"""


@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_host_unix_socket_is_closed(world, found, kind):
    root, ws = world
    addr: str | bytes = str(root / "host.sock") if kind == "path" else f"\0nexus-test-{root.name}".encode()
    listener = Listener(addr)
    try:
        result = run_sandboxed(root, ws, found, CONNECT.format(addr=addr))
        assert SECRET.decode() not in result and "PermissionError" in result, result
        assert listener.accepted == 0
    finally:
        listener.close()


DGRAM_SEND = """import socket
try:
    a, b = socket.socketpair(socket.AF_UNIX, {kind})
    a.sendto(b"escaped", {addr!r})
    print("SENT")
except OSError as e:
    print("REFUSED", type(e).__name__)
"""


class DatagramListener:
    """A host datagram socket (``/dev/log``, the journal, a notify socket are the real-world cases)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)

    def received(self) -> list[bytes]:
        got = []
        while True:
            try:
                got.append(self.sock.recv(100))
            except BlockingIOError:
                return got

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("kind", ["socket.SOCK_DGRAM", "socket.SOCK_DGRAM | socket.SOCK_CLOEXEC"])
def test_a_datagram_pair_cannot_send_to_a_host_socket(world, found, kind):
    """An unnamed datagram pair may ``sendto`` any named socket: the filter refuses making one."""
    root, ws = world
    listener = DatagramListener(str(root / "log.sock"))
    try:
        result = run_sandboxed(root, ws, found, DGRAM_SEND.format(kind=kind, addr=str(root / "log.sock")))
        assert "REFUSED PermissionError" in result and "SENT" not in result, result
        assert listener.received() == []
    finally:
        listener.close()


def test_allow_all_unix_sockets_reopens_them(world, found):
    root, ws = world
    addr = str(root / "host.sock")
    listener = Listener(addr)
    try:
        result = run_sandboxed(
            root, ws, found, CONNECT.format(addr=addr), policy="[sandbox.network]\nallow_all_unix_sockets = true\n"
        )
        assert SECRET.decode() in result, result
    finally:
        listener.close()


def test_other_sockets_and_socketpair_still_work(world, found):
    root, ws = world
    code = (
        "import socket\na, b = socket.socketpair()\na.sendall(b'pair')\nprint(b.recv(4).decode())\n"
        "socket.socket(socket.AF_INET).close()\nprint('inet ok')\n"
    )
    result = run_sandboxed(root, ws, found, code)
    assert "pair" in result and "inet ok" in result, result


NAMED = """import socket
for addr in {addrs!r}:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr)
        print(repr(addr), "->", s.recv(100).decode())
    except OSError as e:
        print(repr(addr), "refused", type(e).__name__)
"""


class Named:
    """Two host sockets side by side: one named in ``allow_unix_sockets``, one not."""

    def __init__(self, root: Path) -> None:
        self.allowed_path = str(root / "named.sock")
        self.other_path = str(root / "other.sock")
        self.allowed = Listener(self.allowed_path)
        self.other = Listener(self.other_path)
        self.policy = f'[sandbox.network]\nallow_unix_sockets = ["{self.allowed_path}"]\n'

    def close(self) -> None:
        self.allowed.close()
        self.other.close()


@pytest.fixture
def named(world) -> Iterator[Named]:
    n = Named(world[0])
    yield n
    n.close()


def test_a_named_socket_opens_and_no_other(world, found, named):
    """allow_unix_sockets opens exactly the named socket: its lexical spellings reach it; the socket
    beside it, an abstract one, a relative spelling and a symlink to the named one stay closed."""
    root, ws = world
    (ws / "link.sock").symlink_to(named.allowed_path)
    abstract = Listener(f"\0nexus-named-{root.name}".encode())
    addrs = [
        named.allowed_path,
        str(root / "." / "ws" / ".." / "named.sock"),
        named.other_path,
        f"\0nexus-named-{root.name}",
        "named.sock",  # relative: refused whatever the directory
        str(ws / "link.sock"),
    ]
    try:
        code = f"import os; os.chdir({str(root)!r})\n" + NAMED.format(addrs=addrs)
        result = run_sandboxed(root, ws, found, code, policy=named.policy)
    finally:
        abstract.close()
    lines = result.split("\n")
    assert f"{named.allowed_path!r} -> {SECRET.decode()}" in result, result
    assert sum(1 for line in lines if f"-> {SECRET.decode()}" in line) == 2, result
    assert named.other.accepted == 0 and abstract.accepted == 0, result
    assert result.count("refused PermissionError") == 4, result
    assert named.allowed.accepted == 2


THREADED = """import socket, threading
got = []
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        got.append((path, s.recv(100).decode()))
    except OSError as e:
        got.append((path, type(e).__name__))
ts = [threading.Thread(target=connect, args=(p,)) for p in {paths!r} * 4]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sorted(got))
"""


def test_a_named_socket_opens_from_any_thread(world, found, named):
    """The notification names the calling thread, not its process: threads other than the main one (how
    Node, Go and the JVM connect) reach the named socket too, and still not the other."""
    root, ws = world
    code = THREADED.format(paths=[named.allowed_path, named.other_path])
    result = run_sandboxed(root, ws, found, code, policy=named.policy)
    assert result.count(f"('{named.allowed_path}', '{SECRET.decode()}')") == 4, result
    assert result.count(f"('{named.other_path}', 'PermissionError')") == 4, result
    assert named.other.accepted == 0


RACE = """import ctypes, socket, threading
libc = ctypes.CDLL(None, use_errno=True)
def sun(path):
    raw = path.encode()
    return (1).to_bytes(2, "little") + raw + b"\\0" * (108 - len(raw))
allowed, other = sun({allowed!r}), sun({other!r})
buf = ctypes.create_string_buffer(allowed, len(allowed))
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, other, len(other))
        ctypes.memmove(buf, allowed, len(allowed))
t = threading.Thread(target=flip)
t.start()
got = {{}}
for i in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rc = libc.connect(s.fileno(), buf, len(allowed))
    key = "ok" if rc == 0 else "errno%d" % ctypes.get_errno()
    got[key] = got.get(key, 0) + 1
    s.close()
stop = True
t.join()
# a Unix socket given an address that claims another family, and an inet socket given a Unix address
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
fake = (2).to_bytes(2, "little") + other[2:]
print("fake-family", libc.connect(u.fileno(), ctypes.create_string_buffer(fake, len(fake)), len(fake)))
i = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
print("inet-with-unix", libc.connect(i.fileno(), ctypes.create_string_buffer(other, len(other)), len(other)))
print("RACE", sorted(got.items()))
"""


def test_the_supervisor_connects_what_it_checked_not_what_memory_says_later(world, found, named):
    """TOCTOU: another thread of the command swaps the address between the named and another socket
    while connect() waits for the supervisor. The supervisor connects its own copy, so no connection ever
    reaches the other socket; an address lying about its family reaches nothing either."""
    root, ws = world
    code = RACE.format(allowed=named.allowed_path, other=named.other_path)
    result = run_sandboxed(root, ws, found, code, policy=named.policy)
    assert "RACE" in result and "fake-family -1" in result and "inet-with-unix -1" in result, result
    assert named.other.accepted == 0, result
    assert named.allowed.accepted > 0, result  # the race really ran against a working supervisor


def test_named_mode_keeps_datagram_sockets_closed_and_tcp_working(world, found, named):
    root, ws = world
    code = (
        "import socket\n"
        "try:\n    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n    print('DGRAM MADE')\n"
        "except OSError as e:\n    print('dgram', type(e).__name__)\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
        "c = socket.socket(); c.setblocking(False)\n"
        "try:\n    c.connect(srv.getsockname())\nexcept BlockingIOError:\n    pass\n"
        "a, _ = srv.accept(); a.sendall(b'tcp-ok'); c.setblocking(True); print(c.recv(6).decode())\n"
        "raise SystemExit(7)\n"
    )
    result = run_sandboxed(root, ws, found, code, policy=named.policy)
    assert result.startswith("rc=7 ") and "dgram PermissionError" in result and "tcp-ok" in result, result


def test_a_named_socket_where_the_command_may_write_stays_closed(world, found):
    """A socket in the workspace could be swapped for a symlink to any other: never opened."""
    root, ws = world
    inside = Listener(str(ws / "dev.sock"))
    try:
        policy = f'[sandbox.network]\nallow_unix_sockets = ["{ws / "dev.sock"}"]\n'
        (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n" + policy)
        store = PolicyStore(
            config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
        )
        assert not store.load()
        plan = plan_command("true", str(ws), store, found, workspace=str(ws))
        assert plan.unix_sockets == "closed" and "supervise" not in plan.argv
        assert "lies where the command may write" in plan.reason
        result = run_sandboxed(root, ws, found, CONNECT.format(addr=str(ws / "dev.sock")), policy=policy)
        assert "PermissionError" in result and inside.accepted == 0, result
    finally:
        inside.close()


def test_the_loader_never_runs_the_command_without_its_supervisor(tmp_path: Path) -> None:
    """No listener handed out (a descriptor that is not the pair): exit 126, the command not run."""
    from nexusd.sandbox import unixsup
    from nexusd.sandbox.seccomp import notify_filter

    marker = tmp_path / "ran"
    source = Path(unixsup.__file__).read_text()
    program = notify_filter(platform.machine()).hex()
    argv = [PY, "-I", "-S", "-c", source, "load", "99", program, "--", "/bin/touch", str(marker)]
    proc = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 126 and not marker.exists(), proc.stderr
    assert b"supervisor cannot be reached" in proc.stderr


def _bpf(prog: bytes, nr: int, arch: int, *args: int) -> int:
    """What a classic BPF program returns for one call (the few opcodes our filters use): the filters'
    meaning on every architecture we ship, not only on this machine's kernel."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns)):  # no loops in classic BPF: every jump goes forward
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc, pc = struct.unpack_from("=I", data, k)[0], pc + 1
        elif code == 0x54:  # and #k
            acc, pc = acc & k, pc + 1
        elif code in (0x15, 0x35):  # jeq / jge #k
            pc += 1 + (jt if (acc == k if code == 0x15 else acc >= k) else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
    raise AssertionError("ran off the program")


@pytest.mark.parametrize("machine", sorted(ARCHES))
@pytest.mark.parametrize("named", [False, True])
def test_filter_program_meaning(machine: str, named: bool) -> None:
    a = ARCHES[machine]
    prog = unix_socket_filter(machine, named=named)
    assert len(prog) % 8 == 0 and len(prog) // 8 < 40  # struct sock_filter is 8 bytes

    def ret(nr: int, *args: int) -> str:
        return {RET_ALLOW: "allow", RET_EPERM: "EPERM"}[_bpf(prog, nr, a.audit, *args)]

    nonblock, cloexec = 0o4000, 0o2000000
    assert (
        ret(a.socket, AF_UNIX, 1) == ret(a.socket, AF_UNIX, 1 | nonblock | cloexec) == ("allow" if named else "EPERM")
    )
    for kind in (2, 5, 3, 2 | cloexec):  # datagram, seqpacket, raw: never
        assert ret(a.socket, AF_UNIX, kind) == "EPERM"
    assert ret(a.socket, 2, 1) == ret(a.socket, 10, 2) == "allow"  # inet, inet6
    assert ret(a.socketpair, AF_UNIX, 1) == ret(a.socketpair, AF_UNIX, 5) == "allow"
    assert ret(a.socketpair, AF_UNIX, 2) == ret(a.socketpair, AF_UNIX, 2 | cloexec | nonblock) == "EPERM"
    assert ret(a.io_uring_setup) == "EPERM"
    assert ret(a.connect, 3, 0, 0) == ret(0) == "allow"
    assert _bpf(prog, a.socket, 0x40000003) == RET_EPERM  # i386
    if machine == "x86_64":
        assert _bpf(prog, a.socket | 0x40000000, a.audit, 2, 1) == RET_EPERM  # x32
    notify = notify_filter(machine)
    assert _bpf(notify, a.connect, a.audit, 3, 0, 0) == RET_USER_NOTIF
    assert _bpf(notify, a.socket, a.audit, AF_UNIX, 1) == _bpf(notify, 0, a.audit) == RET_ALLOW
    assert _bpf(notify, a.connect, 0x40000003) == RET_EPERM
    with pytest.raises(ValueError):
        unix_socket_filter("sparc64")


def test_addresses_and_arguments_the_supervisor_refuses() -> None:
    """Pure: what ``unix_path`` makes of a caller's ``sockaddr_un`` (None is EACCES), and a malformed
    command line never runs anything (exit 126)."""
    from nexusd.sandbox import unixsup

    family = (1).to_bytes(2, sys.byteorder)
    assert unixsup.unix_path(b"") is None and unixsup.unix_path(family) is None  # unnamed
    assert unixsup.unix_path(family + b"\0abstract") is None
    assert unixsup.unix_path(family + b"relative.sock\0") is None
    assert unixsup.unix_path(family + b"/run/./x/../docker.sock\0junk") == "/run/docker.sock"
    assert unixsup.unix_path(family + b"/run/docker.sock") == "/run/docker.sock"  # no NUL: the length says
    long = b"/" + b"a" * 200
    assert unixsup.unix_path(family + long) == "/" + "a" * 107  # the kernel reads at most sun_path's 108
    with pytest.raises(OSError):
        unixsup.sockaddr_un("/" + "a" * 200)
    for args in (
        [],
        ["supervise"],
        ["supervise", "/x"],
        ["supervise", "/x", "--"],
        ["load", "3"],
        ["bogus", "--", "x"],
    ):
        assert unixsup.main(args) == unixsup.EXIT_REFUSED, args
