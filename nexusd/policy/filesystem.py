"""The real file system behind the core's ``FileSystem`` protocol: the classifier's only I/O, kept out of
the pure core (which never imports this module) and injected by the gate.

Tests and ``nexusctl check --offline`` may inject any other world. Every
method answers conservatively instead of raising: an unreadable file has no size and no head.
"""

from __future__ import annotations

import errno
import fnmatch
import glob as _glob
import itertools
import os
import stat
from collections.abc import Iterable, Iterator

_O_PATH = getattr(os, "O_PATH", 0) if os.path.isdir("/proc/self/fd") else 0


def _open_regular(path: str) -> tuple[int | None, os.stat_result]:
    """(a descriptor open for reading, its stat) if ``path`` is a regular file (links followed), else
    (None, its stat). Nothing else is ever opened for reading: a device, FIFO or socket opened to
    classify a call would act before any decision (a camera's light, a FIFO's writer let go, a tape
    rewound). On Linux the name is resolved once (O_PATH) and the very inode it found is reopened through
    /proc, so a name swapped between the check and the open cannot slip a device in; elsewhere the
    descriptor's inode must be the one the check saw."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    if _O_PATH:
        anchor = os.open(path, _O_PATH | os.O_CLOEXEC)
        try:
            st = os.fstat(anchor)
            if not stat.S_ISREG(st.st_mode):
                return None, st
            return os.open(f"/proc/self/fd/{anchor}", flags), st
        finally:
            os.close(anchor)
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return None, st
    fd = os.open(path, flags)
    try:
        now = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
        os.close(fd)
        return None, now
    return fd, st


def read_regular_text(path: str | os.PathLike[str], limit: int) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes. Anything else raises ``OSError`` with
    a reason a person can act on: a policy file in a workspace is the agent's to shape, and one that is a
    FIFO (the daemon's thread blocked in ``open``) or a link to ``/dev/zero`` (read until memory runs out)
    must cost that layer, never the daemon."""
    fd, st = _open_regular(os.fspath(path))
    if fd is None:
        raise OSError(errno.EINVAL, "not a regular file")
    try:
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        data = os.read(fd, limit + 1)
        while len(data) <= limit:  # a file may grow after the stat: read to the limit, not the size
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data.decode("utf-8")


GLOB_SCAN_BUDGET = 5_000  # directory entries one glob may list: at most ~5-12 ms of the daemon's thread


class GlobTooLarge(Exception):
    """Expanding the glob would list more directory entries than its budget."""


def bounded_iglob(pattern: str, budget: int | list[int]) -> Iterator[str]:
    """``glob.iglob(pattern)`` (not recursive: ``**`` is ``*``; hidden names only for a pattern that
    starts with a dot) that raises ``GlobTooLarge`` once it has listed ``budget`` directory entries.
    The standard function cannot be bounded: a pattern that matches nothing yields nothing while it
    walks every directory its wildcards reach. Same structure and answers as CPython's ``glob._iglob``
    (a property test holds the two equal). ``budget`` as a one-item list is shared and spent in place
    (one decision's globs draw on one budget)."""
    left = budget if isinstance(budget, list) else [budget]

    def listdir(dirname: str, dironly: bool) -> list[str]:
        names: list[str] = []
        try:
            with os.scandir(dirname or os.curdir) as it:
                for entry in it:
                    left[0] -= 1
                    if left[0] < 0:
                        raise GlobTooLarge(pattern)
                    try:
                        if not dironly or entry.is_dir():
                            names.append(entry.name)
                    except OSError:
                        pass
        except OSError:
            return []
        return names

    def in_dir(dirname: str, part: str, dironly: bool) -> list[str]:
        if not _glob.has_magic(part):
            if not part:  # a pattern ending in "/": the directory itself, if it is one
                return [part] if os.path.isdir(dirname) else []
            return [part] if os.path.lexists(os.path.join(dirname, part)) else []
        names = listdir(dirname, dironly)
        if part[0] != ".":
            names = [n for n in names if n[0] != "."]
        return fnmatch.filter(names, part)

    def walk(path: str, dironly: bool) -> Iterator[str]:
        dirname, basename = os.path.split(path)
        if not _glob.has_magic(path):
            if basename:
                if os.path.lexists(path):
                    yield path
            elif os.path.isdir(dirname):
                yield path
            return
        if not dirname:
            yield from in_dir("", basename, dironly)
            return
        dirs: Iterable[str] = walk(dirname, True) if dirname != path and _glob.has_magic(dirname) else [dirname]
        for d in dirs:
            for name in in_dir(d, basename, dironly):
                yield os.path.join(d, name)

    return walk(pattern, False)


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


