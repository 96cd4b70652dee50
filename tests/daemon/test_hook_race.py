"""A slow policy hook races the person's prompt (seed 002: Claude Code's interactive handler races its
permission hooks against the dialog; the first to answer wins).

When every hook letting the call pass would still leave it to a person, the prompt goes out at once, while
the hooks run: a hook's deny (or its failure: fail closed) settles the call and withdraws the prompt from
every UI; a person's answer settles it and the hooks' late word is only audited (event ``hook_late``).
Where passing would allow the call (a mode, an allow rule), nothing is raced: the hook still speaks first.

Real daemon on a temp socket, real hook programs. Most hooks here wait on a file the test creates (a
*gated* hook), so the orderings are exact, not timings; the timing tests compare ratios within one run.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle

ASKED = "npm install left-pad"  # default mode asks (it writes): a person decides unless a hook denies
ALLOWED = "ls -la"  # default mode allows (read-only): no race, the hook speaks first

ANSWERS = {
    "allow": 'print(json.dumps({"decision": "allow"}))',
    "ask": 'print(json.dumps({"decision": "ask", "reason": "touches the lockfile"}))',
    "deny": 'sys.stderr.write("no new packages today"); sys.exit(2)',
    "crash": "sys.exit(1)",
    "garbage": 'print("not json")',
}


def hook(tmp: Path, answer: str, *, sleep: float | None = None, name: str = "hook") -> tuple[str, Path, Path]:
    """A hook program: records when it starts and ends (``log``), then waits ``sleep`` seconds, or until the
    test creates ``release`` (at most 60 s), then answers. Returns (path, release, log)."""
    release, log = tmp / f"{name}.release", tmp / f"{name}.log"
    wait = (
        f"time.sleep({sleep})"
        if sleep is not None
        else f"while not os.path.exists({str(release)!r}) and time.time() - t0 < 60: time.sleep(0.01)"
    )
    path = tmp / name
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\njson.load(sys.stdin)\nt0 = time.time()\n"
        f"open({str(log)!r}, 'a').write(f'start {{t0}}\\n')\n{wait}\n"
        f"open({str(log)!r}, 'a').write(f'end {{time.time()}}\\n')\n{ANSWERS[answer]}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), release, log


def policy(command: str, timeout: float = 30.0, extra: str = "") -> str:
    return f'{extra}\n[[hooks]]\ncommand = ["{command}"]\ntimeout = {timeout}\n'


def call(cwd: Path, cmd: str = ASKED, mode: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "provider": "claude",
        "session": "s-race",
        "tool": "Bash",
        "input": {"command": cmd},
        "cwd": str(cwd),
    }
    if mode is not None:
        c["mode"] = mode
    return c


def stamps(log: Path) -> dict[str, float]:
    """The hook's own start and end times (unix), as it wrote them."""
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        what, at = line.split()
        out[what] = float(at)
    return out


def until(pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def silent(conn: Any, seconds: float) -> bool:
    """True when nothing arrives on ``conn`` within ``seconds``."""
    conn.sock.settimeout(seconds)
    try:
        msg = conn.recv()
    except TimeoutError:
        return True
    finally:
        conn.sock.settimeout(30.0)
    raise AssertionError(f"unexpected {msg!r}")


def audit(h: DaemonHandle, raw_factory: Any, **filters: Any) -> list[p.AuditRecord]:
    ui = raw_factory(h.socket, role="ui", name="auditor")
    reply = ui.ask({"type": "audit", "session": "s-race", **filters})  # flushes the writer first
    ui.close()
    assert isinstance(reply, p.AuditReply), reply
    return reply.records


def subscribed(h: DaemonHandle, raw_factory: Any, name: str = "person") -> Any:
    ui = raw_factory(h.socket, role="ui", name=name)
    assert isinstance(ui.ask({"type": "subscribe"}), p.Snapshot)
    return ui


def test_the_prompt_reaches_a_person_while_a_slow_hook_sleeps(daemon_factory, raw_factory, tmp_path) -> None:
    """The issue's case (a 4 s hook kept the prompt 5.5 s from a person): the prompt now comes well before
    the hook ends. Ratios within the run: the prompt's latency against the hook's own sleep."""
    sleep = 3.0
    cmd, _, log = hook(tmp_path, "allow", sleep=sleep)
    h = daemon_factory(policy=policy(cmd))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    t0 = time.time()
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    prompt = ui.recv()
    t_prompt = time.time()
    assert isinstance(prompt, p.Prompt) and prompt.item.id == pend.id
    raced = [s for s in prompt.item.verdict.trace if s.step == "hooks"]
    assert [s.outcome for s in raced] == ["raced"], prompt.item.verdict.trace
    until(lambda: "end" in (log.read_text() if log.exists() else ""))
    hook_times = stamps(log)
    assert t_prompt < hook_times["end"]  # the ordering: a person could answer while the hook still slept
    # and well before: the prompt took less than half the hook's sleep (it took the whole sleep and
    # more before; under load the daemon's own part is still a fraction of a 3 s sleep)
    assert (t_prompt - t0) < (hook_times["end"] - hook_times["start"]) / 2, (t_prompt - t0, hook_times)
    # the hook let it pass: still the person's call, answered after the hook
    assert silent(agent, 0.5)
    ui.send({"type": "answer", "id": pend.id, "decision": "allow"})
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source, d.id) == ("allow", "user", pend.id), d
    (rec,) = [r for r in audit(h, raw_factory) if r.id == pend.id]
    steps = [(s.step, s.outcome) for s in rec.trace]
    assert ("hooks", "raced") in steps and ("hooks", "allow") in steps and steps[-1] == ("answer", "allow"), steps


