"""The fence (``nexusd.fswatch.fenced``): every event queued before it is passed on, its own never are, and
its file stands between fences and is renamed, not made anew (a new inode costs up to ~0.8 ms of kernel
time on some ext4 directories, a rename ~30 µs). Real inotify on real directories."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from inotify_simple import INotify
from inotify_simple import flags as F

from nexusd import fswatch
from nexusd.fswatch import FENCE_MASK, Fallback, fenced


def _setup(tmp_path: Path) -> tuple[INotify, Path, int, Path, int]:
    fence_dir, tree = tmp_path / "fence", tmp_path / "tree"
    fence_dir.mkdir()
    tree.mkdir()
    ino = INotify()
    fence_wd = ino.add_watch(str(fence_dir), FENCE_MASK | F.ONLYDIR | F.DONT_FOLLOW)
    tree_wd = ino.add_watch(str(tree), F.CREATE | F.DELETE | F.MOVED_TO)
    return ino, fence_dir, fence_wd, tree, tree_wd


def _recorder(seen: list[tuple[int, str]]) -> Callable[[int, int, str], None]:
    return lambda wd, _mask, name: seen.append((wd, name))


def test_every_change_before_a_fence_is_passed_and_the_fence_file_is_renamed(tmp_path: Path) -> None:
    ino, fence_dir, fence_wd, tree, tree_wd = _setup(tmp_path)
    try:
        inodes, names = set(), []
        for i in range(6):
            (tree / f"f{i}").write_text("x")
            seen: list[tuple[int, str]] = []
            fenced(ino, fence_dir, fence_wd, _recorder(seen))
            assert seen == [(tree_wd, f"f{i}")]  # this change, once; never the fence's own events
            standing = os.listdir(fence_dir)
            assert len(standing) == 1
            names.append(standing[0])
            inodes.add(os.lstat(fence_dir / standing[0]).st_ino)
        assert len(set(names)) == 6, "each fence has a name of its own"
        assert len(inodes) == 1, "the standing file is renamed, not made anew"
    finally:
        ino.close()


def test_a_fence_whose_standing_file_went_makes_a_new_one(tmp_path: Path) -> None:
    ino, fence_dir, fence_wd, tree, _tree_wd = _setup(tmp_path)
    try:
        fenced(ino, fence_dir, fence_wd, lambda *_: None)
        for name in os.listdir(fence_dir):
            os.unlink(fence_dir / name)  # a watcher's arm cleans its fence directory
        (tree / "after").write_text("x")
        seen: list[str] = []
        fenced(ino, fence_dir, fence_wd, lambda _wd, _mask, name: seen.append(name))
        assert seen == ["after"] and len(os.listdir(fence_dir)) == 1
    finally:
        ino.close()


def test_a_fence_that_fails_leaves_no_file_and_is_not_reused(tmp_path: Path) -> None:
    ino, fence_dir, fence_wd, _tree, _tree_wd = _setup(tmp_path)
    try:
        fenced(ino, fence_dir, fence_wd, lambda *_: None)
        ino.rm_watch(fence_wd)
        with pytest.raises(Fallback, match="removed"):
            fenced(ino, fence_dir, fence_wd, lambda *_: None)
        assert os.listdir(fence_dir) == []
        assert os.fspath(fence_dir) not in fswatch._standing
    finally:
        ino.close()


def test_a_watch_that_reports_only_creations_cannot_end_a_renamed_fence(tmp_path: Path) -> None:
    """Why every fence directory's watch takes ``FENCE_MASK``: without MOVED_TO the renamed fence's event
    never comes, and the fence says so (a Fallback) instead of passing as drained."""
    fence_dir = tmp_path / "fence"
    fence_dir.mkdir()
    ino = INotify()
    try:
        wd = ino.add_watch(str(fence_dir), F.CREATE | F.ONLYDIR)
        fenced(ino, fence_dir, wd, lambda *_: None)  # made: its CREATE comes
        with pytest.raises(Fallback, match="in time"):
            fenced(ino, fence_dir, wd, lambda *_: None, timeout=0.3)  # renamed: nothing comes
    finally:
        ino.close()
