"""The agent's generated wrapper (real bubblewrap): what its epilogue sees as planted, when it starts the
Python scrub, the stale-plan refusal, signals, and a hostile environment around it.

Whether the Python scrub started is observed without timing: the scrub's plan file is removed after the
wrapper is written, so a started scrub says "cannot check" on stderr; its absence proves it did not start.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.protocol import SandboxProbe
from nexusd.sandbox.wrapper import wrapper_words
from tests.sandbox.conftest import agent_text, wrapper_script

STARTED = "cannot check what the sandboxed command planted"


@pytest.fixture
def ws_root(real_probe: SandboxProbe) -> Iterator[tuple[Path, Path, PolicyStore]]:
    root = Path(tempfile.mkdtemp(prefix="nxwp", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    ws = root / "ws"
    for d in ("sub/.git/hooks", "pkg/.vscode", "node_modules/x/.claude", "src/a/b/c", "olddir"):
        (ws / d).mkdir(parents=True)
    (ws / "pkg/.vscode/tasks.json").write_text("{}")
    (ws / "olddir" / "settings.json").write_text("{}")
    (root / "cfg").mkdir()
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    time.sleep(0.2)  # the epilogue looks at what changed from 50 ms before the decision on
    yield root, ws, store
    shutil.rmtree(root, ignore_errors=True)


def _text(
    store: PolicyStore, probe: SandboxProbe, ws: Path, command: str, *, hide_scrub_plan: bool, walk: bool = False
) -> str:
    text = agent_text(store, probe, command, ws, ws)
    assert text is not None
    script = Path(wrapper_script(text))
    assert "-files0-from" in script.read_text()  # the epilogue starts from the directories the plan listed
    if hide_scrub_plan:  # a started Python scrub now says so on stderr
        for f in script.parent.glob("*.json"):
            f.unlink()
    if walk:  # the list gone (cleaned up, or unreadable): the whole tree is walked instead
        for f in script.parent.glob("*.dirs"):
            f.unlink()
    return text


def run(
    store: PolicyStore,
    probe: SandboxProbe,
    ws: Path,
    command: str,
    *,
    hide_scrub_plan: bool = False,
    env: dict[str, str] | None = None,
    walk: bool = False,
) -> subprocess.CompletedProcess[str]:
    text = _text(store, probe, ws, command, hide_scrub_plan=hide_scrub_plan, walk=walk)
    return subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, cwd="/", env=env, timeout=60)


@pytest.mark.parametrize(
    "command",
    [
        "true",
        "echo ok > src/a.py && mkdir -p build/out && echo x > build/out/b && rm src/a.py",  # ordinary writes
        "cat pkg/.vscode/tasks.json; ls -la sub/.git",  # reading protected paths
        "echo evil > pkg/.vscode/tasks.json; mkdir sub/.git/hooks/x",  # refused writes into existing ones
        "touch -d '2001-01-01' olddir src",  # old mtimes on ordinary dirs
        "rm -rf src/a/b && mv olddir newdir",  # known directories gone: the whole walk decides, and finds nothing
        "echo x > src/a/b/c/file && mkdir src/a/b/c/new",  # a change deep below unchanged directories
    ],
)
@pytest.mark.parametrize("walk", [False, True], ids=["known-dirs", "whole-walk"])
def test_scrub_does_not_start_when_nothing_was_planted(ws_root, real_probe, command, walk):
    _, ws, store = ws_root
    r = run(store, real_probe, ws, command, hide_scrub_plan=True, walk=walk)
    assert STARTED not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("command", "planted"),
    [
        ("mkdir -p a/b/.claude && echo x > a/b/.claude/settings.json", "a/b/.claude"),
        ("mv olddir .cursor", ".cursor"),  # an existing directory renamed into a protected name
        ("mv olddir src/.claude", "src/.claude"),
        ("ln olddir/settings.json src/.envrc", "src/.envrc"),  # a hard link to an old file
        ("ln -s /etc src/.husky", "src/.husky"),  # a symlink
        ("mkdir -p n/.git && mkdir n/.git/hooks", "n/.git/hooks"),
        ("mkdir -p n/.git && echo '[core]' > n/.git/config", "n/.git/config"),
        ("echo 'gitdir: /x' > src/.git", "src/.git"),  # a gitdir pointer file
        ("mkdir -p d/.vscode && touch -h -d '2001-01-01' d/.vscode d", "d/.vscode"),  # mtimes set back: ctime is not
        ("mkdir -p node_modules/y/.idea && mv node_modules/y src/y", "src/y/.idea"),  # moved out of a skipped tree
        ("mv node_modules/x/.claude src/.claude", "src/.claude"),  # an existing unprotected one moved into view
        # below directories that did not change (each changed known directory is a starting point)
        ("echo x > src/a/b/c/.envrc", "src/a/b/c/.envrc"),
        ("mkdir src/a/b/c/.vscode", "src/a/b/c/.vscode"),
        # planted, then an ancestor renamed: the known directories are gone, so the whole tree is walked
        ("echo x > src/a/b/c/.envrc && mv src/a src/z", "src/z/b/c/.envrc"),
        ("echo x > src/a/b/c/.envrc && mv src/a/b src/a/y", "src/a/y/c/.envrc"),
        ("mkdir -p t/u && echo x > t/u/.envrc && mv t src/a/b/c/t", "src/a/b/c/t/u/.envrc"),  # a new tree moved in
        ("echo x > src/a/b/c/.envrc && rm -rf olddir", "src/a/b/c/.envrc"),  # and an unrelated known dir removed
    ],
)
@pytest.mark.parametrize("walk", [False, True], ids=["known-dirs", "whole-walk"])
def test_every_way_of_planting_starts_the_scrub(ws_root, real_probe, command, planted, walk):
    _, ws, store = ws_root
    r = run(store, real_probe, ws, command, hide_scrub_plan=True, walk=walk)
    assert STARTED in r.stderr, (planted, r.stderr)


@pytest.mark.parametrize(
    ("command", "planted"),
    [
        ("mv olddir .cursor", ".cursor"),
        ("mkdir -p d/.vscode && echo x > d/.vscode/tasks.json && touch -h -d '2001-01-01' d/.vscode d", "d/.vscode"),
        ("mkdir -p node_modules/y/.idea && mv node_modules/y src/y", "src/y/.idea"),
        ("mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD", "HEAD"),
    ],
)
def test_planted_paths_are_removed_and_the_rest_kept(ws_root, real_probe, command, planted):
    _, ws, store = ws_root
    r = run(store, real_probe, ws, command + "; echo done")
    assert "done" in r.stdout and r.returncode == 0, r.stderr
    assert not os.path.lexists(ws / planted), r.stderr
    assert "planted by the sandboxed command" in r.stderr
    assert (ws / "pkg/.vscode/tasks.json").read_text() == "{}"  # what was there before stays


def test_a_plan_made_stale_by_a_new_protected_path_is_refused(ws_root, real_probe):
    _, ws, store = ws_root
    text = _text(store, real_probe, ws, f"echo ran > {ws}/src/ran", hide_scrub_plan=False)
    (ws / ".claude").mkdir()  # appears after the decision, before the run: the plan would scrub it
    r = subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, cwd="/", timeout=60)
    assert r.returncode == 126 and r.stderr.count("\n") == 1 and "refused" in r.stderr
    assert (ws / ".claude").is_dir() and not (ws / "src/ran").exists()


def test_a_missing_wrapper_does_not_run_the_command(ws_root, real_probe):
    _, ws, store = ws_root
    text = _text(store, real_probe, ws, f"echo ran > {ws}/src/ran", hide_scrub_plan=False)
    Path(wrapper_script(text)).unlink()
    r = subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, cwd="/", timeout=60)
    assert r.returncode != 0 and not (ws / "src/ran").exists()


def test_term_reaches_the_command_and_the_scrub_still_runs(ws_root, real_probe):
    _, ws, store = ws_root
    text = _text(
        store, real_probe, ws, "mkdir -p t/.claude && echo started > src/started && sleep 30", hide_scrub_plan=False
    )
    inner = shlex.join(wrapper_words(text) or [])  # the wrapper itself, not the agent's text around it
    p = subprocess.Popen(["/bin/sh", "-c", f"exec {inner}"], stderr=subprocess.PIPE, text=True, cwd="/")
    for _ in range(300):  # until the command is inside its sleep (not a timing assertion)
        if (ws / "src/started").exists():
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)  # to the wrapper only: it forwards
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert not (ws / "t/.claude").exists() and "planted by the sandboxed command" in err


def test_a_hostile_environment_does_not_steer_the_wrapper(ws_root, real_probe):
    """The agent's environment reaches the wrapper: PATH pointing into the workspace, IFS, ENV, BASH_ENV and
    exported functions named like the built-ins it uses change nothing (absolute programs, quoted words)."""
    _, ws, store = ws_root
    evil = ws / "bin"
    evil.mkdir()
    for name in ("find", "env", "bwrap", "python3", "kill", "sh", "printf"):
        (evil / name).write_text(f"#!/bin/sh\ntouch {ws.parent}/pwned-{name}\n")
        (evil / name).chmod(0o755)
    (ws / "rc").write_text(f"touch {ws.parent}/pwned-rc\n")
    env = {
        **os.environ,
        "PATH": f"{evil}:{os.environ['PATH']}",
        "IFS": "/ ",
        "ENV": str(ws / "rc"),
        "BASH_ENV": str(ws / "rc"),
        "BASH_FUNC_kill%%": f"() {{ touch {ws.parent}/pwned-fn; }}",
    }
    text = _text(store, real_probe, ws, "mkdir -p q/.claude; echo inside", hide_scrub_plan=False)
    # /bin/sh here, not bash: a bash running the agent's command would read BASH_ENV itself, before us
    r = subprocess.run(["/bin/sh", "-c", text], capture_output=True, text=True, cwd="/", env=env, timeout=60)
    assert "inside" in r.stdout, r.stderr
    assert not list(ws.parent.glob("pwned-*"))  # inside, BASH_ENV's touch hits a read-only parent
    assert not (ws / "q/.claude").exists()


def test_ctime_is_trusted_only_on_file_systems_with_the_kernels_clock(ws_root) -> None:
    """A network file system's server may stamp ctimes from its own clock: there, always the Python scrub."""
    from nexusd.protocol import SandboxPlanReply
    from nexusd.sandbox.wrapper import _script, local_clock

    _, ws, _ = ws_root
    assert local_clock([str(ws)]) and not local_clock(["/proc/self"]) and not local_clock([str(ws), "/sys"])
    plan = SandboxPlanReply(
        allowed=True, argv=["/usr/bin/bwrap", "--", "/bin/bash", "-c", "x"], scrub_below=["/proc/1"]
    )
    assert "\nplanted=1\n" in _script(plan, "/s.json", 4, "/r") and "find" not in _script(plan, "/s.json", 4, "/r")
    local = SandboxPlanReply(allowed=True, argv=plan.argv, scrub_below=[str(ws)])
    assert "-newerct" in _script(local, "/s.json", 4, "/r")


