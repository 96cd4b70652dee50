"""The real file system behind the classifier: the kernel realpath shortcut agrees with os.path.realpath."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from nexusd.core.model import Session
from nexusd.policy.filesystem import DecisionFileSystem, RealFileSystem, same_realpath
from nexusd.policy.gate import begin
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo


def _links(tmp_path: Path) -> None:
    """a/b, and links into it, out to /etc, dangling, in a loop, and relative."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "a" / "b", tmp_path / "l")
    os.symlink("/etc", tmp_path / "a" / "b" / "e")
    os.symlink(tmp_path / "nope", tmp_path / "dangling")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink("rel/../b", tmp_path / "a" / "r")


def test_realpath_matches_the_library_on_every_kind_of_path(tmp_path: Path):
    _links(tmp_path)
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
        assert same_realpath(p) == os.path.realpath(p), p  # what the sandbox plan resolves with
        decision = DecisionFileSystem()  # as the classifier asks: lexists first, then realpath
        decision.lexists(p)
        assert decision.realpath(p) == os.path.realpath(p), p


def _tricky_paths(tmp_path: Path) -> list[str]:
    """Links to directories and outside, dangling links, loops, relative links, missing names, a file used as
    a directory, a directory without search permission, relative and NUL-holding spellings."""
    _links(tmp_path)
    (tmp_path / "file").write_text("x")
    (tmp_path / "locked" / "in").mkdir(parents=True)
    os.symlink("../file", tmp_path / "a" / "f")
    names = ["", "l", "l/..", "l/e/hostname", "dangling", "dangling/x", "missing", "missing/x", "loop1", "a/r",
             "a/f", "a/f/x", "a/./b/", "file", "file/missing", "l/e/nope/", "locked", "locked/in", "locked/in/x",
             "a//b", "l/../a", "missing/../a"]  # fmt: skip
    return [str(tmp_path) + ("/" + n if n else "") for n in names] + ["/", "//tmp", "/proc/self", "rel/x", "/tmp\x00x"]


def test_realpath_if_lexists_is_the_two_questions_in_one(tmp_path: Path):
    """The one-call form answers exactly ``realpath if lexists else None``, whichever question this decision
    asked before (none, lexists, realpath), and remembers answers the separate questions then repeat."""
    paths = _tricky_paths(tmp_path)
    os.chmod(tmp_path / "locked", 0)
    try:
        for p in paths:
            expected = RealFileSystem().realpath(p) if RealFileSystem().lexists(p) else None
            for first in (None, "lexists", "realpath"):
                fs = DecisionFileSystem()
                if first is not None:
                    getattr(fs, first)(p)
                assert fs.realpath_if_lexists(p) == expected, (p, first)
                assert fs.lexists(p) is (expected is not None), (p, first)
                if expected is not None:
                    assert fs.realpath(p) == expected, (p, first)
    finally:
        os.chmod(tmp_path / "locked", 0o700)


def test_same_realpath_is_the_librarys_answer_or_its_error(tmp_path: Path):
    """The sandbox plan's realpath (``same_realpath``) answers what ``os.path.realpath`` answers, for every
    tricky path and one below each, or raises what it raises (a NUL)."""
    paths = _tricky_paths(tmp_path)
    paths += [p + "/new/deeper" for p in paths]
    os.chmod(tmp_path / "locked", 0)
    try:
        for p in paths:
            try:
                expected: object = os.path.realpath(p)
            except ValueError as e:
                expected = type(e)
            try:
                got: object = same_realpath(p)
            except ValueError as e:
                got = type(e)
            assert got == expected, p
    finally:
        os.chmod(tmp_path / "locked", 0o700)


def test_canonical_is_the_same_with_and_without_the_one_call_form(tmp_path: Path):
    """The classifier's canonical form of every tricky path (missing tails on top of links included) is
    the same through the decision file system (one call) as through the plain one (two questions)."""
    from nexusd.core.classify.paths import _canonical

    paths = _tricky_paths(tmp_path)
    paths += [p + "/new/deeper" for p in paths if p.startswith("/") and "\x00" not in p]
    os.chmod(tmp_path / "locked", 0)
    try:
        for p in paths:
            if p.startswith("/") and "\x00" not in p:
                assert _canonical(p, DecisionFileSystem()) == _canonical(p, RealFileSystem()), p
    finally:
        os.chmod(tmp_path / "locked", 0o700)


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


def test_size_and_head_is_size_then_head(tmp_path: Path):
    """One open answers what ``size`` and ``head`` answer one after the other, on every kind of file."""
    import socket

    (tmp_path / "f").write_bytes(b"ab\x00cd" * 1000)
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "f", tmp_path / "link")
    os.symlink(tmp_path / "nope", tmp_path / "dangling")
    os.symlink(tmp_path / "d", tmp_path / "dirlink")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    fs = RealFileSystem()
    try:
        names = ["f", "empty", "d", "fifo", "link", "dangling", "dirlink", "sock", "missing", "f/x"]
        for p in [*(str(tmp_path / n) for n in names), "/dev/null", "/dev/zero", "/proc/version", "/x\x00y", ""]:
            for n in (0, 3, 8192):
                assert fs.size_and_head(p, n) == (fs.size(p), _plain_head(p, n)), (p, n)
                assert fs.head(p, n) == _plain_head(p, n), (p, n)
    finally:
        sock.close()


def _plain_head(path: str, n: int) -> bytes | None:
    """The first ``n`` bytes of a regular file (links followed), else None: what ``head`` must answer."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return None


@pytest.mark.parametrize("spelling", ["fifo", "link-to-fifo", "dir/../fifo"])
def test_classifying_never_opens_a_fifo(tmp_path: Path, spelling: str) -> None:
    """Opening a FIFO's read end lets a writer blocked in open() go on: a Read of one, classified, must not.
    (The same holds for devices, whose open may act: a camera's light.) Through the file system and through
    a whole decision of a Read call."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.symlink(fifo, tmp_path / "link-to-fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / ".git").mkdir()
    released = threading.Event()

    def writer() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # blocks until somebody opens the read end
        released.set()
        os.close(fd)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        path = str(tmp_path / spelling)
        fs = RealFileSystem()
        assert fs.size_and_head(path, 64)[1] is None and fs.head(path, 64) is None
        call = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": path}, cwd=str(tmp_path))
        for d in ("config", "state", "managed"):
            (tmp_path / d).mkdir(exist_ok=True)
        store = PolicyStore(
            config_dir=tmp_path / "config", state_dir=tmp_path / "state", managed_dir=tmp_path / "managed"
        )
        store.load()
        begin(call, store, Session(id="s"))
        assert not released.wait(0.3), "the FIFO was opened for reading"
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the writer go
        t.join(5)
