"""Adopting a listening socket handed over by a service manager (systemd LISTEN_FDS, launchd).

An adopted socket belongs to the service manager: the daemon never unlinks or chmods it. The kernel
queues connections on it while the daemon starts, so a client that connects during start-up is served
once the daemon accepts, never refused.

Everything is checked before the socket is used, and anything unexpected refuses to start (fail closed):
the environment must be meant for this process (``LISTEN_PID``), the descriptor must be a listening
Unix *stream* socket bound to a *path* (abstract sockets have no permissions), and the socket must not
be connectable by other users (``SocketMode=0600``; we may not chmod it, so we refuse instead).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
from collections.abc import Callable, MutableMapping
from pathlib import Path

SD_LISTEN_FDS_START = 3
FD_NAME = "nexusd"  # FileDescriptorName= in nexusd.socket
LAUNCHD_SOCKET_NAME = "Listeners"  # the key under Sockets in the LaunchAgent plist
_MAX_FDS = 64  # far more than any sane unit passes; a bigger number is garbage in the environment


class ActivationError(RuntimeError):
    """The environment claims a socket but it is not one we can serve on: refuse to start."""


def inherited_listener(
    environ: MutableMapping[str, str] | None = None,
    *,
    pid: int | None = None,
    first_fd: int = SD_LISTEN_FDS_START,
    launchd: Callable[[str], list[int] | None] | None = None,
) -> socket.socket | None:
    """The listening Unix stream socket passed by systemd or launchd, or None when not socket-activated.

    Raises ActivationError when a socket was handed over but is unusable; the daemon must then exit
    non-zero rather than bind a socket of its own. The parameters exist for tests only.
    """
    env = os.environ if environ is None else environ
    if "LISTEN_FDS" in env:
        return _systemd_listener(env, os.getpid() if pid is None else pid, first_fd)
    if sys.platform == "darwin" or launchd is not None:
        return _launchd_listener(launchd)
    return None


def _systemd_listener(env: MutableMapping[str, str], pid: int, first_fd: int) -> socket.socket | None:
    fds, listen_pid, names = env.get("LISTEN_FDS", ""), env.get("LISTEN_PID"), env.get("LISTEN_FDNAMES")
    # Like sd_listen_fds(unset_environment=1): children (policy hooks, sandboxed commands) must never
    # believe these descriptors are theirs.
    for var in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        env.pop(var, None)
    if listen_pid is None or not listen_pid.isdigit() or int(listen_pid) != pid:
        # sd_listen_fds semantics: without a matching LISTEN_PID the variables were meant for another
        # process (e.g. they leaked from our parent); there is nothing of ours on fd 3.
        return None
    if not fds.isdigit():
        raise ActivationError(f"LISTEN_FDS={fds!r} is not a number")
    count = int(fds)
    if count == 0:
        return None
    if count > _MAX_FDS:
        raise ActivationError(f"LISTEN_FDS={count} is implausible")
    fd_names = names.split(":") if names is not None else None
    if fd_names is not None and len(fd_names) != count:
        raise ActivationError(f"LISTEN_FDNAMES has {len(fd_names)} names for LISTEN_FDS={count}")
    if count == 1:
        chosen = first_fd
    else:
        # Several sockets: take the one nexusd.socket names, and only if exactly one has that name.
        matches = [i for i, n in enumerate(fd_names or []) if n == FD_NAME]
        if len(matches) != 1:
            raise ActivationError(
                f"LISTEN_FDS={count}: expected exactly one socket named {FD_NAME!r} in LISTEN_FDNAMES={names!r}"
            )
        chosen = first_fd + matches[0]
    sock = _adopt(chosen, "systemd")
    # The others are not ours to serve; our copies must not leak into children either.
    for fd in range(first_fd, first_fd + count):
        if fd != chosen:
            with contextlib.suppress(OSError):
                os.close(fd)
    return sock


def _launchd_listener(launchd: Callable[[str], list[int] | None] | None) -> socket.socket | None:
    if launchd is None:
        from nexusd.daemon import launchd as launchd_module

        launchd = launchd_module.activate_socket
    try:
        fds = launchd(LAUNCHD_SOCKET_NAME)
    except OSError as e:
        raise ActivationError(f"launchd socket activation failed: {e}") from e
    if fds is None:
        return None  # not started by launchd, or the plist has no socket of that name
    if len(fds) != 1:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise ActivationError(f"launchd passed {len(fds)} sockets for {LAUNCHD_SOCKET_NAME!r}; expected one")
    return _adopt(fds[0], "launchd")


def _adopt(fd: int, manager: str) -> socket.socket:
    """Wrap fd in a socket object after checking it is something we may serve on."""
    try:
        st = os.fstat(fd)
    except OSError as e:
        raise ActivationError(f"{manager} socket fd {fd} is not open: {e}") from e
    if not stat.S_ISSOCK(st.st_mode):
        raise ActivationError(f"{manager} fd {fd} is not a socket")
    sock = socket.socket(fileno=fd)
    try:
        _check(sock, fd, manager)
    except BaseException:
        sock.detach()  # leave the descriptor as we found it; the caller exits
        raise
    os.set_inheritable(fd, False)
    return sock


def _check(sock: socket.socket, fd: int, manager: str) -> None:
    if sock.family != socket.AF_UNIX:
        family = getattr(sock.family, "name", sock.family)
        raise ActivationError(f"{manager} fd {fd} is a {family} socket, not AF_UNIX")
    so_type = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
    if so_type != socket.SOCK_STREAM:
        raise ActivationError(f"{manager} fd {fd} is not a stream socket (SO_TYPE={so_type}; use ListenStream=)")
    acceptconn = getattr(socket, "SO_ACCEPTCONN", None)
    if acceptconn is not None and not sock.getsockopt(socket.SOL_SOCKET, acceptconn):
        raise ActivationError(f"{manager} fd {fd} is not listening (use Accept=no)")
    path = listener_path(sock)
    if path is None:
        raise ActivationError(
            f"{manager} fd {fd} is an unnamed or abstract socket (no file permissions protect it); "
            "use a path in ListenStream="
        )
    problem = _reachable_by_others(Path(path))
    if problem:
        raise ActivationError(f"{manager} socket {path} {problem}; set SocketMode=0600")


def listener_path(sock: socket.socket) -> str | None:
    """The filesystem path a Unix socket is bound to, or None for unnamed and abstract sockets."""
    name: str | bytes = sock.getsockname()
    if isinstance(name, bytes):  # Linux returns abstract names as bytes starting with NUL
        return None
    if not name or name.startswith("\0"):
        return None
    return name


def _reachable_by_others(path: Path) -> str:
    """Why another user could connect to path ('' when only its owner can).

    Connecting needs write permission on the socket and search permission on every directory above it,
    so a 0666 socket under a 0700 directory is still private. Group and other are not told apart
    (conservative: any group/other bit counts).
    """
    try:
        st = path.lstat()
    except OSError as e:
        return f"cannot be inspected ({e.strerror})"
    if not stat.S_ISSOCK(st.st_mode):
        return "is not a socket file"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by us"
    if not st.st_mode & 0o022:
        return ""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except OSError:
            return ""  # cannot traverse it ourselves: nor can others
        if not mode & 0o011:
            return ""
    return f"has mode {stat.S_IMODE(st.st_mode):04o} and every directory above it is searchable by others"
