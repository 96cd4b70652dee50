"""A file-system watcher per workspace (Linux inotify): the paths changed since the last checkpoint, so that
git re-reads those and nothing else (the full scan lstats every file: ~35 ms of CPU on 10,000 files here).

Why inotify through ``inotify_simple``: the kernel's own change feed, read in the checkpoint's worker thread
(never on the event loop), with nothing between us and the queue (``watchfiles``, already a dependency,
debounces in its own thread and hides queue overflows, so it cannot tell us "everything before now is
known"). ``inotify_simple`` is a small, well-kept ctypes wrapper: no compiled code.

It stays as correct as the full scan, or it says so and the checkpoint scans:

- **the fence**: before each checkpoint the watcher creates a file of its own, under a name no one can
  guess (in the shadow repository's directory, outside the workspace), and reads events until that
  creation's event arrives. One inotify queue
  is ordered, so every change whose system call returned before the fence is then known;
- **new directories**: a watch is added, then the directory is listed (what was created before the watch
  existed is found by the listing) and its path given to git whole, which scans it;
- **renamed or deleted directories**: their watches are dropped and both paths given to git;
- **anything the watcher cannot vouch for** raises ``Fallback``: a queue overflow, the watch limit, a watch
  removed by the kernel from a directory that still exists, an unmount or a mount-table change, the
  workspace moved, replaced or deleted, a ``.gitignore`` or a nested ``.git`` changed (the ignore rules or
  a nested repository changed: what to watch changed), more directories than ``max_dirs``, a file system
  whose changes may come from elsewhere (network, FUSE). The caller then takes a full scan and re-arms;
- **ignored directories** git does not enter (excluded by ``.gitignore`` or the settings, holding nothing
  tracked) get no watch, as the full scan does not read them; nested repositories get no watch either:
  their paths are given to git at every checkpoint (git records them as links, by their HEAD);
- **files with more than one hard link**: a write through another name (outside the workspace) makes no
  event here, so those paths are given to git at every checkpoint.

Not seen by inotify, and therefore not by this watcher (the full scan would see them, by their mtime): a
write through a shared memory map (``mmap``), and a write through a hard link made *outside* the workspace
after the file was first seen. Rewinds scan in full (``Shadow.snapshot(full=True)``), so a rewind never
acts on a stale view.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

from nexusd.fswatch import FENCE_MASK, FENCE_TIMEOUT, LOCAL_FS, Fallback, fenced, fs_types
from nexusd.fswatch import mounts as _mounts

__all__ = ["FENCE_TIMEOUT", "LOCAL_FS", "Fallback", "Watcher", "fs_types"]

_MASK = (
    F.MODIFY
    | F.ATTRIB
    | F.CREATE
    | F.DELETE
    | F.MOVED_FROM
    | F.MOVED_TO
    | F.DELETE_SELF
    | F.MOVE_SELF
    | F.DONT_FOLLOW
    | F.ONLYDIR
    | F.EXCL_UNLINK
)


class Watcher:
    """The changed paths of one workspace between checkpoints. Not thread-safe: its shadow's lock serializes
    every call (arm, changed, close)."""

    def __init__(self, workspace: str, fence_dir: Path, max_dirs: int = 10_000) -> None:
        self.workspace = workspace.rstrip("/") or "/"
        self.fence_dir = fence_dir
        self.max_dirs = max_dirs
        self.armed = False
        self._ino: INotify | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory, relative ("" the root)
        self._wds: dict[str, int] = {}
        self._always: set[str] = set()  # nested repositories and hard-linked files: given to git every time
        self._dirty: set[str] = set()
        self._new: list[str] = []
        self._dropped: list[str] = []
        self._fence_wd = -1
        self._root_id: tuple[int, int] = (0, 0)
        self._mounts = b""

    # ------------------------------------------------------------------ arming

    def close(self) -> None:
        self.armed = False
        if self._ino is not None:
            with contextlib.suppress(OSError):
                self._ino.close()
        self._ino = None
        self._dirs.clear()
        self._wds.clear()
        self._always.clear()
        self._dirty.clear()
        self._new.clear()
        self._dropped.clear()

    def arm(self, excluded: Callable[[], set[str]]) -> None:
        """Watch every directory git would read; the caller scans in full right after (what changed before
        a directory's watch existed is in that scan). ``excluded``: directories git does not enter."""
        self.close()
        mounts = _mounts()
        kinds = fs_types(mounts, self.workspace)
        if not kinds or not kinds <= LOCAL_FS:
            raise Fallback(f"the workspace is on a file system inotify cannot vouch for ({', '.join(sorted(kinds))})")
        st_ = os.stat(self.workspace)
        self._root_id, self._mounts = (st_.st_dev, st_.st_ino), mounts
        self._ino = INotify()
        self.fence_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old in self.fence_dir.iterdir():  # a fence left by a run that stopped in the middle
            with contextlib.suppress(OSError):
                old.unlink()
        self._fence_wd = self._ino.add_watch(self.fence_dir, FENCE_MASK | F.ONLYDIR | F.DONT_FOLLOW)
        skip = excluded()
        try:
            self._walk("", skip)
        except Fallback:
            self.close()
            raise
        self.armed = True

    def _abs(self, rel: str) -> str:
        return os.path.join(self.workspace, rel) if rel else self.workspace

    def _watch(self, rel: str) -> bool:
        assert self._ino is not None
        if len(self._wds) >= self.max_dirs:
            raise Fallback(f"more than {self.max_dirs} directories to watch")
        try:
            wd = self._ino.add_watch(self._abs(rel), _MASK)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return False  # gone or replaced: its parent's event says so
            if e.errno == errno.ENOSPC:
                raise Fallback("the system's inotify watch limit is reached") from None
            raise Fallback(f"cannot watch {rel or '.'}: {e.strerror}") from None
        if wd == self._fence_wd:
            return False  # the daemon's own directory inside the workspace (excluded from every snapshot)
        old = self._dirs.get(wd)
        if old is not None and old != rel:
            self._wds.pop(old, None)
        self._dirs[wd] = rel
        self._wds[rel] = wd
        return True

    def _walk(self, top: str, skip: set[str]) -> None:
        """Watch ``top`` and the directories below it (a watch first, then the listing)."""
        stack = [top]
        while stack:
            rel = stack.pop()
            if not self._watch(rel):
                continue
            try:
                entries = list(os.scandir(self._abs(rel)))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as e:
                raise Fallback(f"cannot list {rel or '.'}: {e.strerror}") from None
            if rel and any(e.name == ".git" for e in entries):
                self._unwatch(rel)  # a nested repository: git records its HEAD, given to git every time
                self._always.add(rel)
                continue
            for entry in entries:
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git" and child not in skip:
                            stack.append(child)
                    elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_nlink > 1:
                        self._always.add(child)
                except OSError:
                    continue  # gone meanwhile: its parent's event says so

    def _unwatch(self, rel: str) -> None:
        """Drop the watches of ``rel`` and below (renamed away or deleted)."""
        assert self._ino is not None
        prefix = rel + "/"
        for path in [d for d in self._wds if d == rel or d.startswith(prefix)]:
            wd = self._wds.pop(path)
            self._dirs.pop(wd, None)
            with contextlib.suppress(OSError):
                self._ino.rm_watch(wd)

    # ------------------------------------------------------------------ each checkpoint

    def changed(self) -> list[str]:
        """The paths (relative) changed since the last call, directories whole; raises ``Fallback``."""
        if not self.armed or self._ino is None:
            raise Fallback("not armed")
        try:
            st_ = os.stat(self.workspace)
        except OSError as e:
            raise Fallback(f"the workspace cannot be read: {e.strerror}") from None
        if (st_.st_dev, st_.st_ino) != self._root_id:
            raise Fallback("the workspace was moved or replaced")
        if _mounts() != self._mounts:
            raise Fallback("the mount table changed")
        assert self._ino is not None
        fenced(self._ino, self.fence_dir, self._fence_wd, self._event, FENCE_TIMEOUT)  # (nexusd.fswatch)
        new, self._new = self._new, []
        for rel in new:
            self._walk(rel, set())
        dropped, self._dropped = self._dropped, []
        for rel in dropped:
            path = self._abs(rel)
            nested = any(rel == a or rel.startswith(a + "/") for a in self._always)
            if rel not in self._wds and os.path.isdir(path) and not os.path.islink(path) and not nested:
                raise Fallback(f"the watch of {rel} was removed while it still exists")
        for rel in [a for a in self._always if not os.path.lexists(self._abs(a))]:
            self._always.discard(rel)
            self._dirty.add(rel)
        out = _outermost(self._dirty | self._always)
        self._dirty.clear()
        return out

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & F.Q_OVERFLOW:
            raise Fallback("the event queue overflowed")
        rel = self._dirs.get(wd)
        if rel is None:
            return  # a watch already dropped (its directory renamed away or deleted): the parent's event told
        if mask & F.UNMOUNT:
            raise Fallback("a watched file system was unmounted")
        if mask & F.IGNORED:  # the kernel dropped it: the directory went (its parent's event follows), or worse
            self._dirs.pop(wd, None)
            if self._wds.get(rel) == wd:
                del self._wds[rel]
            if not rel:
                raise Fallback("the workspace's watch was removed")
            self._dropped.append(rel)  # judged after the drain: re-made and watched again, or gone
            self._dirty.add(rel)
            return
        if not name:  # the directory itself
            if not rel and mask & (F.DELETE_SELF | F.MOVE_SELF | F.ATTRIB):
                raise Fallback("the workspace itself was moved, deleted or changed its mode")
            return  # a subdirectory's own move, deletion or mode: its parent's event names it
        child = f"{rel}/{name}" if rel else name
        if name == ".gitignore":
            raise Fallback(f"{child} changed: the ignore rules changed")
        if name == ".git":
            if not rel:
                return  # the workspace's own repository: never part of a snapshot
            raise Fallback(f"{child} changed: a nested repository appeared, went or changed")
        self._dirty.add(child)
        if mask & F.ISDIR:
            if mask & (F.DELETE | F.MOVED_FROM):
                self._unwatch(child)
            if mask & (F.CREATE | F.MOVED_TO | F.ATTRIB):
                self._new.append(child)  # watched, then listed, after the fence
        elif mask & (F.CREATE | F.MOVED_TO):
            with contextlib.suppress(OSError):
                s = os.lstat(self._abs(child))
                if stat.S_ISREG(s.st_mode) and s.st_nlink > 1:
                    self._always.add(child)

    @property
    def watches(self) -> int:
        return len(self._wds)


def _outermost(paths: Iterable[str]) -> list[str]:
    """Sorted, without the paths inside another one of them (a directory given to git covers its files)."""
    out: list[str] = []
    for path in sorted(paths, key=lambda s: s.split("/")):
        if out and (path == out[-1] or path.startswith(out[-1] + "/")):
            continue
        out.append(path)
    return out
