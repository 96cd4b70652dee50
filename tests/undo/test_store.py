"""Undo's pieces in process: settings, retention, what a snapshot leaves out (ignored files, the daemon's
own state inside a workspace, shared directories), isolation from the person's git configuration, large
files streamed, and paths outside the workspace refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.undo import settings as st
from nexusd.undo.service import UndoService
from nexusd.undo.settings import UndoSettings
from tests.conftest import short_tmpdir


def svc(root: Path, state: Path | None = None, **kw: object) -> UndoService:
    state = state or root / "state"
    state.mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    return UndoService(
        state, root / "config", spawn=lambda *a: None, audit=lambda c, d: None, settings=UndoSettings(**kw)
    )  # type: ignore[arg-type]


def call(ws: Path, n: int = 0) -> p.CallInfo:
    return p.CallInfo("claude", "s", "Bash", {"command": f"step {n}"}, str(ws), workspace=str(ws))


def files_of(s: UndoService, ws: Path, tree: str) -> set[str]:
    return set(s.shadow(str(ws)).entries(tree))


def test_settings_parse_and_refuse_bad_values(tmp_path: Path) -> None:
    assert st.load(tmp_path) == UndoSettings()
    (tmp_path / "undo.toml").write_text(
        '[undo]\ntimeout = 2\non_failure = "deny"\nkeep_calls = 5\nextra_exclude = ["*.db"]\n'
    )
    got = st.load(tmp_path)
    assert (got.timeout, got.on_failure, got.keep_calls, got.errors) == (2.0, "deny", 5, [])
    assert "*.db" in got.exclude and "node_modules/" in got.exclude
    bad = st.parse({"timeout": 0, "on_failure": "maybe", "keep_calls": True, "nonsense": 1})
    assert bad.timeout == 10.0 and bad.on_failure == "allow" and bad.keep_calls == 2000
    assert len(bad.errors) == 4, bad.errors
    (tmp_path / "undo.toml").write_text("not toml [")
    assert st.load(tmp_path).errors  # a broken file: the defaults, said


def test_ignored_and_the_daemons_own_state_are_not_snapshotted() -> None:
    root = short_tmpdir()
    ws = root / "ws"
    (ws / "node_modules" / "x").mkdir(parents=True)
    (ws / "node_modules" / "x" / "i.js").write_text("dep")
    (ws / "out").mkdir()
    (ws / "out" / "a.o").write_text("obj")
    (ws / ".gitignore").write_text("out/\n")
    (ws / "src.py").write_text("code")
    (ws / ".git").mkdir()  # the workspace's own repository: never part of a snapshot
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    s = svc(root, state=ws / ".nexus-state")  # a state dir inside the workspace must not snapshot itself
    e = s.checkpoint(call(ws), None)
    assert e.tree is not None
    assert files_of(s, ws, e.tree) == {".gitignore", "src.py"}


@pytest.mark.parametrize("where", ["/", "/tmp", "~"])
def test_shared_directories_are_not_checkpointed(where: str) -> None:
    root = short_tmpdir()
    s = svc(root)
    target = os.path.expanduser(where)
    e = s.checkpoint(p.CallInfo("claude", "s", "Bash", {"command": "x"}, target, workspace=target), None)
    assert e.tree is None and "shared directory" in e.note


def test_person_git_config_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean filter or autocrlf in the person's config (or the workspace's .gitattributes) would make a
    snapshot differ from the bytes on disk, and run a program: neither happens."""
    root = short_tmpdir()
    home = root / "home"
    home.mkdir()
    marker = root / "filter-ran"
    (home / ".gitconfig").write_text(f'[core]\n\tautocrlf = true\n[filter "evil"]\n\tclean = touch {marker}\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    ws = root / "ws"
    ws.mkdir()
    (ws / ".gitattributes").write_text("* filter=evil text eol=crlf\n")
    (ws / "f.txt").write_bytes(b"a\nb\n")
    s = svc(root)
    e = s.checkpoint(call(ws), None)
    assert e.tree is not None and not marker.exists()
    sha = s.shadow(str(ws)).entries(e.tree)["f.txt"].sha
    assert s.shadow(str(ws)).blob(sha) == b"a\nb\n"


def test_retention_keeps_the_newest(tmp_path: Path) -> None:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    s = svc(root, keep_calls=3)
    for n in range(6):
        (ws / f"f{n}").write_text(str(n))
        s.checkpoint(call(ws, n), None)
    s.maintain(str(ws))
    kept = [e.id for e in s.history.snapshot()]
    assert kept == [4, 5, 6]
    refs = sorted(os.listdir(s.shadow(str(ws)).git_dir / "refs" / "nexus"))
    assert refs == ["c4", "c5", "c6"]
    again = svc(root, keep_calls=3)  # the rewritten history is what a restart reads
    assert [e.id for e in again.history.snapshot()] == [4, 5, 6]


def _sha256(path: Path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def test_large_file_round_trip_streams(tmp_path: Path) -> None:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    big = ws / "big.bin"
    with open(big, "wb") as f:
        f.write(os.urandom(1 << 20) * 24)  # 24 MiB
    s = svc(root)
    e = s.checkpoint(call(ws), None)
    digest = subprocess.run(["sha256sum", str(big)], capture_output=True, text=True, check=True).stdout.split()[0]
    big.write_bytes(b"truncated")
    r = s.rewind(p.Rewind(id=e.id, force=True), "test")
    assert r.ok, r
    assert (
        subprocess.run(["sha256sum", str(big)], capture_output=True, text=True, check=True).stdout.split()[0] == digest
    )


def test_paths_outside_the_workspace_are_refused() -> None:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    s = svc(root)
    e = s.checkpoint(call(ws), None)
    for bad in ("/etc/passwd", str(ws / ".." / "other"), "../x"):
        with pytest.raises(ValueError):
            s.rewind(p.Rewind(id=e.id, paths=[bad]), "test")
