"""Who is on the other end: kernel credentials taken once at accept, and process ancestry for attribution.

The uid is the security boundary. Pids are attribution (they can be recycled, CVE-2019-6133), and the
self-approval guard built on them is a speed bump against an agent answering itself, not a wall: a
process that double-forks away from its agent escapes any ancestry check.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
from dataclasses import dataclass

_SO_PEERCRED = getattr(socket, "SO_PEERCRED", 17)
_SOL_LOCAL = 0  # macOS
_LOCAL_PEERCRED = 0x001
_LOCAL_PEERPID = 0x002


@dataclass(frozen=True, slots=True)
class PeerCred:
    uid: int
    gid: int
    pid: int | None  # None when the platform does not tell
    ppid: int | None = None  # the peer's parent at accept time: for adapters, the agent process
    start: int | None = None  # the peer's start time at accept (clock ticks since boot): its pid may be reused


def with_parent(cred: PeerCred) -> PeerCred:
    """``cred`` with the peer's parent and start time, read once at accept (one read of /proc on Linux)."""
    if cred.pid is None:
        return cred
    if _LINUX:
        st = _stat(cred.pid)
        if st is not None:
            return PeerCred(cred.uid, cred.gid, cred.pid, st[1], st[2])
    return PeerCred(cred.uid, cred.gid, cred.pid, parent_pid(cred.pid))


def peer_credentials(sock: socket.socket) -> PeerCred:
    """Raises OSError when the kernel will not say; the caller treats that as a stranger."""
    if sys.platform.startswith("linux"):
        raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERCRED, struct.calcsize("=iII"))
        pid, uid, gid = struct.unpack("=iII", raw)
        return PeerCred(uid=uid, gid=gid, pid=pid if pid > 0 else None)
    if sys.platform == "darwin":
        # struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, struct.calcsize("=IIh2x16I"))
        fields = struct.unpack("=IIh2x16I", raw)
        uid, ngroups = fields[1], fields[2]
        gid = fields[3] if ngroups > 0 else uid
        try:
            pid = struct.unpack("=i", sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))[0]
        except OSError:
            pid = None
        return PeerCred(uid=uid, gid=gid, pid=pid)
    # Other BSDs: getpeereid via the socket module is not exposed; refuse rather than guess.
    raise OSError("peer credentials are not supported on this platform")


def parent_pid(pid: int | None) -> int | None:
    if pid is None:
        return None
    if sys.platform.startswith("linux"):
        # /proc/<pid>/stat is what psutil reads too; reading it directly keeps accept cheap.
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            return int(data[data.rindex(b")") + 2 :].split(None, 2)[1])
        except (OSError, ValueError, IndexError):
            return None
    try:
        import psutil

        return psutil.Process(pid).ppid()
    except Exception:
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(comm, ppid, start time in clock ticks) from ``/proc/<pid>/stat``, None if the process is gone.

    What psutil reads for ``name()``, ``ppid()`` and ``create_time()``, in one read instead of one each: an
    ask walks these chains while its requester waits (issue 21: the guard was most of an ask's CPU)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        right = data.rindex(b")")
        fields = data[right + 2 :].split()
        return os.fsdecode(data[data.index(b"(") + 1 : right]), int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def ancestors(pid: int) -> list[int] | None:
    """The pid itself and every ancestor up to init; None if the process is gone (fail closed).

    Like psutil's ``parents()``: the walk stops at a parent that is gone or younger than its child (its
    pid was recycled)."""
    if not _LINUX:
        return _ancestors_psutil(pid)
    st = _stat(pid)
    if st is None:
        return None
    chain = [pid]
    _, ppid, started = st
    while ppid and len(chain) < _MAX_CHAIN:
        parent = _stat(ppid)
        if parent is None or parent[2] > started:
            break
        chain.append(ppid)
        _, ppid, started = parent
    return chain


_LINUX = sys.platform.startswith("linux")
_MAX_CHAIN = 4096  # a cycle cannot happen in /proc; the bound only keeps a corrupt read from looping


def _ancestors_psutil(pid: int) -> list[int] | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        return [pid, *(p.pid for p in proc.parents())]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


# Agents often run hooks through a shell (`/bin/sh -c "nexus-hook claude"`) or a wrapper, so the hook's
# parent may be a transient process rather than the agent; the agent's own Bash tool descends from the
# agent, not from that shell. Names as psutil reports them (comm) or as the executable's basename.
SHELLS = frozenset({"sh", "dash", "bash", "zsh", "fish", "ksh", "mksh", "ash", "yash", "tcsh", "csh", "busybox"})
WRAPPERS = frozenset(
    {"env", "timeout", "nice", "nohup", "ionice", "setsid", "stdbuf", "chrt", "taskset", "flock", "time", "xargs"}
)
MAX_WRAPPER_HOPS = 8


def _runs_a_command(argv: list[str]) -> bool:
    """A shell started with ``-c`` or a script is transient; an interactive or login shell is not.

    Stopping at interactive shells matters: walking past one would make its terminal or multiplexer
    (a tmux server above every pane) "the agent", and answers from a UI in another pane would be refused.
    """
    for arg in argv[1:]:
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            return True
        if arg.startswith(("-", "+")):
            continue
        return True  # a script file (or an option's value: still not an interactive shell)
    return False


def resolve_agent(pid: int | None) -> int | None:
    """The first process at or above ``pid`` that is not a transient shell or wrapper (at most 8 hops)."""
    if pid is None or pid <= 1:
        return pid
    import psutil

    current = pid
    for _ in range(MAX_WRAPPER_HOPS):
        try:
            names, parent = _names_and_parent(current)
            if not (names & WRAPPERS or (names & SHELLS and _runs_a_command(_cmdline(current)))):
                return current
        except psutil.Error:
            return current
        if parent <= 1:
            return current
        current = parent
    return current


def _cmdline(pid: int) -> list[str]:
    """psutil's ``cmdline()`` (the same parsing), read directly on Linux; raises ``psutil.Error`` if gone."""
    import psutil

    if not _LINUX:
        return psutil.Process(pid).cmdline()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = os.fsdecode(f.read())
    except OSError as e:
        raise psutil.NoSuchProcess(pid) from e
    if not data:
        return []
    sep = "\x00" if data.endswith("\x00") else " "
    if data.endswith(sep):
        data = data[:-1]
    argv = data.split(sep)
    if sep == "\x00" and len(argv) == 1 and " " in data:  # a process that rewrote its command line
        argv = data.split(" ")
    return argv


def _names_and_parent(pid: int) -> tuple[set[str], int]:
    """The names psutil would report for ``pid`` (``name()`` and the executable's basename) and its parent.

    On Linux one read of ``/proc/<pid>/stat`` and one readlink; psutil (several reads) only for a name the
    kernel truncated, and elsewhere. Raises ``psutil.Error`` when the process is gone."""
    import psutil

    st = _stat(pid) if _LINUX else None
    if st is None or len(st[0]) >= 15:  # psutil completes a truncated comm from the command line
        proc = psutil.Process(pid)
        names = {proc.name()}
        with contextlib.suppress(psutil.Error):
            names.add(os.path.basename(proc.exe()))
        return names, proc.ppid()
    names = {st[0]}
    with contextlib.suppress(OSError):
        exe = os.readlink(f"/proc/{pid}/exe").split("\x00")[0]
        if exe.endswith(" (deleted)") and not os.path.exists(exe):
            exe = exe[: -len(" (deleted)")]
        names.add(os.path.basename(exe))
    return names, st[1]
