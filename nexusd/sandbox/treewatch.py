"""Fenced inotify watches over the directories a workspace walk listed: a cached answer proven fresh in
O(1) instead of by re-stating every directory (~7,500 ``stat`` calls, 20-35 ms, in a tree of 1,500
repositories).

Used by the walker children (``nexusd.sandbox.walkers``), whose ``nested`` cache it proves. The rules are
undo's (``nexusd.undo.watch``, with the fence and the mount table shared through ``nexusd.fswatch``):

- **watch first, then list**: the walk adds a directory's watch before it ``stat``s and lists it, so a
  change made after the listing is an event; one made before it is in the listing;
- **the fence**: at each question, a file of the walker's own is created and events are read until its
  creation's; every change whose system call returned before the question is then read. Any event on a
  watched directory (an entry created, deleted or renamed in or out, the directory itself moved, deleted or
  its attributes changed) marks that directory changed, and ``nested._update`` lists the changed
  directories again, watched on, keeping the subtrees of their children that saw nothing (an event it
  cannot place, or the root replaced: the whole root, watched anew). Only a child's attribute change
  (``touch``, ``chmod`` of an entry) is not a change of the listing: a watched child directory reports
  its own;
- **anything the watcher cannot vouch for** drops the watch and falls back to the stamp proof
  (``nested._still_valid``, what every call did before): a queue overflow, the watch limit, a file system
  unmounted, a mount made or removed at or below the root (it makes no event in the tree), the root
  replaced, a file system whose changes may come from elsewhere (network, FUSE), a walk that stopped at a
  bound, more than ``max_watches`` directories, an error adding a watch, the fence late or its watch gone.
  The root is watched again at its next walk;
- trees of fewer than ``min_dirs`` directories are not watched: their stamps are proven in well under a
  millisecond, and every watch is kernel memory charged to the user (``fs.inotify.max_user_watches``).

Bounded: one inotify instance per watched root, at most ``max_roots`` roots and ``max_watches`` directories
per walker child (the least recently asked root is dropped first). Not thread-safe: a walker child asks
from one thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable

from inotify_simple import INotify
from inotify_simple import flags as F

from nexusd.fswatch import FENCE_MASK, LOCAL_FS, Fallback, fenced, fs_types, mounts, mounts_within

# What changes a directory's listing (its stamp's mtime, ctime, inode), and nothing that only writes files.
_MASK = (
    F.CREATE
    | F.DELETE
    | F.MOVED_FROM
    | F.MOVED_TO
    | F.DELETE_SELF
    | F.MOVE_SELF
    | F.ATTRIB
    | F.DONT_FOLLOW
    | F.ONLYDIR
    | F.EXCL_UNLINK
)
MIN_DIRS = 128
MAX_WATCHES = 12_000  # per walker child, all its roots together
SHARE_OF_LIMIT = 16  # and at most 1/16 of the user's inotify watches (editors and undo need theirs)
MAX_ROOTS = 4


def watch_budget(limit_file: str = "/proc/sys/fs/inotify/max_user_watches") -> int:
    """The watches one walker child may hold: ``MAX_WATCHES``, or 1/16 of the user's limit where that is
    less (8,192 on kernels before 5.11: 512 each, and a big tree is proven by stamps instead of taking
    the watches an editor needs)."""
    try:
        with open(limit_file, encoding="ascii") as fh:
            limit = int(fh.read().strip())
    except (OSError, ValueError):
        return 0
    return min(MAX_WATCHES, limit // SHARE_OF_LIMIT)


Stamp = tuple[int, int, int, int]


class _Tree:
    """One root's watch: armed while its walk runs, then kept for the answer that walk made."""

    def __init__(self, owner: TreeWatches, root: str, ino: INotify, fence_wd: int, table: tuple[bytes, ...]) -> None:
        self.owner = owner
        self.root = root
        self.ino: INotify | None = ino
        self.fence_wd = fence_wd
        self.table = table
        self.paths: dict[int, str] = {}  # watch descriptor -> the directory it was last added for
        self.broken: str | None = None
        self.answer: object | None = None  # the walk's answer this watch proves (identity)
        self.root_stamp: Stamp | None = None

    def add(self, path: str) -> None:
        """Watch ``path`` before the walk lists it. A failure stops the watching (the walk goes on)."""
        if self.broken is not None or self.ino is None:
            return
        if not self.owner._room(self):
            self.stop(f"more than {self.owner.max_watches} directories to watch")
            return
        try:
            wd = self.ino.add_watch(path, _MASK)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return  # gone or replaced since its parent was listed: the parent's watch has the event
            self.stop(
                "the system's inotify watch limit is reached"
                if e.errno == errno.ENOSPC
                else f"cannot watch {path}: {e.strerror}"
            )
            return
        self.paths[wd] = path  # (a directory moved within the tree keeps its descriptor: its new path)

    @property
    def watches(self) -> int:
        return len(self.paths)

    def stop(self, why: str) -> None:
        self.broken = why
        self.close()

    def close(self) -> None:
        ino, self.ino = self.ino, None
        self.paths = {}
        if ino is not None:
            self.owner._closing.append(ino)  # closed in idle time: freeing 7,500 watches takes 7-30 ms


