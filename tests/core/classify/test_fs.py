"""The real file system behind the classifier: the kernel realpath shortcut agrees with os.path.realpath."""

from __future__ import annotations

import os
from pathlib import Path

from nexusd.core.classify.fs import DecisionFileSystem, RealFileSystem


def test_realpath_matches_the_library_on_every_kind_of_path(tmp_path: Path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "a" / "b", tmp_path / "l")
    os.symlink("/etc", tmp_path / "a" / "b" / "e")
    os.symlink(tmp_path / "nope", tmp_path / "dangling")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink("rel/../b", tmp_path / "a" / "r")
    fs = RealFileSystem()
    paths = [str(tmp_path), f"{tmp_path}/l", f"{tmp_path}/l/..", f"{tmp_path}/l/e/hostname", f"{tmp_path}/dangling",
             f"{tmp_path}/dangling/x", f"{tmp_path}/missing/x", f"{tmp_path}/loop1", f"{tmp_path}/a/r", "/", "//tmp",
             f"{tmp_path}/a/./b/", "/proc/self", "relative/x"]
    for p in paths:
        assert fs.realpath(p) == os.path.realpath(p), p


def test_decision_snapshot_is_per_instance(tmp_path: Path):
    """A DecisionFileSystem remembers within itself only; a new one (the next decision) sees the change."""
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    os.symlink(tmp_path / "x", tmp_path / "l")
    first = DecisionFileSystem()
    assert first.realpath(f"{tmp_path}/l") == str(tmp_path / "x")
    assert not first.lexists(f"{tmp_path}/new")
    (tmp_path / "l").unlink()
    os.symlink(tmp_path / "y", tmp_path / "l")
    (tmp_path / "new").touch()
    second = DecisionFileSystem()
    assert second.realpath(f"{tmp_path}/l") == str(tmp_path / "y")
    assert second.lexists(f"{tmp_path}/new")
