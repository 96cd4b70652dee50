"""Decide in parallel: a call whose facts are slow (a stalled mount, a huge workspace) costs only itself.

Every test runs a real daemon (``stall_launcher.py``: the real daemon with its file system made to stall
where the test says, since no FUSE helper is installed here) and real agents' connections on its socket.
Latencies are compared with a floor measured in the same run, with slack for a loaded 2-core machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle
from tests.daemon.conftest import Raw

LAUNCHER = Path(__file__).with_name("stall_launcher.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


def start_stalling(h: DaemonHandle, env: dict[str, str], timeout: float = 15.0) -> DaemonHandle:
    """``h`` started through the stall launcher (the factory still stops it at the end)."""
    h.env.update(env)
    h.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), h.env.get("PYTHONPATH", "")]))
    with open(h.log, "ab") as log:
        h.proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), *h.args],
            env=h.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    return h.wait_listening(timeout)  # (the launcher runs the daemon in its own process)


def agent(h: DaemonHandle, timeout: float = 30.0) -> Raw:
    r = Raw(h.socket, timeout=timeout)
    r.hello("agent", "test-agent")
    return r


def decide(h: DaemonHandle, call: dict[str, Any], ref: str = "r1") -> tuple[p.Decision, float]:
    """One agent connection, one call: the decision and the seconds it took (connect to reply)."""
    t = time.perf_counter()
    r = agent(h)
    try:
        r.send({"type": "request", "call": call, "ref": ref})
        msg = r.recv()
        assert isinstance(msg, p.Decision), msg
        return msg, time.perf_counter() - t
    finally:
        r.close()


def read_call(path: Path, session: str) -> dict[str, Any]:
    return {
        "provider": "claude",
        "session": session,
        "tool": "Read",
        "input": {"file_path": str(path)},
        "cwd": str(path.parent),
    }


def bash_call(cwd: Path, session: str, command: str = "ls -l") -> dict[str, Any]:
    return {"provider": "claude", "session": session, "tool": "Bash", "input": {"command": command}, "cwd": str(cwd)}


def floor(fn: Callable[[], float], n: int = 5) -> float:
    return min(fn() for _ in range(n))


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # reported by the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def project(root: Path, name: str) -> Path:
    ws = root / name
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "README.md").write_text("hello\n")
    return ws.resolve()


def test_a_stalled_file_system_costs_only_the_asking_call(daemon_factory, tmp_path: Path) -> None:
    mount = (tmp_path / "stalled-mount").resolve()
    mount.mkdir()
    (mount / "notes.txt").write_text("x")
    small = project(tmp_path, "small")
    h = daemon_factory(autostart=False, args=["--decision-workers", "2", "--facts-deadline", "2"])
    start_stalling(h, {"NEXUS_TEST_STALL": str(mount)})

    def other() -> float:
        d, s = decide(h, read_call(small / "README.md", "other"))
        assert d.decision == "allow", d
        return s

    base = floor(other)
    # Three stalled calls at once: more than the pool's two workers. Each is denied at its deadline, each
    # stuck worker is abandoned and replaced, and the other agent never waits for any of them.
    stalled = [in_thread(lambda: decide(h, read_call(mount / "notes.txt", "stalled"))) for _ in range(3)]
    time.sleep(0.3)  # the stalled calls are in the pool
    during = [other() for _ in range(5)]
    assert max(during) < base + 0.5, (base, during)
    for t, out in stalled:
        t.join(30)
        (result,) = out
        assert not isinstance(result, BaseException), result
        d, seconds = result
        assert d.decision == "deny" and d.source == "error", d
        assert "in time" in d.reason, d.reason
        assert 1.5 < seconds < 10, seconds
    # after the stalls: still answered at once, by replacement workers
    assert other() < base + 0.5
    status = agent(h)
    try:
        reply = status.ask({"type": "status", "ref": "s"})
    finally:
        status.close()
    assert isinstance(reply, p.StatusReply)
    assert reply.counters["pool/stuck"] == 3, reply.counters
    assert reply.counters["pool/workers"] >= 2, reply.counters  # replacements (and spares not yet retired)
    assert reply.counters["pool/late"] >= 3, reply.counters


def slow_tree_and_small_project(
    daemon_factory: Any, tmp_path: Path, policy: str
) -> tuple[DaemonHandle, Path, Callable[[], float]]:
    """A daemon whose walk of the ``big`` project sleeps 3 s, and a timed allowed call in a small one."""
    big = project(tmp_path, "big")
    small = project(tmp_path, "small")
    h = daemon_factory(policy=policy, autostart=False, args=["--facts-deadline", "20"])
    start_stalling(h, {"NEXUS_TEST_SLOW": f"{big}:3"})

    def other() -> float:
        d, s = decide(h, bash_call(small, "other"))
        assert d.decision == "allow", d
        assert d.updated_input is not None  # wrapped to run sandboxed
        return s

    return h, big, other


def test_a_slow_workspace_scan_delays_nobody_else(daemon_factory, tmp_path: Path) -> None:
    policy = '[permissions]\nallow = ["Bash(ls *)"]\n\n[sandbox]\nenabled = true\n'
    h, big, other = slow_tree_and_small_project(daemon_factory, tmp_path, policy)

    base = floor(other)
    t, out = in_thread(lambda: decide(h, bash_call(big, "big")))
    time.sleep(0.3)  # its sandbox plan is scanning the (slow) tree
    during = [other() for _ in range(5)]
    t.join(30)
    (result,) = out
    assert not isinstance(result, BaseException), result
    d, seconds = result
    assert d.decision == "allow" and d.updated_input is not None, d
    assert seconds >= 2.9, seconds  # it did wait for its own scan ...
    assert max(during) < base + 0.5, (base, during)  # ... and nobody else did
    # its second call: the scan is cached and proven fresh without listing the tree again
    d2, again = decide(h, bash_call(big, "big", "ls -la"))
    assert d2.decision == "allow" and again < 2.0, (d2, again)


def test_a_stalled_sandbox_plan_is_denied_at_its_deadline(daemon_factory, tmp_path: Path) -> None:
    policy = '[permissions]\nallow = ["Bash(ls *)"]\n\n[sandbox]\nenabled = true\n'
    big = project(tmp_path, "big")
    h = daemon_factory(policy=policy, autostart=False, args=["--facts-deadline", "1"])
    start_stalling(h, {"NEXUS_TEST_SLOW": f"{big}:30"})
    d, seconds = decide(h, bash_call(big, "big"))
    assert d.decision == "deny" and d.source == "error", d
    assert "sandbox wrapping failed" in d.reason and "in time" in d.reason, d.reason
    assert seconds < 10


@pytest.mark.parametrize("pending", [10_000])
def test_ten_thousand_calls_waiting_for_facts_stay_bounded(daemon_factory, tmp_path: Path, pending: int) -> None:
    """10,000 calls in flight at once (each on its own connection), every one stalled: all denied at their
    deadline, the daemon's memory stays bounded, and a call elsewhere is still answered."""
    mount = (tmp_path / "stalled-mount").resolve()
    mount.mkdir()
    small = project(tmp_path, "small")
    h = daemon_factory(autostart=False, args=["--decision-workers", "2", "--facts-deadline", "5"])
    start_stalling(h, {"NEXUS_TEST_STALL": str(mount)})
    assert h.proc is not None
    rss_before = _rss_kib(h.proc.pid)
    conns: list[socket.socket] = []
    hello = p.encode(p.Hello(proto=p.PROTOCOL_VERSION, role="agent", name="flood"))
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < pending + 200:
            pytest.skip(f"needs {pending + 200} descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, pending + 200), hard))
        call = read_call(mount / "x", "flood")
        line = hello + p.encode(p.Request(call=p.CallInfo(**call), ref="f"))
        for _ in range(pending):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(h.socket))
            s.sendall(line)
            conns.append(s)
        time.sleep(1.0)
        d, _ = decide(h, read_call(small / "README.md", "other"))
        assert d.decision == "deny" and "in time" in d.reason  # every worker is stuck (beyond the bound) ...
        rss_during = _rss_kib(h.proc.pid)
        assert rss_during - rss_before < 400_000, (rss_before, rss_during)  # KiB: bounded, well under 400 MB
        denied = 0
        for s in conns:
            s.settimeout(60)
            buf = b""
            while buf.count(b"\n") < 2:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            last = p.decode_server(buf.split(b"\n")[1])
            assert isinstance(last, p.Decision) and last.decision == "deny", last
            denied += 1
        assert denied == pending
    finally:
        for s in conns:
            s.close()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _walker_children(pid: int) -> list[int]:
    """The daemon's walker processes (``nexusd.sandbox.walkers``), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid and b"nexusd.sandbox.walkers" in cmdline:
            found.append(int(entry.name))
    return found


def test_the_walk_runs_in_a_walker_process_that_ends_with_the_daemon(daemon_factory, tmp_path: Path) -> None:
    """A big tree's walk holds no lock of the daemon's: it runs in a child, which the daemon's stop ends."""
    policy = '[permissions]\nallow = ["Bash(ls *)"]\n\n[sandbox]\nenabled = true\n'
    ws = project(tmp_path, "ws")
    (ws / "sub" / ".git" / "hooks").mkdir(parents=True)
    h = daemon_factory(policy=policy)
    assert h.proc is not None
    d, _ = decide(h, bash_call(ws, "one"))
    assert d.decision == "allow" and d.updated_input is not None, d
    children = _walker_children(h.proc.pid)
    assert 1 <= len(children) <= 2, children  # the two started at start-up (one walked)
    h.stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{c}").exists() for c in children):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{c}/cmdline").exists() and Path(f"/proc/{c}/cmdline").read_bytes() for c in children)


def test_a_persons_allow_in_a_slow_tree_delays_nobody_else(daemon_factory, tmp_path: Path) -> None:
    """The sandbox plan of a call a person allowed is made in the pool too: while its tree is walked (slow),
    other agents are answered, and the allowed call goes out wrapped once its plan is made."""
    policy = '[permissions]\nallow = ["Bash(ls *)"]\nask = ["Bash(touch *)"]\n\n[sandbox]\nenabled = true\n'
    h, big, other = slow_tree_and_small_project(daemon_factory, tmp_path, policy)
    base = floor(other)
    ui = Raw(h.socket)
    ui.hello("ui", "test-ui")
    assert isinstance(ui.ask({"type": "subscribe"}), p.Snapshot)
    asker = agent(h)
    asker.send({"type": "request", "call": bash_call(big, "big", "touch made"), "ref": "q"})
    pend = asker.recv()
    assert isinstance(pend, p.Pending), pend
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt)
    answered = time.monotonic()
    ui.send({"type": "answer", "id": pend.id, "decision": "allow", "ref": "a"})
    time.sleep(0.3)  # the allowed call's plan is walking the slow tree
    during = [other() for _ in range(5)]
    d = asker.recv()
    waited = time.monotonic() - answered
    assert isinstance(d, p.Decision) and d.decision == "allow" and d.updated_input is not None, d
    assert waited >= 2.9, waited  # it waited for its own plan ...
    assert max(during) < base + 0.5, (base, during)  # ... and nobody else did
    res, ack = ui.recv(), ui.recv()  # every UI hears the resolution before the answerer's ack
    assert isinstance(res, p.Resolved) and res.decision == "allow" and isinstance(ack, p.Ack), (res, ack)
    ui.close()
    asker.close()
