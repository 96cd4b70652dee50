"""The real file system behind the ``FileSystem`` protocol: the classifier's only I/O.

The daemon injects this; tests and ``nexusctl check --offline`` may inject any other world. Every
method answers conservatively instead of raising: an unreadable file has no size and no head.
"""

from __future__ import annotations

import glob as _glob
import itertools
import os


class RealFileSystem:
    """``nexusd.core.model.FileSystem`` over ``os``."""

    def realpath(self, path: str) -> str:
        try:
            return os.path.realpath(path)
        except (OSError, ValueError):
            return os.path.normpath(path)

    def lexists(self, path: str) -> bool:
        try:
            return os.path.lexists(path)
        except (OSError, ValueError):
            return False

    def is_symlink(self, path: str) -> bool:
        try:
            return os.path.islink(path)
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