def test_changed_means_changed_since_planning_began(ws_root, real_probe, monkeypatch) -> None:
    """The known directories come from walks that began after planning began, so the epilogue's time is
    then (less the margin), not the end of a slow plan: a directory made meanwhile, missing from the list,
    must still count as changed."""
    from nexusd.sandbox import plan as plan_mod

    _, ws, store = ws_root
    slow = plan_mod.plan_command

    def plan_command(*args: object, **kw: object) -> object:
        out = slow(*args, **kw)  # type: ignore[arg-type]
        time.sleep(0.5)
        return out

    monkeypatch.setattr(plan_mod, "plan_command", plan_command)
    t0 = time.time()
    text = agent_text(store, real_probe, "true", ws, ws)
    assert text is not None
    words = wrapper_words(text)
    assert words is not None
    since = float(words[2])
    assert since <= t0 + 0.3 - 0.05, (since, t0)  # not the decision's end (t0 + 0.5 or later)


def test_content_addressed_files_survive_writers_in_many_threads(tmp_path: Path) -> None:
    """The decision pool plans equal calls at once: every writer of one script succeeds, and the file is
    never seen short (a shared temporary name made one writer's rename fail, or moved a half-written file)."""
    import contextlib
    import threading

    from nexusd.sandbox import wrapper

    path = tmp_path / "plan.sh"
    data = "echo " + "x" * 200_000 + "\n"
    errors: list[BaseException] = []
    seen: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        for _ in range(30):
            try:
                path.unlink(missing_ok=True)  # absent again: every writer writes
                wrapper._write(path, data)
            except BaseException as e:
                errors.append(e)

    def reader() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                seen.append(len(path.read_bytes()))

    r = threading.Thread(target=reader)
    r.start()
    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    r.join(60)
    assert not errors, errors[:3]
    assert path.read_text() == data
    assert all(n == len(data) for n in seen), sorted(set(seen))[:5]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _in_openat(t: threading.Thread) -> bool:
    """Whether thread ``t`` is in the openat system call now (x86_64: 257, aarch64: 56)."""
    try:
        with open(f"/proc/self/task/{t.native_id}/syscall") as f:
            return f.read().split(" ", 1)[0] in ("257", "56")
    except OSError:  # no /proc view of it: give it a generous moment
        time.sleep(1)
        return True