_MAX_MISSING_DEPTH = 64  # _realpath_missing recurses once per missing parent


def same_realpath(path: str) -> str:
    """``os.path.realpath(path)``, the very same answer (its errors included), for half its cost: an
    existing path is resolved by the kernel in 3 syscalls (``_kernel_realpath``), a path whose last name is
    missing is its parent's answer plus that name, and anything unusual is the library's. A sandbox plan
    resolves ~70 paths per call (~19 µs each by the library on the 2-core test machine, ~9 µs this way)."""
    return _REAL._same_realpath(path)


def lexists(path: str) -> bool:
    """``os.path.lexists`` without raising and catching an exception for every missing name (the
    common answer on the hot path): faccessat(F_OK, AT_SYMLINK_NOFOLLOW) asks the same question."""
    try:
        return os.access(path, os.F_OK, follow_symlinks=False)
    except (OSError, ValueError, NotImplementedError):
        return os.path.lexists(path) if "\x00" not in path else False


class RealFileSystem:
    """``nexusd.core.model.FileSystem`` over ``os``."""

    def realpath(self, path: str) -> str:
        try:
            return self._same_realpath(path)
        except (OSError, ValueError):
            return os.path.normpath(path)

    def _same_realpath(self, path: str) -> str:
        """``same_realpath``, with this file system's answers for the parents of a missing name."""
        if _O_PATH:
            fast = _kernel_realpath(path)
            if fast is None:
                fast = self._realpath_missing(path)
            if fast is not None:
                return fast
        return os.path.realpath(path)

    def _realpath_missing(self, path: str, known_missing: bool = False) -> str | None:
        """A path whose last name is not there at all (not even a dangling link), as tools about to
        create it name it: the parent's realpath plus that name, which is what ``os.path.realpath``
        answers (it appends a name it cannot lstat), without an lstat per component. None for anything
        else (use the library). ``known_missing``: this decision's lexists already said so."""
        cut = path.rfind("/")
        name = path[cut + 1 :]
        if cut < 0 or name in ("", ".", "..") or "\x00" in path or path.count("/") > _MAX_MISSING_DEPTH:
            return None  # the library walks deep paths without recursion
        if not known_missing:
            try:
                os.lstat(path)
            except FileNotFoundError:
                pass
            except (OSError, ValueError):
                return None  # ENOTDIR, ELOOP, EACCES ...: the library's answer
            else:
                return None  # it exists (a dangling link, or something the kernel would not open)
        parent = self.realpath(path[:cut] or "/")
        return f"{parent}/{name}" if parent != "/" else f"/{name}"

    def lexists(self, path: str) -> bool:
        return lexists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def size(self, path: str) -> int | None:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        return None if stat.S_ISDIR(st.st_mode) else st.st_size  # the same answer as isdir, one stat fewer

    def head(self, path: str, n: int) -> bytes | None:
        return self.size_and_head(path, n)[1]

    def size_and_head(self, path: str, n: int) -> tuple[int | None, bytes | None]:
        """``(size(path), head(path, n))``: the classifier asks both of every file a Read names. Only a
        regular file is ever opened for reading (``_open_regular``); anything else has its size (a
        directory: None) and no head. A file that cannot be read still has the size ``stat`` tells (a
        large unreadable file is still large)."""
        try:
            fd, st = _open_regular(path)
        except (OSError, ValueError):
            return self.size(path), None
        if fd is None:
            return (None if stat.S_ISDIR(st.st_mode) else st.st_size), None
        try:
            return st.st_size, os.read(fd, n)
        except OSError:
            return st.st_size, None
        finally:
            os.close(fd)

    def is_mount(self, path: str) -> bool:
        """A mount point (a recursive delete of one is catastrophic); False when it cannot be told."""
        try:
            return os.path.ismount(path)
        except (OSError, ValueError):
            return False

    def glob(self, pattern: str, limit: int) -> list[str] | None:
        """What bash would expand ``pattern`` to (no dotglob), at most ``limit`` + 1 names; None when
        finding out would list more than ``GLOB_SCAN_BUDGET`` directory entries (``ls /*/*/*/*/*/x*``
        walks the whole machine: minutes on the daemon's one thread, for every agent at once)."""
        try:
            return list(itertools.islice(bounded_iglob(pattern, GLOB_SCAN_BUDGET), limit + 1))
        except (GlobTooLarge, RecursionError):  # too large or too deep to expand: what it matches is unknown
            return None
        except (OSError, ValueError):
            return []


