"""Property: after any sequence of edits, creates, deletes, renames, mode changes and symlink changes (made
by file tools, i.e. Python, and by shell commands, i.e. real bash), rewinding to any checkpoint reproduces
exactly the tree recorded there: every file's bytes, its executable bit, every symlink's target, and
nothing more (ignored files excepted, which are left as they are). The rewind goes through the daemon's
own code (``UndoService.checkpoint`` and ``rewind``), in process, without a socket."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nexusd import protocol as p
from nexusd.undo.service import UndoService
from nexusd.undo.settings import UndoSettings
from tests.conftest import examples, short_tmpdir

NAMES = [
    *("a", "b", "c.txt", "d e", "ünï", "-dash", "not-utf8-\udcff", "new\nline"),
    *("sub/x", "sub/y", "sub/deep/z", "other/w", "build/out.o"),
]
CONTENT = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=40).map(lambda s: s.encode()),
    st.just(b"line1\nline2\n"),
    st.just(b""),
)


def tree(ws: Path) -> dict[str, tuple[str, Any]]:
    """The workspace as the property sees it: files (bytes, executable) and symlinks (target), no dirs."""
    out: dict[str, tuple[str, Any]] = {}
    for root, dirs, files in os.walk(ws):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, ws)
            if rel.startswith("build/") or rel == ".gitignore":
                continue  # ignored (build/), and the ignore file itself is set once
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", (Path(full).read_bytes(), bool(st_.st_mode & 0o100)))
    return out


def ignored_state(ws: Path) -> bytes | None:
    f = ws / "build" / "out.o"
    return f.read_bytes() if f.is_file() and not f.is_symlink() else None


def _clear(ws: Path, rel: str) -> None:
    """Make room for a new file at ``rel``: what is in the way (a file where a directory goes, or the
    reverse) is removed, as an agent's tool would."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        d = ws.joinpath(*parts[:i])
        if d.is_symlink() or d.is_file():
            d.unlink()
    target = ws / rel
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        subprocess.run(["rm", "-rf", str(target)], check=True)


OP = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), CONTENT, st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.booleans(), st.booleans()),
    st.tuples(st.just("symlink"), st.sampled_from(NAMES), st.sampled_from(["a", "../outside", "sub", "nowhere"])),
)


def apply(ws: Path, op: tuple[Any, ...]) -> None:
    kind, name = op[0], op[1]
    target = ws / name
    if kind == "write":
        _, _, data, by_shell = op
        _clear(ws, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if by_shell:  # real bash: printf of the bytes as octal escapes, through a redirect
            esc = "".join(f"\\{b:03o}" for b in data)
            subprocess.run(["bash", "-c", f"printf '{esc}' > {shlex.quote(name)}"], cwd=ws, check=True)
        else:
            target.write_bytes(data)
    elif kind == "delete":
        if target.is_symlink() or target.is_file():
            subprocess.run(["rm", "-f", "--", name], cwd=ws, check=True)
    elif kind == "rename":
        _, _, dst, by_shell = op
        if not (target.is_file() or target.is_symlink()) or dst == name or dst.startswith(name + "/"):
            return
        _clear(ws, dst)
        (ws / dst).parent.mkdir(parents=True, exist_ok=True)
        if by_shell:
            subprocess.run(["mv", "--", name, dst], cwd=ws, check=True)
        else:
            os.rename(target, ws / dst)
    elif kind == "chmod":
        _, _, executable, by_shell = op
        if not target.is_file() or target.is_symlink():
            return
        if by_shell:
            subprocess.run(["chmod", "+x" if executable else "-x", "--", name], cwd=ws, check=True)
        else:
            target.chmod(0o755 if executable else 0o644)
    elif kind == "symlink":
        _clear(ws, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(op[2], target)


def service(root: Path) -> UndoService:
    (root / "state").mkdir(exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    return UndoService(
        root / "state",
        root / "config",
        spawn=lambda *a: None,
        audit=lambda c, d: None,
        settings=UndoSettings(exclude=()),
    )


def checkpoint(svc: UndoService, ws: Path, n: int) -> int:
    call = p.CallInfo(
        provider="claude", session="prop", tool="Bash", input={"command": f"op {n}"}, cwd=str(ws), workspace=str(ws)
    )
    entry = svc.checkpoint(call, None)
    assert entry.tree is not None, entry.note
    return entry.id


@settings(max_examples=examples(40))
@given(ops=st.lists(OP, min_size=1, max_size=12), picks=st.lists(st.integers(0, 100), min_size=1, max_size=3))
def test_rewind_reproduces_every_recorded_tree(ops: list[tuple[Any, ...]], picks: list[int]) -> None:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    (ws / ".gitignore").write_text("build/\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.o").write_bytes(b"ignored, kept as it is")
    svc = service(root)
    try:
        _rewind_every_tree(svc, root, ws, ops, picks)
    finally:
        svc.close()  # its watchers: inotify instances are few


def _rewind_every_tree(svc: UndoService, root: Path, ws: Path, ops: list[tuple[Any, ...]], picks: list[int]) -> None:
    recorded: list[tuple[int, dict[str, tuple[str, Any]]]] = []
    for n, op in enumerate(ops):
        recorded.append((checkpoint(svc, ws, n), tree(ws)))  # before the call, as the daemon takes it
        apply(ws, op)
    final = tree(ws)
    for pick in picks:
        cid, expected = recorded[pick % len(recorded)]
        ignored = ignored_state(ws)
        reply = svc.rewind(p.Rewind(id=cid, force=True), "property test")
        assert reply.ok, reply
        assert tree(ws) == expected, (cid, ops, reply.changes)
        p.encode(reply)  # every name goes on the wire (not UTF-8 ones escaped)
        p.encode(svc.query(p.History(id=cid, diff=True)))
        assert ignored_state(ws) == ignored  # ignored files are left as they are
        assert not (root / "outside").exists()
    # and a rewind can itself be rewound: its rescue checkpoint holds the tree it replaced
    rescues = [e.id for e in svc.history.snapshot() if e.kind == "rescue"]
    if len(picks) == 1 and rescues:
        assert svc.rewind(p.Rewind(id=rescues[-1], force=True), "property test").ok
        assert tree(ws) == final


@settings(max_examples=examples(20))
@given(ops=st.lists(OP, min_size=1, max_size=8), pick=st.integers(0, 100), path=st.sampled_from(NAMES))
def test_one_file_rewind_touches_only_that_file(ops: list[tuple[Any, ...]], pick: int, path: str) -> None:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    svc = service(root)
    try:
        _rewind_one_file(svc, ws, ops, pick, path)
    finally:
        svc.close()


def _rewind_one_file(svc: UndoService, ws: Path, ops: list[tuple[Any, ...]], pick: int, path: str) -> None:
    recorded: list[tuple[int, dict[str, tuple[str, Any]]]] = []
    for n, op in enumerate(ops):
        recorded.append((checkpoint(svc, ws, n), tree(ws)))
        apply(ws, op)
    now = tree(ws)
    cid, then = recorded[pick % len(recorded)]
    reply = svc.rewind(p.Rewind(id=cid, force=True, paths=[str(ws / path)]), "property test")
    assert reply.ok, reply
    after = tree(ws)
    inside = {k for k in {*now, *then, *after} if k == path or k.startswith(path + "/")}
    for k in inside:
        assert after.get(k) == then.get(k), k
    for k in {*now, *after} - inside:
        if not any(k.startswith(q + "/") for q in inside) and not any(q.startswith(k + "/") for q in inside):
            assert after.get(k) == now.get(k), k