def _waiting_wrapper(go: str) -> tuple[threading.Thread, list[bytes]]:
    """A thread that opens ``go`` as the wrapper's ``6<"$nx_ng"`` does, then reads bubblewrap's byte into
    the list; returned once it waits inside open() (a FIFO's open has no other sign of a waiter)."""
    got: list[bytes] = []

    def wait() -> None:
        with open(go, "rb", buffering=0) as f:
            got.append(f.read(1))

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _in_openat(t):
        time.sleep(0.01)
    return t, got


def test_a_dead_daemons_go_fifo_is_released_by_the_sweep(tmp_path: Path) -> None:
    """A daemon killed between a filtered call's decision and its run holds neither FIFO: a wrapper that
    opens ``net.TAG.go`` then waits. The run directory's sweep releases it (end of file: bubblewrap runs
    the command with no network) and removes both, once they are older than the per-call files' hour."""
    from nexusd.sandbox import wrapper

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    fifos = wrapper.port_fifos(run_dir, "abc")
    assert fifos is not None
    t, got = _waiting_wrapper(fifos[1])
    old = time.time() - wrapper.PER_CALL_STALE_S - 60
    for path in fifos:
        os.utime(path, (old, old))
    wrapper._calls_since_clean.pop(run_dir, None)  # the next call's sweep is this one
    wrapper._clean(run_dir)
    t.join(30)
    assert not t.is_alive() and got == [b""]
    assert not any(os.path.exists(p) for p in fifos)


