"""Preview before effect: a sandboxed command on a real overlayfs under real bubblewrap, its diff, apply, discard."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.protocol import SandboxProbe
from nexusd.sandbox.preview import Change, Preview, fingerprints, summary

from .conftest import Result, World

EDIT = (
    "printf 'one\\nTWO\\nthree\\nfour\\n' > keep.txt; "  # changed: 1 line replaced, 1 added
    "rm gone.txt; "  # deleted
    "mkdir -p new/deep && printf 'hi\\n' > new/deep/file.txt && chmod 555 new/deep; "  # a read-only new dir
    "chmod +x tool.sh; "  # mode change only
    "rm -r olddir; "  # a directory deleted
    "printf 'x\\n' > .envrc; "  # a protected name: never applied
    "ln -s /etc/passwd link; "  # a symlink (created as a symlink, never followed)
    "cat keep.txt; echo done >&2; exit 3"
)


@pytest.fixture
def pworld(real_probe: SandboxProbe, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxpv", dir="/tmp"))
    for d in ("ws", "outside", "home", "cfg", "state", "managed", "run"):
        (root / d).mkdir()
    (root / "home" / ".bashrc").write_text("# real rc\n")
    for k, d in (("HOME", "home"), ("NEXUS_CONFIG_DIR", "cfg"), ("NEXUS_STATE_DIR", "state")):
        monkeypatch.setenv(k, str(root / d))
    monkeypatch.setenv("NEXUS_SOCKET", str(root / "run" / "nexusd.sock"))
    monkeypatch.setenv("NEXUS_MANAGED_DIR", str(root / "managed"))
    ws = root / "ws"
    (ws / "keep.txt").write_text("one\ntwo\nthree\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / "tool.sh").write_text("#!/bin/sh\n")
    (ws / "tool.sh").chmod(0o640)
    (ws / "olddir" / "sub").mkdir(parents=True)
    (ws / "olddir" / "sub" / "a.txt").write_text("a\n")
    yield World(root, real_probe, via="runner")
    subprocess.run(["chmod", "-R", "u+rwX", str(root)], check=False)
    subprocess.run(["rm", "-rf", str(root)], check=False)


def run_previewed(w: World, command: str) -> tuple[Preview, Result]:
    p = Preview.start(str(w.ws), w.root / "state" / "preview")
    return p, w.run(command, prefix=tuple(p.argv([])))


def tree(root: Path) -> dict[str, tuple[str, int, str]]:
    out = {}
    for rel in sorted(fingerprints(str(root))):
        p = root / rel
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            out[rel] = ("l", 0, os.readlink(p))
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = ("d", stat.S_IMODE(st.st_mode), "")
        else:
            out[rel] = ("f", stat.S_IMODE(st.st_mode), p.read_text())
    return out


def by_path(changes: list[Change]) -> dict[str, Change]:
    return {c.path: c for c in changes}


def test_the_command_writes_only_the_overlay_and_its_output_and_exit_code_pass(pworld: World) -> None:
    before = tree(pworld.ws)
    p, r = run_previewed(pworld, EDIT)
    assert r.rc == 3, r.err
    assert r.out == "one\nTWO\nthree\nfour\n"  # it read its own write through the overlay
    assert "done" in r.err
    assert tree(pworld.ws) == before  # the real workspace is untouched
    c = by_path(p.changes())
    assert set(c) == {
        "keep.txt",
        "gone.txt",
        "new",
        "new/deep",
        "new/deep/file.txt",
        "tool.sh",
        "olddir",
        ".envrc",
        "link",
    }
    assert (c["keep.txt"].kind, c["keep.txt"].added, c["keep.txt"].removed) == ("changed", 2, 1)
    assert (c["gone.txt"].kind, c["gone.txt"].removed) == ("deleted", 1)
    assert c["olddir"].kind == "deleted" and c["olddir"].what == "dir"
    assert c["new/deep/file.txt"].kind == "added" and c["new/deep/file.txt"].added == 1
    assert c["tool.sh"].kind == "changed" and c["tool.sh"].added == 0
    assert c["link"].what == "symlink"
    assert c[".envrc"].refused and not c["keep.txt"].refused
    assert summary(p.changes()) == "+4 ~2 -2 paths, +3/-2 lines, 1 refused"
    diff = p.diff_text()
    assert "+TWO" in diff and "-two" in diff and "+four" in diff and "-bye" in diff and "-> /etc/passwd" in diff
    assert "NOT APPLIED" in diff
    p.discard()
    assert not Path(p.base).exists()


def test_apply_carries_every_change_and_keeps_modes(pworld: World) -> None:
    p, r = run_previewed(pworld, EDIT)
    assert r.rc == 3, r.err
    res = p.apply()
    assert not res.conflicts and not res.errors, res
    assert res.refused == [".envrc: a protected path (the sandbox keeps it read-only)"]
    ws = pworld.ws
    assert (ws / "keep.txt").read_text() == "one\nTWO\nthree\nfour\n"
    assert not (ws / "gone.txt").exists() and not (ws / "olddir").exists()
    assert (ws / "new" / "deep" / "file.txt").read_text() == "hi\n"
    assert stat.S_IMODE((ws / "new" / "deep").stat().st_mode) == 0o555  # its mode, given after its files
    assert stat.S_IMODE((ws / "tool.sh").stat().st_mode) == 0o751  # chmod +x under umask 022
    assert os.readlink(ws / "link") == "/etc/passwd"
    assert not (ws / ".envrc").exists()
    assert p.changes() == [] or all(c.refused for c in p.changes())  # the overlay now equals the workspace


def test_discard_leaves_the_workspace_as_it_was(pworld: World) -> None:
    before = tree(pworld.ws)
    p, r = run_previewed(pworld, EDIT)
    assert r.rc == 3
    p.discard()
    assert tree(pworld.ws) == before


@pytest.mark.parametrize(
    "meddle",
    [
        lambda ws: (ws / "keep.txt").write_text("the person's edit\n"),
        lambda ws: (ws / "keep.txt").unlink(),
        lambda ws: (ws / "link").write_text("the person's file\n"),
        lambda ws: (ws / "olddir" / "sub" / "b.txt").write_text("new work\n"),
        lambda ws: (ws / "tool.sh").chmod(0o600),
    ],
    ids=["edited", "deleted", "created", "added-inside-deleted-dir", "chmod"],
)
def test_a_path_changed_meanwhile_is_a_conflict_and_nothing_is_written(pworld: World, meddle) -> None:  # type: ignore[no-untyped-def]
    p, r = run_previewed(pworld, EDIT)
    assert r.rc == 3
    meddle(pworld.ws)
    after_meddling = tree(pworld.ws)
    res = p.apply()
    assert len(res.conflicts) == 1, res
    assert res.applied == []
    assert tree(pworld.ws) == after_meddling
    forced = p.apply(force=True)
    assert not forced.errors
    assert (pworld.ws / "keep.txt").read_text() == "one\nTWO\nthree\nfour\n"


def test_apply_never_follows_a_symlink_planted_in_the_workspace(pworld: World) -> None:
    outside = pworld.outside
    p, r = run_previewed(pworld, "mkdir -p sub && echo evil > sub/x")
    assert r.rc == 0, r.err
    reviewed = p.changes()
    (pworld.ws / "sub").symlink_to(outside)  # planted after the command, before apply
    assert p.apply().conflicts == ["sub"]
    only_file = [c for c in reviewed if c.path == "sub/x"]
    res = p.apply(force=True, changes=only_file)
    assert res.errors and "not followed" in res.errors[0]
    assert list(outside.iterdir()) == []
    res = p.apply(force=True)  # the whole change: the symlink is removed as a file, a real directory made
    assert not res.errors, res
    assert list(outside.iterdir()) == []
    assert (pworld.ws / "sub").is_dir() and not (pworld.ws / "sub").is_symlink()
    assert (pworld.ws / "sub" / "x").read_text() == "evil\n"


def test_protected_paths_are_never_applied_in_any_spelling(pworld: World) -> None:
    cmd = (
        "mkdir -p .git/hooks .claude sub/.vscode .github/hooks && echo x > .git/hooks/pre-commit && "
        "echo x > .claude/settings.json && echo x > sub/.vscode/tasks.json && echo x > .github/hooks/h.json && "
        "echo x > sub/.bashrc; echo ok"
    )
    p, r = run_previewed(pworld, cmd)
    assert r.rc == 0 and r.out == "ok\n", r.err
    res = p.apply(force=True)
    assert not res.errors
    for rel in (".git/hooks/pre-commit", ".claude", "sub/.vscode", ".github/hooks", "sub/.bashrc"):
        assert not (pworld.ws / rel).exists(), rel


def test_deleting_a_tree_that_holds_a_protected_path_is_refused(pworld: World) -> None:
    nested = pworld.ws / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    (nested / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    p, r = run_previewed(pworld, "rm -rf vendor")
    assert r.rc == 0, r.err
    res = p.apply(force=True)
    assert res.refused and res.refused[0].startswith("vendor:")
    assert (nested / ".git" / "HEAD").exists()


def test_no_overlay_means_the_command_does_not_run(pworld: World) -> None:
    p = Preview.start(str(pworld.ws), pworld.root / "state" / "preview")
    os.rmdir(p.work)  # overlayfs needs its work directory: the mount fails
    r = pworld.run("echo ran > ran.txt; echo ran", prefix=tuple(p.argv([])))
    assert r.rc == 126 and "did not run" in r.err and r.out == ""
    assert not (pworld.ws / "ran.txt").exists()


def test_a_preview_directory_inside_the_workspace_is_refused(pworld: World) -> None:
    from nexusd.sandbox.preview import PreviewError

    with pytest.raises(PreviewError, match="overlap"):
        Preview.start(str(pworld.ws), pworld.ws / "state")


def test_a_stale_preview_directory_is_removed_and_a_fresh_one_kept(tmp_path: Path) -> None:
    ws, parent = tmp_path / "ws", tmp_path / "state" / "preview"
    ws.mkdir()
    old, fresh = parent / "p-old", parent / "p-fresh"
    (old / "work" / "work").mkdir(parents=True)
    (old / "work" / "work").chmod(0)  # as overlayfs leaves it
    fresh.mkdir()
    os.utime(old, (1, 1))
    p = Preview.start(str(ws), parent)
    assert not old.exists() and fresh.exists() and Path(p.base).is_dir()


def test_without_a_named_daemon_the_changes_are_discarded(tmp_path: Path) -> None:
    """The wrapper never asks the daemon its environment names (the agent's shell controls that)."""
    from nexusd.sandbox.previewrun import ask

    change = Change("a.txt", "added", "file", 1)
    assert ask({"workspace": str(tmp_path)}, ["bash", "-c", "x"], [change], "+x", 0) == (
        False,
        "no daemon to ask was named",
    )


def test_a_file_name_cannot_forge_lines_of_the_diff(pworld: World) -> None:
    cmd = "printf 'x\\n' > \"$(printf 'a\\n# deleted file keep.txt\\n\\033[2Jb')\"; ln -s \"$(printf 't\\nu')\" l"
    p, r = run_previewed(pworld, cmd)
    assert r.rc == 0, r.err
    diff = p.diff_text()
    assert "\n# deleted" not in diff and "\x1b" not in diff, diff
    assert "# added file a\\n# deleted file keep.txt\\n\\x1b[2Jb\n" in diff
    assert "-> t\\nu\n" in diff
    assert not p.apply().errors  # applied under its real name
    assert (pworld.ws / "a\n# deleted file keep.txt\n\x1b[2Jb").read_text() == "x\n"


def test_deleting_the_workspace_repository_is_never_applied(pworld: World) -> None:
    git = pworld.ws / ".git"
    (git / "objects" / "ab").mkdir(parents=True)
    (git / "objects" / "ab" / "cdef").write_text("blob")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    p, r = run_previewed(pworld, "rm -rf .git/objects .git/HEAD; rm -rf .git 2>/dev/null; echo ok")
    assert r.out == "ok\n", r.err
    res = p.apply(force=True)
    assert res.refused and not res.applied, res
    assert (git / "objects" / "ab" / "cdef").read_text() == "blob" and (git / "HEAD").exists()


def test_the_preview_setting_defaults_off_and_a_project_can_only_turn_it_on(tmp_path: Path) -> None:
    from nexusd.policy.sandbox_settings import merge_settings, parse_sandbox_layer

    f = tmp_path / "policy.toml"
    assert merge_settings([]).preview is False
    user_on = parse_sandbox_layer({"preview": True}, f)
    project_off = parse_sandbox_layer({"preview": False}, f, project=True)
    project_on = parse_sandbox_layer({"preview": True}, f, project=True)
    merged = merge_settings([user_on, project_off])
    assert merged.preview is True and any("preview = false" in line for line in merged.ignored)
    assert merge_settings([parse_sandbox_layer({}, f), project_on]).preview is True
    with pytest.raises(ValueError, match="preview"):
        parse_sandbox_layer({"preview": "ask"}, f)


def test_the_wrapper_says_only_that_the_command_did_not_run_when_no_overlay_is_made(tmp_path: Path) -> None:
    """A state path overlayfs cannot be told (a comma) refuses the command; no preview, no "nothing changed"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = {"workspace": str(ws), "parent": str(tmp_path / "st,ate"), "socket": str(tmp_path / "none.sock")}
    r = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "nexusd.sandbox.previewrun",
            json.dumps(spec),
            "--",
            "/bin/sh",
            "-c",
            "echo ran > f",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 126 and "did not run" in r.stderr and "nothing" not in r.stderr, r.stderr
    assert not (ws / "f").exists() and list((tmp_path / "st,ate").iterdir()) == []


def test_the_unshare_fallback_runs_on_the_overlay_too(pworld: World) -> None:
    before = tree(pworld.ws)
    p = Preview.start(str(pworld.ws), pworld.root / "state" / "preview")
    r = pworld.run("echo x >> keep.txt; rm gone.txt; cat keep.txt", backend="unshare", prefix=tuple(p.argv([])))
    assert r.rc == 0 and r.out == "one\ntwo\nthree\nx\n", r.err
    assert r.plan.backend == "unshare"
    assert tree(pworld.ws) == before
    assert {(c.path, c.kind) for c in p.changes()} == {("keep.txt", "changed"), ("gone.txt", "deleted")}
