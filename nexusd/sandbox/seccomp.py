"""A seccomp filter that closes host Unix sockets to a sandboxed command.

``--unshare-net`` gives the sandbox its own network, but filesystem sockets (docker.sock, the session
D-Bus, ssh-agent, gpg-agent, any listening socket of the host) and abstract sockets stay reachable
through the bind-mounted file system. Masking every socket path cannot be proven complete (abstract
sockets have no path at all), so the filter refuses the creation of ``AF_UNIX`` sockets instead, the
way sandbox-runtime does: ``socket(AF_UNIX, ...)`` fails with EPERM. A *datagram* ``socketpair`` is
refused too: a datagram socket can ``sendto`` any named socket, connected or not (``/dev/log``, the
journal, a service's notify socket), so an unnamed pair was a way out. Stream and seqpacket pairs stay
allowed (a stream socket refuses an address on ``sendto``; a seqpacket one ignores it). Not covered, by
design: descriptors inherited from outside.

With ``allow_unix_sockets`` the filter lets a Unix *stream* socket be made, and a second filter, installed
inside the sandbox by the supervisor's loader (``notify_filter``), hands every ``connect`` to nexusd's
supervisor outside (``nexusd/sandbox/unixsup.py``), which connects only the named sockets itself.

The program is classic BPF, written out here (a dozen instructions) rather than pulled in through
libseccomp bindings, which are not installable from the package index. bubblewrap installs it with
``--seccomp FD`` after setting ``no_new_privs``; the plan feeds the compiled file on descriptor 3
(``sh -c 'exec "$@" 3<"$0"'``), so a plan stays a plain argv.

Also refused: ``io_uring_setup`` (io_uring can create sockets without the ``socket`` system call), and
every system call of a foreign ABI (i386 ``int 0x80`` and x32 on x86_64), where the numbers differ.
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import secrets
import struct
from pathlib import Path
from typing import NamedTuple

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
RET_USER_NOTIF = 0x7FC00000  # SECCOMP_RET_USER_NOTIF: the supervisor answers (nexusd/sandbox/unixsup.py)
# struct seccomp_data: nr, arch, then the arguments as u64 (their low 32 bits first on little endian)
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24
_X32_BIT = 0x40000000
AF_UNIX = 1
SOCK_STREAM, SOCK_DGRAM = 1, 2
_SOCK_TYPE_MASK = 0xF  # the type without SOCK_NONBLOCK / SOCK_CLOEXEC


class Arch(NamedTuple):
    audit: int  # AUDIT_ARCH_*
    socket: int
    socketpair: int
    connect: int
    io_uring_setup: int
    seccomp: int


ARCHES: dict[str, Arch] = {
    "x86_64": Arch(0xC000003E, socket=41, socketpair=53, connect=42, io_uring_setup=425, seccomp=317),
    "aarch64": Arch(0xC00000B7, socket=198, socketpair=199, connect=203, io_uring_setup=425, seccomp=277),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _arch(machine: str) -> Arch:
    if machine not in ARCHES:
        raise ValueError(f"no seccomp filter for {machine!r} (known: {', '.join(ARCHES)})")
    return ARCHES[machine]


def _native_only(machine: str, arch: Arch) -> list[bytes]:
    """Every call of a foreign ABI (i386 ``int 0x80``, x32) is refused: their numbers differ; then the
    call's number is loaded."""
    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, arch.audit),  # native ABI: go on
        _insn(_RET_K, 0, 0, RET_EPERM),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, RET_EPERM)]  # x32 system calls
    return prog


