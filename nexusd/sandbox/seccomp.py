"""A seccomp filter that closes host Unix sockets to a sandboxed command.

``--unshare-net`` gives the sandbox its own network, but filesystem sockets (docker.sock, the session
D-Bus, ssh-agent, gpg-agent, any listening socket of the host) and abstract sockets stay reachable
through the bind-mounted file system. Masking every socket path cannot be proven complete (abstract
sockets have no path at all), so the filter refuses the creation of ``AF_UNIX`` sockets instead, the
way sandbox-runtime does: ``socket(AF_UNIX, ...)`` fails with EPERM. What it does not cover, by design:
``socketpair`` (an unnamed connected pair reaches nothing), descriptors inherited from outside.

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

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data (arg0's low 32 bits on little endian)
_X32_BIT = 0x40000000
AF_UNIX = 1

# machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup)
ARCHES: dict[str, tuple[int, int, int]] = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str) -> bytes:
    """The compiled program (``struct sock_filter[]``) for ``machine`` (``platform.machine()``)."""
    if machine not in ARCHES:
        raise ValueError(f"no seccomp filter for {machine!r} (known: {', '.join(ARCHES)})")
    arch, nr_socket, nr_io_uring = ARCHES[machine]
    prog = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, arch),  # native ABI: go on
        _insn(_RET_K, 0, 0, RET_EPERM),  # a foreign ABI: refuse every call
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, RET_EPERM)]  # x32 system calls
    prog += [
        _insn(_JEQ_K, 0, 1, nr_io_uring),
        _insn(_RET_K, 0, 0, RET_EPERM),
        _insn(_JEQ_K, 1, 0, nr_socket),
        _insn(_RET_K, 0, 0, RET_ALLOW),
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG0),
        _insn(_JEQ_K, 0, 1, AF_UNIX),
        _insn(_RET_K, 0, 0, RET_EPERM),
        _insn(_RET_K, 0, 0, RET_ALLOW),
    ]
    return b"".join(prog)


def filter_file(state_dir: Path, machine: str | None = None) -> Path:
    """The compiled filter under the state directory, written once (content-addressed, atomic, 0644)."""
    data = unix_socket_filter(machine or platform.machine())
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
