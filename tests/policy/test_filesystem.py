"""The real file system behind the classifier: the kernel realpath shortcut agrees with os.path.realpath."""

from __future__ import annotations

import os
from pathlib import Path

from nexusd.policy.filesystem import DecisionFileSystem, RealFileSystem


def test_realpath_matches_the_library_on_every_kind_of_path(tmp_path: Path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "a" / "b", tmp_path / "l")
    os.symlink("/etc", tmp_path / "a" / "b" / "e")
    os.symlink(tmp_path / "nope", tmp_path / "dangling")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink("rel/../b", tmp_path / "a" / "r")
    fs = RealFileSystem()
    paths = [
        str(tmp_path),
        f"{tmp_path}/l",
        f"{tmp_path}/l/..",
        f"{tmp_path}/l/e/hostname",
        f"{tmp_path}/dangling",
        f"{tmp_path}/dangling/x",
        f"{tmp_path}/missing/x",
        f"{tmp_path}/loop1",
        f"{tmp_path}/a/r",
        "/",
        "//tmp",
        f"{tmp_path}/a/./b/",
        "/proc/self",
        "relative/x",
        f"{tmp_path}/missing",
        f"{tmp_path}/l/missing",
        f"{tmp_path}/l/m1/m2/m3",
        f"{tmp_path}/missing/..",
        f"{tmp_path}/missing/../a",
        f"{tmp_path}/l/e/nope/",
        f"{tmp_path}/dangling/missing/x",
        f"{tmp_path}/a/r/missing",
        f"{tmp_path}/loop1/missing",
        f"{tmp_path}/l/../missing",
        "/missing",
        f"{tmp_path}//missing",
        f"{tmp_path}/a/b/e/missing/.",
        f"{tmp_path}/file/missing",
        f"{tmp_path}/l" + "/m" * 3000,
        f"{tmp_path}" + "/m" * 60,
    ]
    (tmp_path / "file").write_text("x")
    for p in paths:
        assert fs.realpath(p) == os.path.realpath(p), p
        decision = DecisionFileSystem()  # as the classifier asks: lexists first, then realpath
        decision.lexists(p)
        assert decision.realpath(p) == os.path.realpath(p), p


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


def test_lexists_matches_the_library(tmp_path: Path):
    """faccessat without following links answers exactly what os.path.lexists answers."""
    (tmp_path / "f").write_text("x")
    os.symlink(tmp_path / "nope", tmp_path / "dangling")
    os.symlink(tmp_path / "f", tmp_path / "link")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "in").write_text("x")
    os.chmod(tmp_path / "locked", 0)
    fs = RealFileSystem()
    try:
        for p in ["f", "dangling", "link", "missing", "f/x", "locked/in", "dangling/x", ""]:
            path = str(tmp_path / p) if p else ""
            assert fs.lexists(path) == os.path.lexists(path), p
        assert fs.lexists("/tmp\x00x") is False
    finally:
        os.chmod(tmp_path / "locked", 0o700)


def test_is_mount_tells_mount_points_and_never_raises(tmp_path) -> None:
    from nexusd.policy.filesystem import RealFileSystem

    fs = RealFileSystem()
    assert fs.is_mount("/") and fs.is_mount("/proc")
    assert not fs.is_mount(str(tmp_path)) and not fs.is_mount(str(tmp_path / "missing")) and not fs.is_mount("a\0b")


def test_rm_r_of_a_mount_point_is_catastrophic_through_the_real_file_system(tmp_path) -> None:
    from nexusd.core.classify import classify
    from nexusd.core.model import Context, Flag
    from nexusd.policy.filesystem import DecisionFileSystem
    from nexusd.protocol import CallInfo

    ctx = Context(cwd=str(tmp_path), workspace_roots=(str(tmp_path),), home=str(tmp_path / "home"))
    cls = classify(
        CallInfo("claude", "s", "Bash", {"command": "rm -rf /proc"}, str(tmp_path)), ctx, DecisionFileSystem()
    )
    assert Flag.CATASTROPHIC in cls.flags
