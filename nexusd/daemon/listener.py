"""The listening socket: a private directory, a 0600 socket from birth, and never a live daemon's socket replaced.

anyio's ``create_unix_listener`` unlinks whatever sits at the path and chmods after bind; both are wrong for
us, so the socket is bound here by hand and handed to anyio afterwards.

A socket file removed while the daemon runs (issue 34: a silent outage that never ended: hooks denied, the
daemon said nothing, a new daemon refused because the old one held the lock) is noticed by ``watch_socket``
within a second, logged, and bound again at the same path (0600 from birth, in the same checked directory),
also when the socket came from a service manager. Whatever else sits at the path is never removed unless it
is a dead socket; a live one or a file in the way is logged until it is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger("nexusd")
WATCH_INTERVAL = 1.0  # seconds between checks that the socket file is still ours


class ListenerError(RuntimeError):
    """Why the daemon cannot listen; the message is shown to the person as is."""


@dataclass
class BoundSocket:
    sock: socket.socket
    path: Path | None  # None when adopted from a service manager: never unlink or chmod it
    lock_fd: int | None
    ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the socket file we bound
    # sockets bound again after the file was removed (the newest last), and the path they were bound at
    rebound: list[socket.socket] = field(default_factory=list)
    rebound_path: Path | None = None
    rebound_ident: tuple[int, int] | None = None

    def release(self) -> None:
        """Remove our socket (only if it is still the one we bound) and drop the lock."""
        for path, ident in ((self.path, self.ident), (self.rebound_path, self.rebound_ident)):
            if path is None:
                continue
            try:
                st = os.lstat(path)
                if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == ident:
                    os.unlink(path)
            except OSError:
                pass
        for sock in self.rebound:
            with contextlib.suppress(OSError):
                sock.close()
        self.rebound.clear()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def check_private_dir(path: Path, *, create: bool = True) -> None:
    """The socket's directory must be a real directory owned by us with no group/other bits."""
    if create and not os.path.lexists(path):
        old = os.umask(0o077)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        finally:
            os.umask(old)
    try:
        st = os.lstat(path)
    except FileNotFoundError as e:
        raise ListenerError(f"socket directory {path} does not exist") from e
    if not stat.S_ISDIR(st.st_mode):
        raise ListenerError(f"socket directory {path} is not a directory (a symlink or file is in the way)")
    if st.st_uid != os.geteuid():
        raise ListenerError(f"socket directory {path} is owned by uid {st.st_uid}, not by us ({os.geteuid()})")
    if st.st_mode & 0o077:
        raise ListenerError(
            f"socket directory {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700 (chmod 700 {path})"
        )


def _is_live(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError as e:
            # Anything else (EAGAIN: a live daemon's backlog is full) counts as live: never replace it.
            return e.errno not in (errno.ECONNREFUSED, errno.ENOENT)
        return True


def bind_socket(path: Path, backlog: int = 4096) -> BoundSocket:
    """Lock, refuse a live socket, replace a stale one, bind with umask 0177 so it is 0600 from birth."""
    check_private_dir(path.parent)
    lock_path = path.with_name(path.name + ".lock")
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            raise ListenerError(f"another nexusd is running on {path} (it holds {lock_path})") from e
        if os.path.lexists(path):
            st = os.lstat(path)
            if not stat.S_ISSOCK(st.st_mode):
                raise ListenerError(f"{path} exists and is not a socket; refusing to remove it")
            if _is_live(path):
                raise ListenerError(f"another nexusd is already listening on {path}")
            os.unlink(path)  # stale: its daemon is gone
        sock, ident = _bind_new(path, backlog)  # umask 0177: 0600 from birth (and chmod, belt and braces)
        return BoundSocket(sock, path, lock_fd, ident)
    except BaseException:
        os.close(lock_fd)
        raise


def _bind_new(path: Path, backlog: int) -> tuple[socket.socket, tuple[int, int]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as e:
        sock.close()
        raise ListenerError(f"cannot bind {path}: {e.strerror}") from e
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    sock.setblocking(False)
    st = os.lstat(path)
    return sock, (st.st_dev, st.st_ino)


def socket_path(bound: BoundSocket) -> Path | None:
    """The path clients connect to: ours, or the one a service manager bound (from the socket itself)."""
    if bound.path is not None:
        return bound.path
    try:
        name = bound.sock.getsockname()
    except OSError:
        return None
    return Path(name) if isinstance(name, str) and name.startswith("/") else None


def check_socket(bound: BoundSocket, path: Path) -> str | None:
    """None while ``path`` is a socket we listen on; else what is wrong: "missing", "stale" (a dead socket
    someone put there), "occupied" (a live socket that is not ours: never replaced), "blocked" (not a socket)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "blocked"
    if not stat.S_ISSOCK(st.st_mode):
        return "blocked"
    ident = (st.st_dev, st.st_ino)
    if ident in (bound.ident, bound.rebound_ident):
        return None
    if bound.path is None and bound.rebound_ident is None:
        # adopted from a service manager: its file's identity was never ours to record; ask the socket itself
        return None if _is_live(path) else "stale"
    return "occupied" if _is_live(path) else "stale"


def rebind(bound: BoundSocket, path: Path, backlog: int = 4096) -> socket.socket:
    """Bind ``path`` again (0600 from birth, the directory checked as at start); a dead socket there is
    replaced, nothing else. Raises ListenerError."""
    check_private_dir(path.parent, create=True)
    if os.path.lexists(path):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or _is_live(path):
            raise ListenerError(f"{path} is taken by something that is not this daemon's socket; not removed")
        os.unlink(path)
    sock, ident = _bind_new(path, backlog)
    bound.rebound.append(sock)
    bound.rebound_path, bound.rebound_ident = path, ident
    return sock


async def watch_socket(
    bound: BoundSocket,
    serve: Callable[[socket.socket], Awaitable[asyncio.AbstractServer]],
    interval: float = WATCH_INTERVAL,
) -> None:
    """Every ``interval`` seconds: is the socket file still ours? If it was removed (or a dead socket put in
    its place), say so and serve on a new one at the same path; anything else in the way is logged (once
    per change) and left alone. Runs for the daemon's life; the servers it started close with it."""
    path = socket_path(bound)
    if path is None:
        return
    servers: list[asyncio.AbstractServer] = []
    said: str | None = None
    try:
        while True:
            await asyncio.sleep(interval)
            what = check_socket(bound, path)
            if what is None:
                said = None
                continue
            if what in ("missing", "stale"):
                try:
                    sock = rebind(bound, path)
                    servers.append(await serve(sock))
                except (ListenerError, OSError) as e:
                    if said != str(e):
                        log.error(
                            "socket file gone and cannot be bound again; clients cannot connect",
                            socket=str(path),
                            error=str(e),
                        )
                        said = str(e)
                    continue
                log.error(
                    "socket file was removed (or replaced by a dead socket); bound again: clients can connect",
                    socket=str(path),
                    found=what,
                )
                said = None
            elif said != what:
                log.error(
                    "socket path taken by something else; clients cannot reach this daemon until it is removed",
                    socket=str(path),
                    found=what,
                )
                said = what
    finally:
        for server in servers:
            server.close()


def adopt_socket(sock: socket.socket) -> BoundSocket:
    """A socket from systemd/launchd: the service manager owns its path and mode."""
    sock.setblocking(False)
    return BoundSocket(sock, None, None)


def raise_nofile_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit: 10,000 pending requests means 10,000 connections."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:
        target = 1 << 20
    if os.uname().sysname == "Darwin":
        target = min(target, 10240)  # OPEN_MAX
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard
