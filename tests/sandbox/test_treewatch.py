"""The fenced inotify watch that proves a cached workspace walk fresh (``nexusd.sandbox.treewatch``): every
change that could alter the answer (a nested ``.git/hooks`` or any protected name, made in any spelling)
is seen by the next question, which then walks again; whatever the watch cannot vouch for falls back to the
stamp proof, and the answer always equals a fresh walk's. Real files (tmp_path), real inotify, real bash
and git where they decide what a change is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.sandbox import nested, treewatch, walkers
from nexusd.sandbox.treewatch import TreeWatches


@pytest.fixture
def watches(tmp_path: Path) -> Iterator[TreeWatches]:
    """This process's walks watched (as in a walker child), min_dirs 1 so small trees are watched too."""
    fence = tmp_path / "fence"
    fence.mkdir()
    w = TreeWatches(str(fence), min_dirs=1)
    nested._cache.clear()
    nested.watch_trees(w)
    try:
        yield w
    finally:
        nested.watch_trees(None)
        nested._cache.clear()


def _tree(root: Path) -> Path:
    for d in ("a/.git/hooks", "a/src/pkg", "b/sub/deep", "node_modules/pkg/.git/hooks", "c/.github"):
        (root / d).mkdir(parents=True)
    (root / "a" / ".git" / "config").write_text("[core]\n")
    (root / "a" / "src" / "pkg" / "m.py").write_text("x = 1\n")
    return root


def _same(f: nested.Found, g: nested.Found) -> bool:
    """The same answer: paths, secrets, links, and the directories listed with their stamps (in any order:
    an updated answer lists the directories walked again last)."""
    return (f.paths, f.complete, f.secrets, f.links, sorted(f.dirs)) == (
        g.paths,
        g.complete,
        g.secrets,
        g.links,
        sorted(g.dirs),
    )


CHANGED = ("update", "walk")  # walked again: the changed directories, or the whole root


def _ask(root: Path) -> tuple[nested.Found, str]:
    found = nested.find_protected(str(root))
    return found, nested.last_proof()


def _fresh(root: Path) -> nested.Found:
    return nested._walk(str(root))


def _bash(script: str, cwd: Path) -> None:
    subprocess.run(["bash", "-c", script], cwd=cwd, check=True, capture_output=True)


def _mtime_set_back(parent: Path, name: str) -> None:
    before = os.stat(parent)
    (parent / name).mkdir()
    os.utime(parent, ns=(before.st_atime_ns, before.st_mtime_ns))


