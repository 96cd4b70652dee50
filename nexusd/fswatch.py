"""What inotify watchers share (the undo checkpoint's ``nexusd.undo.watch`` and the sandbox walk's
``nexusd.sandbox.treewatch``): which file systems inotify can vouch for, the mount table, and the fence.

**The fence**: a watcher that must say "every change made before now is known" puts a file of its own
under a name no one can guess in a directory it watches, and reads events until that name's event arrives.
One inotify queue is ordered, so every change whose system call returned before the fence is then read.
Anything that breaks the premise (the fence's watch removed, its event late) is a ``Fallback``: the caller
does the slow, certain thing instead. The fence file stays between fences and is renamed to each new name
(``MOVED_TO``): making a new inode costs up to ~0.8 ms of kernel time on some ext4 directories, a rename
~30 µs, and a fence is on every checkpoint's and every walk's path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

# file systems whose every change is made through this kernel (inotify sees them all)
LOCAL_FS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs", "overlay", "bcachefs", "jfs", "reiserfs"}
)
FENCE_TIMEOUT = 5.0
# what a fence directory's watch must report: a fence is made (CREATE) or renamed to (MOVED_TO)
FENCE_MASK = F.CREATE | F.MOVED_TO
# fence directory -> the name of this process's fence file standing in it, renamed by the next fence
_standing: dict[str, str] = {}


class Fallback(Exception):
    """The watcher cannot vouch for what it was asked; the message says why. Do the slow, certain thing."""


def mounts() -> bytes:
    """This process's mount table (empty when unreadable: callers then refuse to watch)."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _unescape(field: bytes) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out = field
    for code, ch in ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"), (b"\\134", b"\\")):
        out = out.replace(code, ch)
    return os.fsdecode(out)


def fs_types(table: bytes, root: str) -> set[str]:
    """The types of the file system holding ``root`` and of every mount below it."""
    best, best_type = "", ""
    below: set[str] = set()
    prefix = root.rstrip("/") + "/"
    for line in table.splitlines():
        left, sep, right = line.partition(b" - ")
        parts = left.split(b" ")
        if not sep or len(parts) < 5:
            continue
        point = _unescape(parts[4])
        kind = os.fsdecode(right.split(b" ")[0])
        if (point == "/" or root == point or root.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, best_type = point, kind
        if point.startswith(prefix):
            below.add(kind)
    return ({best_type} if best_type else set()) | below


def mounts_within(table: bytes, root: str) -> tuple[bytes, ...]:
    """The mount-table lines of mounts at ``root`` or below it: what a watcher of ``root``'s tree compares
    at each question (a mount over a directory in the tree makes no event in it). Mounts elsewhere (a
    container started, a USB stick) do not concern the tree; one over an ancestor changes the root's own
    device and inode, which the watcher checks by ``stat``."""
    prefix = root.rstrip("/") + "/"
    out: list[bytes] = []
    for line in table.splitlines():
        parts = line.split(b" ", 5)
        if len(parts) < 5:
            out.append(line)  # unparsable: kept, so a change to it is a change
            continue
        point = _unescape(parts[4])
        if point == root or point.startswith(prefix):
            out.append(line.split(b" ", 1)[1])  # (without the mount id, which a remount renumbers anyway)
    return tuple(out)


def fenced(
    ino: INotify,
    fence_dir: str | Path,
    fence_wd: int,
    on_event: Callable[[int, int, str], None],
    timeout: float = FENCE_TIMEOUT,
) -> None:
    """Pass ``on_event(wd, mask, name)`` every event queued before now (the fence: see the module's text).
    ``fence_wd``: ``ino``'s watch (``FENCE_MASK``) of ``fence_dir``, a directory only this process writes.
    Events on ``fence_wd`` are the fence's own (this one's or another fence's), never passed on."""
    fence = f"fence-{secrets.token_hex(8)}"  # a name no one can guess: only this name's event ends the drain
    path = os.path.join(fence_dir, fence)
    key = os.fspath(fence_dir)
    standing = _standing.pop(key, None)  # (a fence running at once in another thread makes its own file)
    try:
        if standing is None:
            raise FileNotFoundError
        os.rename(os.path.join(fence_dir, standing), path)
        kind = F.MOVED_TO
    except OSError:  # none standing, or it went (the directory cleaned, or made anew)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
        kind = F.CREATE
    drained = False
    try:
        deadline = time.monotonic() + timeout
        fenced_ = False
        while not fenced_:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fallback("the fence's event did not arrive in time")
            for ev in ino.read(timeout=max(1, int(left * 1000))):
                if ev.wd == fence_wd:
                    if ev.mask & F.IGNORED:
                        raise Fallback("the fence's watch was removed")
                    fenced_ = fenced_ or (ev.name == fence and bool(ev.mask & kind))
                    continue
                on_event(ev.wd, ev.mask, ev.name)
        drained = True
    finally:
        # the file stands for the next fence; one left by a fence that failed, or a second one, goes
        if not drained or _standing.setdefault(key, fence) != fence:
            with contextlib.suppress(OSError):
                os.unlink(path)