class TreeWatches:
    """The watched roots of one walker child (see the module's text)."""

    def __init__(
        self,
        fence_dir: str,
        *,
        max_watches: int | None = None,
        max_roots: int = MAX_ROOTS,
        min_dirs: int = MIN_DIRS,
    ) -> None:
        self.fence_dir = os.path.realpath(fence_dir)
        self.max_watches = watch_budget() if max_watches is None else max_watches
        self.max_roots = max_roots
        self.min_dirs = min_dirs
        self._trees: dict[str, _Tree] = {}  # least recently asked first
        self.last: dict[str, str] = {}  # root -> why its latest watch was dropped or not made (bounded)
        self._closing: list[INotify] = []  # dropped instances, closed by ``idle``

    # ------------------------------------------------------------------ arming, with the walk

    def begin(self, root: str) -> Callable[[str], None] | None:
        """Before ``root`` is walked: the callback that watches each directory before it is listed, or None
        (not watchable: the walk's answer is proven by stamps)."""
        self.drop(root)
        inside = self.fence_dir == root or self.fence_dir.startswith(root.rstrip("/") + "/")
        if inside or root.startswith(self.fence_dir + "/"):
            self._note(root, "the walker's fence directory is inside the tree")
            return None
        table = mounts()
        kinds = fs_types(table, root)
        if not kinds or not kinds <= LOCAL_FS:
            self._note(root, f"a file system inotify cannot vouch for ({', '.join(sorted(kinds)) or 'unknown'})")
            return None
        while len(self._trees) >= self.max_roots:
            self.drop(next(iter(self._trees)), "other roots were asked since")
        if len(self._closing) >= self.max_roots:
            self.idle()
        try:
            ino = INotify()
        except OSError as e:  # the instance limit (fs.inotify.max_user_instances)
            self._note(root, f"no inotify instance: {e.strerror}")
            return None
        try:
            fence_wd = ino.add_watch(self.fence_dir, FENCE_MASK | F.ONLYDIR | F.DONT_FOLLOW)
        except OSError as e:
            with contextlib.suppress(OSError):
                ino.close()
            self._note(root, f"cannot watch the fence directory: {e.strerror}")
            return None
        tree = self._trees[root] = _Tree(self, root, ino, fence_wd, mounts_within(table, root))
        return tree.add

    def end(self, root: str, answer: object, complete: bool, dirs: list[tuple[str, Stamp]] | tuple) -> None:
        """After the walk: keep the watch as the proof of ``answer``, or drop it."""
        tree = self._trees.get(root)
        if tree is None:
            return
        if tree.broken is not None or tree.ino is None:
            self.drop(root, tree.broken or "closed")
        elif not complete:
            self.drop(root, "the walk stopped at a bound")
        elif len(dirs) < self.min_dirs:
            self.drop(root, f"fewer than {self.min_dirs} directories: stamps are as cheap")
        elif tree.root_stamp is None and (not dirs or dirs[0][0] != root):
            self.drop(root, "the root was not listed")
        else:
            tree.answer = answer
            if tree.root_stamp is None:
                tree.root_stamp = dirs[0][1]

    def _room(self, tree: _Tree) -> bool:
        """Whether ``tree`` may add one more watch, dropping the least recently asked other roots for it."""
        while tree.watches + sum(t.watches for t in self._trees.values() if t is not tree) >= self.max_watches:
            other = next((r for r, t in self._trees.items() if t is not tree), None)
            if other is None:
                return False
            self.drop(other, "its watches were needed for another root")
        return True

    # ------------------------------------------------------------------ each question

    def changes(self, root: str, answer: object) -> tuple[str, ...] | None:
        """What changed since ``answer`` (the cached walk of ``root``), the fence read: ``()`` nothing (the
        answer holds), the directories whose listing or own attributes changed (``(root,)``: walk it
        whole), or None (no watch can vouch for it: prove it by stamps). The watch stays armed for
        ``resume`` and ``end``, or is dropped (None, or the root changed)."""
        tree = self._trees.get(root)
        if tree is None or tree.ino is None or tree.answer is not answer:
            return None
        changed: set[str] = set()

        def on_event(wd: int, mask: int, name: str) -> None:
            if mask & F.Q_OVERFLOW:
                raise Fallback("the event queue overflowed")
            if mask & F.UNMOUNT:
                raise Fallback("a watched file system was unmounted")
            if name and not mask & ~(F.ATTRIB | F.ISDIR):
                return  # an entry's attributes: not the listing (a watched directory reports its own)
            path = tree.paths.get(wd)
            if path is None:
                changed.add("")  # not ours to place: the whole root (``nested.WHOLE``)
                return
            changed.add(path)
            if mask & F.IGNORED:  # the watch is gone (its directory deleted): walked again, watched again
                del tree.paths[wd]

        try:
            st = os.stat(root, follow_symlinks=False)
            if tree.root_stamp is None or (st.st_ino, st.st_dev) != tree.root_stamp[2:]:
                self.drop(root, "the root was replaced")  # (its listing or attributes changed: an event)
                return ("",)
            if mounts_within(mounts(), root) != tree.table:
                raise Fallback("a mount at or below the root was made or removed")
            fenced(tree.ino, self.fence_dir, tree.fence_wd, on_event)
        except (Fallback, OSError) as e:
            self.drop(root, str(e))
            return None
        self._trees[root] = self._trees.pop(root)  # most recently asked last
        if "" in changed:
            self.drop(root, "an event the watch could not place")
        return tuple(sorted(changed))

    def resume(self, root: str) -> Callable[[str], None] | None:
        """The watch callback of ``root``'s armed watch, for a walk of the directories that changed (then
        ``end`` with the updated answer); None when it has none."""
        tree = self._trees.get(root)
        return tree.add if tree is not None and tree.ino is not None and tree.broken is None else None

    # ------------------------------------------------------------------ the rest

    def drop(self, root: str, why: str | None = None) -> None:
        tree = self._trees.pop(root, None)
        if tree is not None:
            tree.close()
        if why is not None:
            self._note(root, why)

    def _note(self, root: str, why: str) -> None:
        self.last.pop(root, None)
        self.last[root] = why
        while len(self.last) > 64:
            self.last.pop(next(iter(self.last)))

    def watching(self, root: str) -> int:
        """How many directories of ``root`` are watched now (0: none, its answer is proven by stamps)."""
        tree = self._trees.get(root)
        return tree.watches if tree is not None and tree.answer is not None else 0

    def idle(self) -> None:
        """Close the dropped instances (the kernel frees their watches): called after an answer is sent."""
        closing, self._closing = self._closing, []
        for ino in closing:
            with contextlib.suppress(OSError):
                ino.close()

    def close(self) -> None:
        for root in list(self._trees):
            self.drop(root)
        self.idle()