# Each change class in several spellings; each makes a protected path appear (or go) below the root.
CHANGES: dict[str, Callable[[Path, Path], None]] = {
    "mkdir -p deep .git/hooks (python)": lambda r, o: os.makedirs(r / "b" / "sub" / "deep" / ".git" / "hooks"),
    "mkdir -p (bash)": lambda r, o: _bash("mkdir -p b/sub/deep/.git/hooks", r),
    "git init in a subdirectory": lambda r, o: _bash("git init -q b/sub/deep", r),
    "hooks only, in an existing .git": lambda r, o: (r / "a" / ".git" / "hooks").rename(r / "a" / ".git" / "h"),
    "rename a repository in from outside": lambda r, o: (o / "repo").rename(r / "b" / "sub" / "repo"),
    "mv a repository in (bash)": lambda r, o: _bash(f"mv {o / 'repo'} b/", r),
    "symlink .git (python)": lambda r, o: os.symlink(o / "repo" / ".git", r / "b" / ".git"),
    "ln -s .claude (bash)": lambda r, o: _bash(f"ln -s {o} b/sub/.claude", r),
    "a dir moved out of node_modules into view": lambda r, o: (r / "node_modules" / "pkg").rename(r / "b" / "pkg"),
    "node_modules renamed into view (bash)": lambda r, o: _bash("mv node_modules vendor", r),
    ".vscode made": lambda r, o: (r / "a" / "src" / ".vscode").mkdir(),
    ".github/hooks made": lambda r, o: (r / "c" / ".github" / "hooks").mkdir(),
    ".envrc hard-linked in": lambda r, o: os.link(o / "plain", r / "b" / "sub" / ".envrc"),
    ".env written (bash redirection)": lambda r, o: _bash("echo K=1 > b/.env", r),
    "protected dir removed": lambda r, o: shutil.rmtree(r / "a" / ".git"),
    "a directory swapped for another": lambda r, o: _bash(f"mv b {o}/b.old && mv {o}/repo b", r),
    "mkdir, then the mtime set back": lambda r, o: _mtime_set_back(r / "b" / "sub", ".vscode"),
    "mkdir, then touch -d (bash)": lambda r, o: _bash("mkdir b/.cursor && touch -d '2001-01-01' b", r),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_every_change_class_is_seen_by_the_next_question(name: str, tmp_path: Path, watches: TreeWatches) -> None:
    root = _tree(tmp_path / "ws")
    outside = tmp_path / "outside"
    (outside / "repo" / ".git" / "hooks").mkdir(parents=True)
    (outside / "plain").write_text("export X=1\n")
    first, proof = _ask(root)
    assert proof == "walk" and watches.watching(str(root)) > 0
    again, proof = _ask(root)
    assert proof == "watch" and again is first  # nothing changed: proven by the watch alone
    CHANGES[name](root, outside)
    after, proof = _ask(root)
    assert proof in CHANGED, f"{name}: the change was not seen ({proof})"
    assert _same(after, _fresh(root)) and not _same(after, first), name
    assert _ask(root)[1] == "watch"  # watched on


def test_changes_that_leave_the_listing_alone_keep_the_watch(tmp_path: Path, watches: TreeWatches) -> None:
    """Writing, touching or chmod-ing files changes no directory's listing: the answer stands."""
    root = _tree(tmp_path / "ws")
    first, _ = _ask(root)
    m = root / "a" / "src" / "pkg" / "m.py"
    m.write_text("x = 2\n")
    os.utime(m, (1, 1))
    os.chmod(m, 0o600)
    _bash("echo more >> a/src/pkg/m.py; touch a/src/pkg/m.py", root)
    (root / "node_modules" / "pkg" / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")  # not walked
    again, proof = _ask(root)
    assert proof == "watch" and again is first


def test_a_directory_whose_own_attributes_change_is_walked_again(tmp_path: Path, watches: TreeWatches) -> None:
    """As the stamps' ctime: a watched directory's mode, owner or times moved means walk again."""
    root = _tree(tmp_path / "ws")
    _ask(root)
    os.chmod(root / "b" / "sub", 0o700)
    found, proof = _ask(root)
    assert proof == "update" and _same(found, _fresh(root))
    os.utime(root / "a" / ".git", (5, 5))  # a .git looked into (its hooks and config)
    found, proof = _ask(root)
    assert proof == "update" and _same(found, _fresh(root))


def test_the_root_replaced_or_moved_is_walked_again(tmp_path: Path, watches: TreeWatches) -> None:
    root = _tree(tmp_path / "ws")
    _ask(root)
    root.rename(tmp_path / "ws.old")
    _tree(tmp_path / "ws")
    (root / "b" / ".claude").mkdir()
    found, proof = _ask(root)
    assert proof == "walk" and str(root / "b" / ".claude") in found.paths
    # an ancestor renamed and another put in its place: the root's device and inode say so
    _ask(root)
    (tmp_path / "p").mkdir()
    _tree(tmp_path / "p" / "ws")
    (tmp_path / "p" / "ws" / ".vscode").mkdir()
    inner = tmp_path / "p" / "ws"
    _ask(inner)
    (tmp_path / "p").rename(tmp_path / "p.old")
    _tree(tmp_path / "p" / "ws")
    found, proof = _ask(inner)
    assert proof == "walk" and str(inner / ".vscode") not in found.paths


# --------------------------------------------------------------------------- what it cannot vouch for


def test_fallback_queue_overflow(tmp_path: Path, watches: TreeWatches) -> None:
    """A real overflow: more events than ``max_queued_events`` before the next question (attribute changes
    of files, which are not changes of the answer: the stamps then prove it, and a later change is seen)."""
    root = _tree(tmp_path / "ws")
    files = [root / "a" / "x", root / "a" / "y"]
    for f in files:
        f.write_text("")
    _ask(root)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for i in range(limit + 10):  # alternating files: the kernel merges only repeats of the last event
        os.chmod(files[i % 2], 0o600 if i % 4 < 2 else 0o644)
    again, proof = _ask(root)
    assert proof == "stamps" and _same(again, _fresh(root))
    assert "overflowed" in watches.last[str(root)] and watches.watching(str(root)) == 0
    (root / "a" / "src" / ".git" / "hooks").mkdir(parents=True)
    found, proof = _ask(root)
    assert proof == "walk" and str(root / "a" / "src" / ".git" / "hooks") in found.paths
    assert _ask(root)[1] == "watch"  # re-armed by that walk


def test_fallback_too_many_directories_and_the_watch_limit(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    fence = tmp_path / "fence"
    fence.mkdir()
    nested._cache.clear()
    nested.watch_trees(w := TreeWatches(str(fence), min_dirs=1, max_watches=4))
    try:
        assert _ask(root)[1] == "walk" and "more than 4 directories" in w.last[str(root)]
        assert _ask(root)[1] == "stamps"
        (root / "b" / ".git" / "hooks").mkdir(parents=True)
        found, proof = _ask(root)
        assert proof == "walk" and str(root / "b" / ".git" / "hooks") in found.paths
    finally:
        nested.watch_trees(None)
        nested._cache.clear()


def test_small_trees_and_bounded_walks_are_proven_by_stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path / "ws")
    fence = tmp_path / "fence"
    fence.mkdir()
    nested._cache.clear()
    nested.watch_trees(w := TreeWatches(str(fence)))  # the default minimum (128 directories)
    try:
        _ask(root)
        assert _ask(root)[1] == "stamps" and "fewer than" in w.last[str(root)]
        w.min_dirs = 1
        monkeypatch.setattr(nested, "MAX_ENTRIES", 5)
        nested._cache.clear()
        assert not _ask(root)[0].complete and "bound" in w.last[str(root)]
        assert _ask(root)[1] == "stamps"
    finally:
        nested.watch_trees(None)
        nested._cache.clear()


def test_fallback_a_file_system_inotify_cannot_vouch_for(
    tmp_path: Path, watches: TreeWatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Injected: no network or FUSE file system can be mounted by a test here (the mount table is faked)."""
    root = _tree(tmp_path / "ws")
    monkeypatch.setattr(treewatch, "mounts", lambda: b"22 1 0:50 / / rw - nfs4 srv:/ rw\n")
    _ask(root)
    assert "nfs4" in watches.last[str(root)] and _ask(root)[1] == "stamps"


def test_fallback_a_mount_below_the_root_is_made(
    tmp_path: Path, watches: TreeWatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Injected into the mount table as read here (a real mount: ``test_real_mounts_below_the_root``);
    a mount elsewhere changes nothing."""
    root = _tree(tmp_path / "ws")
    table = treewatch.mounts()
    _ask(root)
    elsewhere = table + b"99 1 0:77 / /srv/elsewhere rw - tmpfs tmpfs rw\n"
    monkeypatch.setattr(treewatch, "mounts", lambda: elsewhere)
    assert _ask(root)[1] == "watch"
    below = table + f"98 1 0:78 / {root}/b/sub rw - tmpfs tmpfs rw\n".encode()
    monkeypatch.setattr(treewatch, "mounts", lambda: below)
    found, proof = _ask(root)
    assert proof == "stamps" and "mount" in watches.last[str(root)] and _same(found, _fresh(root))


def test_fallback_the_fence_watch_removed(tmp_path: Path, watches: TreeWatches) -> None:
    root = _tree(tmp_path / "ws")
    _ask(root)
    tree = watches._trees[str(root)]
    assert tree.ino is not None
    tree.ino.rm_watch(tree.fence_wd)
    assert _ask(root)[1] == "stamps" and "fence's watch" in watches.last[str(root)]


def test_a_root_holding_the_fence_directory_is_not_watched(tmp_path: Path, watches: TreeWatches) -> None:
    """The fence's own events would hide changes there: such a root (``/tmp`` holding the walker's fence)
    is proven by stamps."""
    _tree(tmp_path / "ws")
    _ask(tmp_path)
    assert _ask(tmp_path)[1] == "stamps" and "fence" in watches.last[str(tmp_path)]


def test_roots_and_watches_are_bounded(tmp_path: Path) -> None:
    fence = tmp_path / "fence"
    fence.mkdir()
    roots = [_tree(tmp_path / f"ws{i}") for i in range(4)]
    nested._cache.clear()
    nested.watch_trees(w := TreeWatches(str(fence), min_dirs=1, max_roots=2, max_watches=40))
    try:
        for r in roots:
            _ask(r)
        assert [w.watching(str(r)) > 0 for r in roots] == [False, False, True, True]
        assert sum(w.watching(str(r)) for r in roots) <= 40
        assert _ask(roots[0])[1] == "stamps"  # dropped, proven the old way
    finally:
        nested.watch_trees(None)
        nested._cache.clear()


_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "mkdir",
                "git",
                "rename_in",
                "rename_out",
                "symlink",
                "rm",
                "touch",
                "env",
                "move",
                "replace",
                "chmod",
                "away_and_back",
                "swap_copy",
            ]
        ),
        st.integers(0, 5),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_OPS)
