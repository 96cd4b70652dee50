"""The real file system behind the ``FileSystem`` protocol: the classifier's only I/O.

The daemon injects this; tests and ``nexusctl check --offline`` may inject any other world. Every
method answers conservatively instead of raising: an unreadable file has no size and no head.
"""

from __future__ import annotations

import glob as _glob
import itertools
import os

_O_PATH = getattr(os, "O_PATH", 0) if os.path.isdir("/proc/self/fd") else 0


def _kernel_realpath(path: str) -> str | None:
    """The kernel's own resolution of an existing path (open O_PATH, read /proc/self/fd/N): 3 syscalls
    instead of an lstat per component. None (use ``os.path.realpath``) for anything unusual: a missing
    or dangling path, a loop, a deleted directory, or a target that is not a plain path (pipe:[..])."""
    if not path.startswith("/") or "\x00" in path:
        return None
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    finally:
        os.close(fd)
    if not target.startswith("/") or target.endswith(" (deleted)"):
        return None
    return target


class RealFileSystem:
    """``nexusd.core.model.FileSystem`` over ``os``."""

    def realpath(self, path: str) -> str:
        fast = _kernel_realpath(path) if _O_PATH else None
        if fast is not None:
            return fast
        try:
            return os.path.realpath(path)
        except (OSError, ValueError):
            return os.path.normpath(path)

    def lexists(self, path: str) -> bool:
        try:
            return os.path.lexists(path)
        except (OSError, ValueError):
            return False

    def size(self, path: str) -> int | None:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return st.st_size if not os.path.isdir(path) else None

    def head(self, path: str, n: int) -> bytes | None:
        # O_NONBLOCK so a FIFO planted in the workspace cannot hang the daemon.
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        except (OSError, ValueError):
            return None
        try:
            import stat

            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return os.read(fd, n)
        except OSError:
            return None
        finally:
            os.close(fd)

    def glob(self, pattern: str, limit: int) -> list[str]:
        """What bash would expand ``pattern`` to (no dotglob), at most ``limit`` + 1 names."""
        try:
            return list(itertools.islice(_glob.iglob(pattern), limit + 1))
        except (OSError, ValueError, RecursionError):
            return []


class DecisionFileSystem(RealFileSystem):
    """``RealFileSystem`` whose ``realpath``/``lexists`` answers are remembered for ONE decision.

    A decision asks the same questions several times (the cwd's realpath for the workspace, again for
    each relative path; the same parent for each word). Within one decision a single snapshot is also the
    more consistent answer. Never keep an instance beyond the decision that made it: across calls the
    file system changes (a swapped symlink, a new ``.git``) and nothing here would notice.
    """

    __slots__ = ("_exists", "_real")

    def __init__(self) -> None:
        self._real: dict[str, str] = {}
        self._exists: dict[str, bool] = {}

    def realpath(self, path: str) -> str:
        hit = self._real.get(path)
        if hit is None:
            hit = self._real[path] = RealFileSystem.realpath(self, path)
        return hit

    def lexists(self, path: str) -> bool:
        hit = self._exists.get(path)
        if hit is None:
            hit = self._exists[path] = RealFileSystem.lexists(self, path)
        return hit
