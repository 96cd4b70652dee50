"""Reaching a path below a directory one component at a time, never through a symlink.

Shared by undo's rewind (``nexusd.undo.restore``) and a preview's apply (``nexusd.sandbox.preview``): both
write into a workspace the agent controls, where any directory on the way may have been swapped for a
symlink that leads out of it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(Exception):
    """``rel`` is not a plain relative path (``where`` None), or ``where`` on the way to it is a symlink or
    not a directory. Callers say it in their own terms (``describe``)."""

    def __init__(self, rel: str, where: str | None = None) -> None:
        super().__init__(rel, where)
        self.rel, self.where = rel, where

    def describe(self, show: Callable[[str], str]) -> str:
        if self.where is None:
            return f"{show(self.rel)!r}: not a plain relative path; refused"
        return f"{show(self.rel)}: {show(self.where)} is a symlink or not a directory; not followed"


def open_parent(
    root_fd: int, rel: str, *, create: bool, dir_mode: Callable[[int], int] = lambda _i: 0o755
) -> tuple[int, str]:
    """An open descriptor of ``rel``'s parent directory (the caller closes it), reached from ``root_fd``
    without following any symlink, and the last component. Missing directories are made when ``create``,
    the ``i``-th with ``dir_mode(i)`` (set on the opened directory, so the umask does not narrow it)."""
    parts = rel.split("/")
    if not rel or any(c in ("", ".", "..") for c in parts):
        raise UnsafePath(rel)
    fd = os.dup(root_fd)
    try:
        for i, comp in enumerate(parts[:-1]):
            try:
                nfd = os.open(comp, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(comp, 0o700, dir_fd=fd)
                nfd = os.open(comp, DIR_FLAGS, dir_fd=fd)  # (swapped for a symlink meanwhile: refused below)
                try:
                    os.fchmod(nfd, dir_mode(i))  # the directory opened, never a name that may have changed
                except BaseException:
                    os.close(nfd)
                    raise
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(rel, "/".join(parts[: i + 1])) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]