_REAL = RealFileSystem()


class DecisionFileSystem(RealFileSystem):
    """``RealFileSystem`` whose ``realpath``/``lexists`` answers are remembered for ONE decision.

    A decision asks the same questions several times (the cwd's realpath for the workspace, again for
    each relative path; the same parent for each word). Within one decision a single snapshot is also the
    more consistent answer. Never keep an instance beyond the decision that made it: across calls the
    file system changes (a swapped symlink, a new ``.git``) and nothing here would notice.
    """

    __slots__ = ("_exists", "_glob_left", "_real")

    def __init__(self) -> None:
        self._real: dict[str, str] = {}
        self._exists: dict[str, bool] = {}
        self._glob_left = [GLOB_SCAN_BUDGET]  # one budget for all of the decision's globs, not one each

    def glob(self, pattern: str, limit: int) -> list[str] | None:
        """As ``RealFileSystem.glob``, but every glob of this decision draws on one budget: two hundred
        ``/*/*/*/x*`` words in one command would otherwise cost two hundred budgets (a second)."""
        if self._glob_left[0] <= 0:
            return None
        try:
            return list(itertools.islice(bounded_iglob(pattern, self._glob_left), limit + 1))
        except (GlobTooLarge, RecursionError):
            return None
        except (OSError, ValueError):
            return []

    def realpath(self, path: str) -> str:
        hit = self._real.get(path)
        if hit is None:
            if _O_PATH and self._exists.get(path) is False:  # the classifier asks lexists first
                hit = self._realpath_missing(path, known_missing=True)
            if hit is None:
                hit = RealFileSystem.realpath(self, path)
            self._real[path] = hit
        return hit

    def lexists(self, path: str) -> bool:
        hit = self._exists.get(path)
        if hit is None:
            hit = self._exists[path] = RealFileSystem.lexists(self, path)
        return hit

    def realpath_if_lexists(self, path: str) -> str | None:
        """``realpath(path) if lexists(path) else None``, the classifier's question for every path it
        resolves, in 3 syscalls instead of 4 for a path that exists: the kernel's resolution succeeding
        proves the name is there (it followed every component to an existing file), so the separate
        existence check is skipped and both answers are remembered. Anything else (a missing name, a
        dangling link, a relative path) asks the two questions one after the other, as before."""
        if _O_PATH and path not in self._exists and path not in self._real:
            fast = _kernel_realpath(path)
            if fast is not None:
                self._exists[path] = True
                self._real.setdefault(path, fast)
                return self._real[path]
        return self.realpath(path) if self.lexists(path) else None