def test_a_watched_answer_always_equals_a_fresh_walk(ops: list[tuple[str, int, int]]) -> None:
    """Memo versus fresh: after any sequence of changes, the next answer is the fresh walk's."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "fence").mkdir()
        (base / "out").mkdir()
        root = _tree(base / "ws")
        places = [root / "a", root / "a" / "src", root / "b", root / "b" / "sub" / "deep", root / "c" / ".github", root]
        nested._cache.clear()
        nested.watch_trees(TreeWatches(str(base / "fence"), min_dirs=1))
        try:
            _ask(root)
            for n, (op, i, j) in enumerate(ops):
                at, to = places[i], places[j]
                if not at.is_dir() or at.is_symlink():
                    continue
                target = at / f".git{n}" if op != "env" else at / ".env"
                if op == "mkdir":
                    (at / f"d{n}" / ".git" / "hooks").mkdir(parents=True)
                elif op == "git":
                    (at / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
                elif op == "rename_in":
                    (base / "out" / f"r{n}" / ".vscode").mkdir(parents=True)
                    (base / "out" / f"r{n}").rename(at / f"r{n}")
                elif op == "rename_out" and at != root:
                    at.rename(base / "out" / f"gone{n}")
                elif op == "symlink" and not os.path.lexists(at / ".claude"):
                    os.symlink(base / "out", at / ".claude", target_is_directory=True)
                elif op == "rm":
                    shutil.rmtree(at / ".git", ignore_errors=True)
                elif op == "touch":
                    target.touch()
                elif op == "env":
                    target.write_text("K=1\n")
                elif op == "move" and to.is_dir() and at != root and not str(to).startswith(str(at)):
                    at.rename(to / f"m{n}")  # within the tree: its watch goes with it
                elif op == "replace" and at != root:
                    shutil.rmtree(at)
                    (at / "x" / ".git" / "hooks").mkdir(parents=True)
                elif op == "chmod":
                    os.chmod(at, 0o755 if n % 2 else 0o700)
                elif op == "swap_copy" and at != root:
                    # moved away and a copy put in its place (new directories, never watched, no events of
                    # their own) with a hook planted deep inside the copy
                    at.rename(base / "out" / f"sw{n}")
                    shutil.copytree(base / "out" / f"sw{n}", at, symlinks=True)
                    deep = next((c for c in sorted(at.rglob("*")) if c.is_dir() and not c.is_symlink()), at)
                    (deep / f"z{n}" / ".git" / "hooks").mkdir(parents=True)
                elif op == "away_and_back" and at != root:  # the same inode back at its path, changed meanwhile
                    at.rename(base / "out" / f"away{n}")
                    (base / "out" / f"away{n}" / f"w{n}" / ".git" / "hooks").mkdir(parents=True)
                    (base / "out" / f"away{n}").rename(at)
                got, _ = _ask(root)
                assert _same(got, _fresh(root)), (op, i)
        finally:
            nested.watch_trees(None)
            nested._cache.clear()


# --------------------------------------------------------------------------- in a walker child, for real


def _big(root: Path, repos: int) -> Path:
    for i in range(repos):
        for d in (".git/hooks", "src/pkg", "tests"):
            (root / f"r{i:03d}" / d).mkdir(parents=True)
    return root


def test_a_walker_child_proves_by_its_watch_and_sees_a_planted_hook(tmp_path: Path) -> None:
    root = _big(tmp_path / "ws", 40)  # 200 directories: past the child's minimum
    w = walkers.Walkers(1, timeout=60)
    try:
        first = w.find(str(root))
        assert first.proof == "walk"
        again = w.find(str(root))
        assert again.proof == "watch" and again.paths == first.paths
        _bash("mkdir -p r007/src/pkg/vendored/.git/hooks && touch -d 2001-01-01 r007/src/pkg", root)
        after = w.find(str(root))
        assert after.proof == "update" and str(root / "r007/src/pkg/vendored/.git/hooks") in after.paths
        assert w.find(str(root)).proof == "watch"
    finally:
        w.close()


_MOUNT_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from pathlib import Path
    from nexusd.sandbox import nested
    from nexusd.sandbox.treewatch import TreeWatches
    root, fence = Path(sys.argv[1]), sys.argv[2]
    for i in range(3):
        (root / f"d{i}" / "sub").mkdir(parents=True)
    nested.watch_trees(TreeWatches(fence, min_dirs=1))
    def ask():
        found = nested.find_protected(str(root))
        return found, nested.last_proof()
    ask()
    assert ask()[1] == "watch"
    subprocess.run(["mount", "-t", "tmpfs", "t", str(root / "d1")], check=True)
    (root / "d1" / ".git" / "hooks").mkdir(parents=True)  # on the new mount: no event in the tree
    found, proof = ask()
    assert proof in ("stamps", "walk") and str(root / "d1" / ".git" / "hooks") in found.paths, (proof, found.paths)
    found, proof = ask()
    assert proof in ("watch", "walk"), proof
    subprocess.run(["umount", str(root / "d1")], check=True)
    found, proof = ask()
    assert proof in ("stamps", "walk") and str(root / "d1" / ".git" / "hooks") not in found.paths, (proof, found.paths)
    print("ok")
    """
)


