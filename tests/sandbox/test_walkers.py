"""Workspace walks in walker processes: the same answer as a walk in the daemon, a stalled child killed at
its deadline (and replaced), garbage or a crash denied, and a child that cannot start walked here instead."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.sandbox import nested, walkers


@pytest.fixture
def argv() -> Iterator[list[str]]:
    saved = list(walkers.CHILD_ARGV)
    yield walkers.CHILD_ARGV
    walkers.CHILD_ARGV[:] = saved


def _tree(root: Path) -> Path:
    for d in ("a/.git/hooks", "b/sub/.vscode", "c/.github/hooks", "node_modules/x/.git/hooks"):
        (root / d).mkdir(parents=True)
    (root / "a" / ".git" / "config").write_text("[core]\n")
    (root / "b" / ".env").write_text("KEY=1\n")
    (root / "b" / ".env.example").write_text("KEY=\n")
    (root / "c" / ".envrc").write_text("export X=1\n")
    os.symlink("/etc", root / "b" / ".claude")
    (root / "name\nwith newline").mkdir()
    (root / "name\nwith newline" / ".git" / "hooks").mkdir(parents=True)
    return root


def test_a_child_answers_what_a_walk_here_answers(tmp_path: Path) -> None:
    root = str(_tree(tmp_path))
    w = walkers.Walkers(2, timeout=60)
    try:
        there = w.find(root)
        again = w.find(root)  # from the child's cache, proven fresh there
    finally:
        w.close()
    nested._cache.clear()
    here = nested.walk_here(root)
    for f in (there, again):
        assert (f.paths, f.complete, f.secrets, f.links) == (here.paths, here.complete, here.secrets, here.links)
    assert str(tmp_path / "name\nwith newline" / ".git" / "hooks") in there.paths
    assert str(tmp_path / "b" / ".claude") in there.links
    assert str(tmp_path / "b" / ".env") in there.secrets
    # the directories walked come back too (the agent wrapper's epilogue starts from them), stamps stay here
    for f in (there, again):
        assert f.dirs == () and set(f.listed) == {d for d, _ in here.dirs}
        assert str(tmp_path / "name\nwith newline") in f.listed and str(tmp_path / "a" / ".git") in f.listed


def test_known_dirs_are_this_threads_latest_answer(tmp_path: Path) -> None:
    """What a plan's epilogue starts from: the answer this thread's plan just got, from a walker (no
    stamps) or a walk here; none for a walk that stopped at a bound or a walker that sent no list."""
    root = str(_tree(tmp_path))
    w = walkers.Walkers(1, timeout=60)
    nested.walk_elsewhere(w)
    try:
        nested.find_protected(root)
        listed = nested.known_dirs(root)
        assert listed is not None and listed[0] == root and str(tmp_path / "b" / "sub") in listed
        other: list[list[str] | None] = []
        t = threading.Thread(target=lambda: other.append(nested.known_dirs(root)))
        t.start()
        t.join()
        assert other == [None]  # another thread has not asked: it gets no list of ours
    finally:
        nested.walk_elsewhere(None)
        w.close()
    nested._cache.clear()
    nested.find_protected(root)  # a walk here: the stamped directories
    assert set(nested.known_dirs(root) or ()) == set(listed)
    # a walker's answer without a list (too many directories), or a walk cut short: the whole walk instead
    nested._seen.answers[root] = nested.Found((), True)
    assert nested.known_dirs(root) is None
    nested._seen.answers[root] = nested.Found((), False, listed=(root,))
    assert nested.known_dirs(root) is None


def test_a_change_is_seen_by_the_next_ask(tmp_path: Path) -> None:
    w = walkers.Walkers(1, timeout=60)
    try:
        assert w.find(str(tmp_path)).paths == ()
        (tmp_path / "new" / ".git" / "hooks").mkdir(parents=True)
        assert str(tmp_path / "new" / ".git" / "hooks") in w.find(str(tmp_path)).paths
    finally:
        w.close()


def test_a_stalled_child_is_killed_at_its_deadline_and_replaced(tmp_path: Path, argv: list[str]) -> None:
    stall = tmp_path / "stall.py"
    stall.write_text("import time\ntime.sleep(3600)\n")
    argv[:] = [sys.executable, str(stall)]
    w = walkers.Walkers(1, timeout=1.0)
    try:
        t = time.monotonic()
        with pytest.raises(walkers.WalkFailed, match="did not return in time"):
            w.find(str(tmp_path))
        assert time.monotonic() - t < 30
        (child,) = w._all
        assert child.proc is None  # killed; the next ask starts another
        argv[:] = [sys.executable, "-I", "-m", "nexusd.sandbox.walkers"]
        assert w.find(str(tmp_path)).complete
    finally:
        w.close()


@pytest.mark.parametrize(
    "script",
    [
        "import sys\nsys.stdin.readline()\nprint('not json', flush=True)\n",
        "import sys\nsys.stdin.readline()\nprint('{\"paths\": 5}', flush=True)\n",
        "import sys\nsys.stdin.readline()\nsys.exit(3)\n",
        'import sys\nsys.stdin.readline()\nprint(\'{"error": "disk on fire"}\', flush=True)\n',
        # "the same as the answer you hold" to an asker that holds none: never reused, the ask fails
        'import sys\nsys.stdin.readline()\nprint(\'{"same": true, "answer": 7}\', flush=True)\n',
    ],
    ids=["garbage", "wrong-type", "dies", "says-error", "same-as-nothing"],
)
def test_a_child_that_answers_wrong_fails_the_ask(tmp_path: Path, argv: list[str], script: str) -> None:
    child = tmp_path / "child.py"
    child.write_text(script)
    argv[:] = [sys.executable, str(child)]
    w = walkers.Walkers(1, timeout=30)
    try:
        with pytest.raises(walkers.WalkFailed):
            w.find(str(tmp_path))
    finally:
        w.close()


def test_a_child_that_cannot_start_leaves_the_walk_here(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "r" / ".git" / "hooks").mkdir(parents=True)
    argv[:] = [str(tmp_path / "no-such-python")]
    w = walkers.Walkers(1, timeout=30)
    try:
        assert str(tmp_path / "r" / ".git" / "hooks") in w.find(str(tmp_path)).paths
    finally:
        w.close()


def test_find_protected_goes_through_the_walkers_and_coalesces(tmp_path: Path) -> None:
    """Routed through walker processes, concurrent askers of one root still share walks and get answers."""
    (tmp_path / "r" / ".git" / "hooks").mkdir(parents=True)
    w = walkers.Walkers(2, timeout=60)
    nested.walk_elsewhere(w)
    got: list[nested.Found] = []
    try:
        threads = [threading.Thread(target=lambda: got.append(nested.find_protected(str(tmp_path)))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        nested.walk_elsewhere(None)
        w.close()
    assert len(got) == 8 and all(str(tmp_path / "r" / ".git" / "hooks") in f.paths for f in got)
    assert nested._running == {} and nested._queued == {}


def test_a_busy_child_is_never_waited_for_while_another_can_be_had(
    tmp_path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One walker, busy with a slow tree: the next root gets a new child at once, not a place in line."""
    slow, quick = tmp_path / "slow", tmp_path / "quick"
    slow.mkdir()
    (quick / "r" / ".git" / "hooks").mkdir(parents=True)
    launcher = Path(__file__).parents[1] / "daemon" / "stall_launcher.py"
    monkeypatch.setenv("NEXUS_TEST_SLOW", f"{slow}:5")
    argv[:] = [sys.executable, str(launcher), "--walker"]
    w = walkers.Walkers(1, timeout=60, max_children=2)
    done: list[float] = []
    try:
        t = threading.Thread(target=lambda: (w.find(str(slow)), done.append(time.monotonic())))
        t.start()
        time.sleep(1.0)  # the slow walk is under way in the only child
        start = time.monotonic()
        assert str(quick / "r" / ".git" / "hooks") in w.find(str(quick)).paths
        quick_end = time.monotonic()
        t.join(60)
    finally:
        w.close()
    assert done and quick_end < done[0], "the quick root waited for the slow one"
    assert quick_end - start < done[0] - start