def test_a_hook_deny_first_withdraws_the_prompt_from_every_ui(daemon_factory, raw_factory, tmp_path) -> None:
    cmd, release, _ = hook(tmp_path, "deny")
    h = daemon_factory(policy=policy(cmd))
    uis = [subscribed(h, raw_factory, f"ui{i}") for i in range(2)]
    agent = raw_factory(h.socket)
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    for ui in uis:  # the prompt is out while the hook still waits (it cannot end before ``release``)
        ui.sock.settimeout(15.0)
        prompt = ui.recv()
        assert isinstance(prompt, p.Prompt) and prompt.item.id == pend.id
    release.touch()
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source, d.id) == ("deny", "hook", pend.id), d
    assert "no new packages today" in d.reason
    for ui in uis:  # withdrawn everywhere
        res = ui.recv()
        assert isinstance(res, p.Resolved) and (res.id, res.decision, res.source) == (pend.id, "deny", "hook"), res
    # a person's answer now comes too late, and the call has exactly one decision
    err = uis[0].ask({"type": "answer", "id": pend.id, "decision": "allow"})
    assert isinstance(err, p.Error) and err.code == "already_decided", err
    assert silent(agent, 0.5)
    recs = audit(h, raw_factory)
    assert [(r.id, r.decision, r.source, r.event) for r in recs] == [(pend.id, "deny", "hook", "decision")], recs


@pytest.mark.parametrize("answer", ["allow", "deny"])
def test_a_person_answering_while_the_hook_runs_settles_it(daemon_factory, raw_factory, tmp_path, answer) -> None:
    """The hook would deny; the person answers first: the person's answer is the decision, the hook's late
    deny is only recorded (its own record, event hook_late), never a second decision."""
    cmd, release, log = hook(tmp_path, "deny")
    h = daemon_factory(policy=policy(cmd))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    ui.sock.settimeout(15.0)
    assert isinstance(ui.recv(), p.Prompt)
    ui.send({"type": "answer", "id": pend.id, "decision": answer})
    got = [ui.recv(), ui.recv()]  # its own Resolved (it is subscribed) and the Ack
    assert {type(m) for m in got} == {p.Resolved, p.Ack}, got
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source) == (answer, "user"), d
    # the hook was still running (or still starting) when the person settled it: it ends only on ``release``
    assert not log.exists() or "end" not in log.read_text()
    release.touch()
    until(lambda: log.exists() and "end" in log.read_text())
    until(lambda: any(r.event == "hook_late" for r in audit(h, raw_factory)))
    recs = audit(h, raw_factory)
    decisions = [r for r in recs if r.event == "decision"]
    assert [(r.id, r.decision, r.source) for r in decisions] == [(pend.id, answer, "user")], recs
    (late,) = [r for r in recs if r.event == "hook_late"]
    assert (late.decision, late.source) == ("deny", "hook") and pend.id in late.reason, late
    assert late.id != pend.id  # its own record: `nexusctl explain` of the ask stays unambiguous
    assert silent(agent, 0.5)  # and the agent heard one decision only


@pytest.mark.parametrize("answer", ["crash", "garbage", "timeout"])
def test_a_hook_that_fails_while_the_person_is_asked_fails_closed(
    daemon_factory, raw_factory, tmp_path, answer
) -> None:
    if answer == "timeout":  # the hook outlives its timeout (and never gets ``release``)
        cmd, release, _ = hook(tmp_path, "allow")
        h = daemon_factory(policy=policy(cmd, timeout=3.0))
    else:
        cmd, release, _ = hook(tmp_path, answer)
        h = daemon_factory(policy=policy(cmd))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    ui.sock.settimeout(15.0)
    assert isinstance(ui.recv(), p.Prompt)
    if answer != "timeout":
        release.touch()
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source, d.id) == ("deny", "hook", pend.id), d
    res = ui.recv()
    assert isinstance(res, p.Resolved) and (res.id, res.decision) == (pend.id, "deny"), res


