"""The listening socket: a private directory, a 0600 socket from birth, and never a live daemon's socket replaced.

anyio's ``create_unix_listener`` unlinks whatever sits at the path and chmods after bind; both are wrong for
us, so the socket is bound here by hand and handed to anyio afterwards.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path


class ListenerError(RuntimeError):
    """Why the daemon cannot listen; the message is shown to the person as is."""


@dataclass
class BoundSocket:
    sock: socket.socket
    path: Path | None  # None when adopted from a service manager: never unlink or chmod it
    lock_fd: int | None
    ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the socket file we bound

    def release(self) -> None:
        """Remove our socket (only if it is still the one we bound) and drop the lock."""
        if self.path is not None:
            try:
                st = os.lstat(self.path)
                if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self.ident:
                    os.unlink(self.path)
            except OSError:
                pass
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
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        except OSError as e:
            sock.close()
            raise ListenerError(f"cannot bind {path}: {e.strerror}") from e
        finally:
            os.umask(old)
        os.chmod(path, 0o600)  # belt and braces: the umask already made it so
        sock.listen(backlog)
        sock.setblocking(False)
        st = os.lstat(path)
        return BoundSocket(sock, path, lock_fd, (st.st_dev, st.st_ino))
    except BaseException:
        os.close(lock_fd)
        raise


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
