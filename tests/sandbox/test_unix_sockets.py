"""Host Unix sockets are closed to sandboxed commands (real bubblewrap, real listening sockets).

A listening socket of the host (docker.sock, the session bus, ssh-agent are the real-world cases) is
reachable through the bind-mounted file system and, for abstract sockets, through no path at all; the
seccomp filter refuses new AF_UNIX sockets, and ``[sandbox.network] allow_all_unix_sockets`` re-opens them.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import struct
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
            with conn:
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


def test_single_socket_allowances_are_named_as_not_enforceable(world, found):
    root, ws = world
    (root / "cfg" / "policy.toml").write_text(
        '[sandbox]\nenabled = true\n[sandbox.network]\nallow_unix_sockets = ["/run/docker.sock"]\n'
    )
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    plan = plan_command("true", str(ws), store, found, workspace=str(ws))
    assert plan.allowed and "--seccomp" in plan.argv
    assert "allow_all_unix_sockets" in plan.reason and "/run/docker.sock" in plan.reason


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