def test_a_hook_that_asks_leaves_it_to_the_person(daemon_factory, raw_factory, tmp_path) -> None:
    cmd, release, _ = hook(tmp_path, "ask")
    h = daemon_factory(policy=policy(cmd))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    ui.sock.settimeout(15.0)
    assert isinstance(ui.recv(), p.Prompt)
    release.touch()
    assert silent(ui, 1.5) and silent(agent, 0.1)  # nothing settled: the prompt stays
    ui.send({"type": "answer", "id": pend.id, "decision": "allow"})
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("allow", "user"), d
    (rec,) = audit(h, raw_factory)
    assert ("hooks", "ask") in [(s.step, s.outcome) for s in rec.trace], rec.trace


@pytest.mark.parametrize(
    ("cmd", "extra", "mode"),
    [
        (ALLOWED, "", None),  # the mode would allow it
        (ASKED, '[permissions]\nallow = ["Bash(npm install *)"]\n', None),  # an allow rule would
        (ASKED, "", "bypassPermissions"),  # bypass would
    ],
)
def test_no_race_where_passing_would_allow_the_hook_speaks_first(
    daemon_factory, raw_factory, tmp_path, cmd, extra, mode
) -> None:
    """Exactly as strict: what is allowed once the hooks pass is not put to a person (who could only be
    overtaken) nor allowed early; the hook's deny decides, after the hook."""
    hook_cmd, release, log = hook(tmp_path, "deny")
    h = daemon_factory(policy=policy(hook_cmd, extra=extra))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    agent.send({"type": "request", "call": call(tmp_path, cmd, mode), "ref": "r"})
    until(lambda: log.exists())
    assert silent(agent, 1.0) and silent(ui, 0.1)  # no pending, no prompt, no allow while the hook runs
    release.touch()
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("deny", "hook"), d
    # the control: the same with a hook that lets it pass is allowed (the path above was a real allow)
    ok_cmd, ok_release, _ = hook(tmp_path, "allow", name="ok")
    ok_release.touch()
    c = daemon_factory(policy=policy(ok_cmd, extra=extra))
    d = raw_factory(c.socket).ask({"type": "request", "call": call(tmp_path, cmd, mode), "ref": "r"})
    assert isinstance(d, p.Decision) and d.decision == "allow", d


def test_without_a_ui_the_hook_still_decides_first(daemon_factory, raw_factory, tmp_path) -> None:
    """No one to race: the hook's answer, not "no UI", is the reason the agent reads."""
    cmd, release, _ = hook(tmp_path, "deny")
    release.touch()
    h = daemon_factory(policy=policy(cmd))
    d = raw_factory(h.socket).ask({"type": "request", "call": call(tmp_path), "on_no_ui": "deny", "ref": "r"})
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("deny", "hook"), d


REVIEWER = {
    "allow": 'print(json.dumps({"decision": "allow", "reason": "looks fine"}))',
    "block": 'print(json.dumps({"decision": "block", "reason": "looks like exfiltration"}))',
}


def reviewer(tmp: Path, verdict: str, sleep: float) -> tuple[str, Path]:
    path, log = tmp / "reviewer", tmp / "reviewer.log"
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys, time\njson.load(sys.stdin)\nt0 = time.time()\n"
        f"open({str(tmp / 'reviewer.pid')!r}, 'w').write(str(os.getpid()))\n"
        f"time.sleep({sleep})\nopen({str(log)!r}, 'a').write(f'start {{t0}}\\nend {{time.time()}}\\n')\n"
        f"{REVIEWER[verdict]}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), log


def test_auto_mode_runs_the_reviewer_beside_a_slow_hook(daemon_factory, raw_factory, tmp_path) -> None:
    """Auto mode: the reviewer decides in place of a person, so it is not raced against one; it runs at the
    same time as the hooks instead of after them (its time no longer adds to theirs)."""
    sleep = 2.5
    cmd, _, hook_log = hook(tmp_path, "allow", sleep=sleep)
    rev, rev_log = reviewer(tmp_path, "allow", sleep)
    h = daemon_factory(policy=policy(cmd, extra=f'[classifier]\ncommand = ["{rev}"]\ntimeout = 30\n'))
    agent = raw_factory(h.socket)
    d = agent.ask({"type": "request", "call": call(tmp_path, mode="auto"), "ref": "r"})
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("allow", "classifier"), d
    hk, rv = stamps(hook_log), stamps(rev_log)
    assert rv["start"] < hk["end"] and hk["start"] < rv["end"], (hk, rv)  # they overlapped