def test_a_new_daemon_releases_every_fifo_a_killed_one_left(tmp_path: Path) -> None:
    """At its start a daemon serves none of the FIFOs in its run directories (they were a killed daemon's
    calls): each waiting wrapper is released at once (end of file: no network) and the pairs are removed."""
    from nexusd.sandbox import wrapper

    state = tmp_path / "state"
    fifos = []
    for ws in ("a", "b"):
        run_dir = state / "sandbox" / ws / wrapper.RUN_DIR
        run_dir.mkdir(parents=True)
        pair = wrapper.port_fifos(run_dir, f"tag{ws}")
        assert pair is not None
        fifos.append(pair)
    (state / "sandbox" / "a" / wrapper.RUN_DIR / "net.x.info.keep").write_text("")  # not a pair: left alone
    t, got = _waiting_wrapper(fifos[0][1])
    assert wrapper.release_stale_fifos(state) == 2
    t.join(30)
    assert not t.is_alive() and got == [b""]
    assert not any(os.path.exists(p) for pair in fifos for p in pair)
    assert (state / "sandbox" / "a" / wrapper.RUN_DIR / "net.x.info.keep").exists()
    assert wrapper.release_stale_fifos(tmp_path / "none") == 0


def test_a_plans_directory_list_is_written_once_and_the_lists_stay_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    """Equal plans share one ``.dirs`` list (written once, then only touched), and a workspace keeps the
    newest ``KEEP_DIRS_FILES`` of them: the run directory is listed only when a new list is written."""
    from types import SimpleNamespace

    from nexusd.sandbox import nested, wrapper

    listed: list[str] = []
    monkeypatch.setattr(nested, "known_dirs", lambda root: list(listed))
    monkeypatch.setattr(wrapper, "_find_files0", lambda: True)
    monkeypatch.setattr(wrapper, "local_clock", lambda roots: True)
    scans: list[Path] = []
    clean = wrapper._clean_dirs_files
    monkeypatch.setattr(wrapper, "_clean_dirs_files", lambda d: (scans.append(d), clean(d)))
    plan: Any = SimpleNamespace(scrub_below=["/w"], allowed=True)
    run = tmp_path / "run"
    listed[:] = ["/w", "/w/a"]
    first = wrapper.known_dirs_file(plan, run)
    assert first is not None and Path(first).read_text() == "/w\0/w/a\0" and len(scans) == 1
    assert wrapper.known_dirs_file(plan, run) == first and len(scans) == 1  # the same list: not listed again
    for i in range(wrapper.KEEP_DIRS_FILES + 8):
        listed[:] = ["/w", f"/w/d{i}"]
        assert wrapper.known_dirs_file(plan, run) is not None
    assert len(list(run.glob("*.dirs"))) == wrapper.KEEP_DIRS_FILES and len(scans) == wrapper.KEEP_DIRS_FILES + 9