def test_real_mounts_below_the_root(tmp_path: Path) -> None:
    """A real tmpfs mounted over, then unmounted from, a watched directory (in a mount namespace of the
    test's own, as the unprivileged user namespace allows; skipped where it does not)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no unprivileged mount namespace here")
    (tmp_path / "fence").mkdir()
    out = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", _MOUNT_SCRIPT, str(tmp_path / "ws"), str(tmp_path / "fence")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_plan_through_the_walkers_binds_a_hook_planted_since_read_only(tmp_path: Path, real_probe) -> None:
    """The daemon's path: plans routed through a walker child whose watch proves (and updates) the scan. A
    hook planted deep down between two plans is bound read-only by the second, and a real bwrap run of
    that plan cannot write it."""
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import plan_command

    ws = _big(tmp_path / "ws", 40)
    store = PolicyStore(config_dir=tmp_path / "c", state_dir=tmp_path / "s", managed_dir=tmp_path / "m")
    store.load()
    w = walkers.Walkers(1, timeout=60)
    nested.walk_elsewhere(w)
    try:
        assert plan_command("true", str(ws), store, real_probe, workspace=str(ws)).allowed
        assert w.find(str(ws)).proof == "watch"
        hooks = ws / "r013" / "src" / "pkg" / "inner" / ".git" / "hooks"
        _bash(f"mkdir -p {hooks} && touch -d 2001-01-01 {hooks.parent.parent}", ws)
        plan = plan_command("echo x > " + str(hooks / "pre-commit"), str(ws), store, real_probe, workspace=str(ws))
        argv = plan.argv
        assert any(argv[i] == "--ro-bind" and argv[i + 1] == str(hooks) for i in range(len(argv) - 1))
        assert w.find(str(ws)).proof == "watch"  # the plan's own question updated it
        if plan.backend == "bwrap":
            ran = subprocess.run(argv, cwd=ws, capture_output=True, timeout=60)
            assert ran.returncode != 0 and not (hooks / "pre-commit").exists(), ran.stderr
    finally:
        nested.walk_elsewhere(None)
        w.close()


def test_the_watch_budget_leaves_the_users_watches_to_others(tmp_path: Path) -> None:
    limit = tmp_path / "max_user_watches"
    limit.write_text("8192\n")  # kernels before 5.11
    assert treewatch.watch_budget(str(limit)) == 512
    limit.write_text("1048576\n")
    assert treewatch.watch_budget(str(limit)) == treewatch.MAX_WATCHES
    assert treewatch.watch_budget(str(tmp_path / "absent")) == 0  # unknown: nothing watched, stamps prove


def test_an_update_lists_only_what_changed(
    tmp_path: Path, watches: TreeWatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file made at the root lists the root again, and nothing below it; a directory made deep down lists
    its parent and the new directory."""
    root = _tree(tmp_path / "ws")
    _ask(root)
    listed: list[str] = []
    monkeypatch.setattr(nested, "stall_hook", listed.append)
    (root / "notes.md").write_text("x\n")
    found, proof = _ask(root)
    assert proof == "update" and listed == [str(root)] and _same(found, _fresh(root))
    listed.clear()
    (root / "b" / "sub" / "deep" / "new" / ".git" / "hooks").mkdir(parents=True)
    found, proof = _ask(root)
    assert proof == "update" and sorted(listed) == [str(root / "b/sub/deep"), str(root / "b/sub/deep/new")]
    assert str(root / "b/sub/deep/new/.git/hooks") in found.paths and _same(found, _fresh(root))