@pytest.mark.parametrize("hook_answer", ["deny", "ask"])
def test_auto_mode_a_hook_still_wins_over_the_reviewers_allow(
    daemon_factory, raw_factory, tmp_path, hook_answer
) -> None:
    """The reviewer allows at once; the hook answers later. Its deny (or ask) still decides: the reviewer's
    allow is read only once every hook let the call pass."""
    cmd, release, _ = hook(tmp_path, hook_answer)
    rev, rev_log = reviewer(tmp_path, "allow", 0)
    h = daemon_factory(policy=policy(cmd, extra=f'[classifier]\ncommand = ["{rev}"]\n'))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    agent.send({"type": "request", "call": call(tmp_path, mode="auto"), "ref": "r"})
    until(rev_log.exists)
    assert silent(agent, 1.0)  # the reviewer has answered allow; nothing is decided while the hook runs
    release.touch()
    first = agent.recv()
    if hook_answer == "deny":
        assert isinstance(first, p.Decision) and (first.decision, first.source) == ("deny", "hook"), first
    else:
        assert isinstance(first, p.Pending), first
        assert isinstance(ui.recv(), p.Prompt)
        ui.send({"type": "answer", "id": first.id, "decision": "deny"})
        d = agent.recv()
        assert isinstance(d, p.Decision) and d.source == "user", d


def test_a_call_passing_would_allow_is_counted_once_by_the_runaway_limits(
    daemon_factory, raw_factory, tmp_path
) -> None:
    """Working out what passing would give must not count that allow toward ``[limits]`` (it is counted once,
    when it is sent): two of ``repeats_per_minute = 2`` pass, the third goes to the person."""
    cmd, release, _ = hook(tmp_path, "allow")
    release.touch()
    h = daemon_factory(policy=policy(cmd, extra="[limits]\nrepeats_per_minute = 2\ncalls_per_minute = 0\n"))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    for i in range(2):
        d = agent.ask({"type": "request", "call": call(tmp_path, ALLOWED), "ref": f"r{i}"})
        assert isinstance(d, p.Decision) and (d.decision, d.source) == ("allow", "mode"), (i, d)
    pend = agent.ask({"type": "request", "call": call(tmp_path, ALLOWED), "ref": "r2"})
    assert isinstance(pend, p.Pending), pend
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt) and "repeats_per_minute" in prompt.item.verdict.reason


def test_the_agent_going_away_while_the_hook_runs(daemon_factory, raw_factory, tmp_path) -> None:
    """A disconnect settles the raced ask (cancelled, withdrawn from the UI); the hook's later allow decides
    nothing and is only recorded; the daemon carries on."""
    cmd, release, _ = hook(tmp_path, "allow")
    h = daemon_factory(policy=policy(cmd))
    ui = subscribed(h, raw_factory)
    agent = raw_factory(h.socket)
    pend = agent.ask({"type": "request", "call": call(tmp_path), "ref": "r"})
    assert isinstance(pend, p.Pending), pend
    ui.sock.settimeout(15.0)
    assert isinstance(ui.recv(), p.Prompt)
    agent.close()
    res = ui.recv()
    assert isinstance(res, p.Resolved) and (res.id, res.decision, res.source) == (pend.id, "deny", "cancelled"), res
    release.touch()
    until(lambda: any(r.event == "hook_late" for r in audit(h, raw_factory)))
    recs = audit(h, raw_factory)
    assert [(r.decision, r.source) for r in recs if r.event == "decision"] == [("deny", "cancelled")], recs
    (late,) = [r for r in recs if r.event == "hook_late"]
    assert late.decision == "ask" and pend.id in late.reason, late  # passing left it to a person: an ask
    again = raw_factory(h.socket).ask({"type": "request", "call": call(tmp_path, ALLOWED), "ref": "r2"})
    assert isinstance(again, p.Decision) and again.decision == "allow", again


def test_auto_mode_a_hooks_deny_does_not_wait_for_a_slow_reviewer(daemon_factory, raw_factory, tmp_path) -> None:
    """The reviewer runs beside the hooks; a hook's deny stops it rather than waiting for an answer that
    could not matter (ratio: the deny came in a fraction of the reviewer's sleep)."""
    sleep = 12.0
    cmd, release, _ = hook(tmp_path, "deny")
    rev, rev_log = reviewer(tmp_path, "allow", sleep)
    h = daemon_factory(policy=policy(cmd, extra=f'[classifier]\ncommand = ["{rev}"]\ntimeout = 30\n'))
    agent = raw_factory(h.socket)
    t0 = time.monotonic()
    agent.send({"type": "request", "call": call(tmp_path, mode="auto"), "ref": "r"})
    pid_file = tmp_path / "reviewer.pid"
    until(lambda: pid_file.exists() and pid_file.read_text() != "")  # the reviewer is running
    release.touch()  # and the hook denies
    d = agent.recv()
    took = time.monotonic() - t0
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("deny", "hook"), d
    assert took < sleep / 3, took
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    until(gone, timeout=sleep / 2)  # stopped, not left to run out its sleep
    assert not rev_log.exists()