def test_a_daemon_with_many_descriptors_still_asks_its_walkers(tmp_path: Path) -> None:
    """A daemon serving a thousand clients has descriptors past 1023, where select() cannot look."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("cannot open 1,100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    w = walkers.Walkers(1, timeout=60)
    try:
        (tmp_path / "r" / ".git" / "hooks").mkdir(parents=True)
        assert str(tmp_path / "r" / ".git" / "hooks") in w.find(str(tmp_path)).paths
        (child,) = w._all
        assert child.proc is not None and child.proc.stdout is not None and child.proc.stdout.fileno() > 1023
    finally:
        w.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_unchanged_answer_comes_back_as_same_and_a_changed_one_whole(tmp_path: Path) -> None:
    """The child numbers its answers; the asker names the one it holds, and an unchanged answer is not sent
    again (7,500 listed directories in a tree of 1,500 repositories). A change, or a new child, sends it whole."""
    root = _tree(tmp_path)
    w = walkers.Walkers(1, timeout=60)
    try:
        first = w.find(str(root))
        child = w._all[0]
        number = child.known[str(root)][0]
        again = w.find(str(root))
        assert again.listed is first.listed and again.paths == first.paths  # reused here: "same" came back
        assert child.known[str(root)][0] == number
        (root / "b" / "sub" / ".git" / "hooks").mkdir(parents=True)
        after = w.find(str(root))
        assert str(root / "b" / "sub" / ".git" / "hooks") in after.paths and after.listed is not first.listed
        assert child.known[str(root)][0] != number
        child.close()  # a new child numbers anew: the asker forgets what it held
        fresh = w.find(str(root))
        assert fresh.paths == after.paths and fresh.listed is not after.listed
    finally:
        w.close()


def test_the_childrens_fence_directories_are_removed_at_close(tmp_path: Path) -> None:
    """Children are killed, never asked to end: their fence directories (in one of the Walkers') go at close."""
    root = _tree(tmp_path / "ws")
    w = walkers.Walkers(2, timeout=60)
    fence_root = Path(w._fence_root)
    try:
        w.find(str(root))
        assert [p.name[:6] for p in fence_root.iterdir()] == ["fence-"]
    finally:
        w.close()
    assert not fence_root.exists()


def test_fence_roots_of_daemons_that_are_gone_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon killed with SIGKILL never runs ``close``: the next one removes its fence directory (by the
    pid in the name, only when that pid runs no more); a live daemon's, and names not ours, stay."""
    import subprocess
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{walkers.FENCE_PREFIX}{gone.pid}-abc"
    live = tmp_path / f"{walkers.FENCE_PREFIX}{os.getppid()}-def"
    other = tmp_path / f"{walkers.FENCE_PREFIX}legacy"
    for d in (dead, live, other):
        d.mkdir()
        (d / "fence").write_text("")
    pool = walkers.Walkers(count=1)
    try:
        assert not dead.exists() and live.exists() and other.exists()
        assert Path(pool._fence_root).name.startswith(f"{walkers.FENCE_PREFIX}{os.getpid()}-")
    finally:
        pool.close()
    assert not Path(pool._fence_root).exists()


def _walker_children(pid: int) -> list[int]:
    import psutil

    try:
        kids = psutil.Process(pid).children()
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            if walkers.__name__ in " ".join(k.cmdline()):
                out.append(k.pid)
        except psutil.Error:
            continue
    return out


def test_the_walkers_start_with_the_daemon_only_when_it_sandboxes(daemon_factory) -> None:
    """The default (sandbox-first) daemon starts its two walker children ahead of the first call; a gate-only
    one starts none (two processes and ~0.2 s of CPU each, for nothing), until a reload turns the sandbox on.
    Real daemons, their children counted from /proc."""
    from nexusd.client import Client

    def settle(pid: int, want: int) -> list[int]:
        deadline = time.monotonic() + 30
        found = _walker_children(pid)
        while len(found) != want and time.monotonic() < deadline:
            time.sleep(0.05)
            found = _walker_children(pid)
        return found

    sandboxed = daemon_factory(sandbox=True)
    gate_only = daemon_factory()
    assert sandboxed.proc is not None and gate_only.proc is not None
    assert len(settle(sandboxed.proc.pid, 2)) == 2
    time.sleep(1.0)  # as long again as the other's took: still none
    assert _walker_children(gate_only.proc.pid) == []
    gate_only.write_policy("[sandbox]\nenabled = true\n")
    from nexusd import protocol

    with Client(socket_path=str(gate_only.socket), role="admin", name="t") as c:
        assert isinstance(c.call(protocol.Reload()), protocol.Ack)
    assert len(settle(gate_only.proc.pid, 2)) == 2