def unix_socket_filter(machine: str, *, named: bool = False) -> bytes:
    """The compiled program (``struct sock_filter[]``) for ``machine`` (``platform.machine()``).

    Always refused: ``io_uring_setup``, a datagram ``socketpair(AF_UNIX)`` (a datagram socket may
    ``sendto`` any named socket, connected or not: ``/dev/log``, the journal, a service's notify socket).
    ``named=False``: ``socket(AF_UNIX, ...)`` too. ``named=True`` (``allow_unix_sockets``): a Unix *stream*
    socket may be made, because its only way to a peer is ``connect``, which the supervisor's filter
    (``notify_filter``) hands to nexusd; datagram and seqpacket Unix sockets stay refused."""
    arch = _arch(machine)
    prog = _native_only(machine, arch)
    # after the number is loaded: 0 io_uring? 1 refuse; 2 socket? 3 socketpair? 4 allow
    prog += [
        _insn(_JEQ_K, 0, 1, arch.io_uring_setup),
        _insn(_RET_K, 0, 0, RET_EPERM),
        _insn(_JEQ_K, 2, 0, arch.socket),
        _insn(_JEQ_K, 6, 0, arch.socketpair),
        _insn(_RET_K, 0, 0, RET_ALLOW),
    ]
    # socket: (named) a Unix stream socket is allowed, (closed) no Unix socket at all
    prog += [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG0),
        _insn(_JEQ_K, 0, 9, AF_UNIX),  # not AF_UNIX: allow (the last instruction)
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG1),
        _insn(_AND_K, 0, 0, _SOCK_TYPE_MASK),
        _insn(_JEQ_K, 6, 5, SOCK_STREAM) if named else _insn(_JEQ_K, 5, 5, SOCK_STREAM),  # allow : refuse
    ]
    # socketpair: a Unix datagram pair is refused
    prog += [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG0),
        _insn(_JEQ_K, 0, 4, AF_UNIX),  # not AF_UNIX: allow
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG1),
        _insn(_AND_K, 0, 0, _SOCK_TYPE_MASK),
        _insn(_JEQ_K, 0, 1, SOCK_DGRAM),  # datagram: refuse, else allow
        _insn(_RET_K, 0, 0, RET_EPERM),
        _insn(_RET_K, 0, 0, RET_ALLOW),
    ]
    return b"".join(prog)


def notify_filter(machine: str) -> bytes:
    """The supervisor's program, installed inside the sandbox by its loader: every ``connect`` waits for
    nexusd's supervisor, which makes the connection itself (``unixsup.py``); everything else passes on to
    the filter below (``unix_socket_filter(named=True)``)."""
    arch = _arch(machine)
    prog = _native_only(machine, arch)
    prog += [
        _insn(_JEQ_K, 0, 1, arch.connect),
        _insn(_RET_K, 0, 0, RET_USER_NOTIF),
        _insn(_RET_K, 0, 0, RET_ALLOW),
    ]
    return b"".join(prog)


def filter_file(state_dir: Path, machine: str | None = None, *, named: bool = False) -> Path:
    """The compiled filter under the state directory, written once (content-addressed, atomic, 0644)."""
    data = unix_socket_filter(machine or platform.machine(), named=named)
    directory = Path(state_dir) / "sandbox"
    path = directory / f"unix-deny-{hashlib.sha256(data).hexdigest()[:16]}.bpf"
    try:
        if path.read_bytes() == data:
            return path
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = directory / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"  # each writer its own (threads)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


_FD3 = ["/bin/sh", "-c", 'exec "$@" 3<"$0"']


def with_filter(bwrap_argv: list[str], filter_path: Path) -> list[str]:
    """``bwrap ... -- CMD`` as an argv that runs bwrap with the filter on descriptor 3."""
    split = bwrap_argv.index("--")
    argv = [*bwrap_argv[:split], "--seccomp", "3", *bwrap_argv[split:]]
    return [*_FD3, str(filter_path), *argv]


def split_filter(argv: list[str]) -> tuple[str | None, list[str]]:
    """The inverse of ``with_filter``: (the filter file to open on descriptor 3, bwrap's own argv). A
    generated script opens it itself (``3<FILE``) instead of starting a second shell."""
    if argv[:3] == _FD3 and len(argv) > 4:
        return argv[3], argv[4:]
    return None, list(argv)
