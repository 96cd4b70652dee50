"""Provenance: every decision's audit record carries the whole chain that produced it (the engine's steps, the
gate's sandbox step, the daemon's own: no UI, a limit, waiting, the answer, the wrap), and ``nexusctl explain``
prints it for a past decision with each rule's policy file and line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle

POLICY = """[permissions]
deny = ["Bash(curl *)"]
allow = ["Bash(git status)"]
ask = ["Bash(git push *)"]
"""


def ctl(h: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def req(cmd: str, ref: str = "r", **kw: Any) -> dict[str, Any]:
    return {
        "type": "request",
        "ref": ref,
        "call": {"provider": "claude", "session": "s-x", "tool": "Bash", "input": {"command": cmd}, "cwd": "/tmp"},
        **kw,
    }


def last_record(h: DaemonHandle, raw_factory) -> p.AuditRecord:
    ui = raw_factory(h.socket, role="ui")
    r = ui.ask({"type": "audit", "limit": 1})  # flushes the writer
    assert isinstance(r, p.AuditReply)
    return r.records[-1]


def steps(rec: p.AuditRecord) -> list[tuple[str, str]]:
    return [(s.step, s.outcome) for s in rec.trace]


def test_an_allow_by_rule_names_the_rule_file_and_line(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY)
    agent = raw_factory(h.socket)
    assert agent.ask(req("git status")).decision == "allow"
    rec = last_record(h, raw_factory)
    assert ("deny_rules", "passed") in steps(rec) and ("allow_rules", "matched") in steps(rec)
    policy_file = h.config_dir / "policy.toml"
    r = ctl(h, "explain", rec.id)
    assert r.returncode == 0, r.stderr
    assert f"rule:     Bash(git status)  from {policy_file}:3" in r.stdout
    assert f"allow_rules: matched — Bash(git status) ({policy_file}:3)" in r.stdout
    r = ctl(h, "explain", rec.id[:12], "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["trace"]


def test_a_deny_rule(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY)
    agent = raw_factory(h.socket)
    assert agent.ask(req("curl -s x.example")).decision == "deny"
    rec = last_record(h, raw_factory)
    assert steps(rec)[-1][0] in ("deny_rules",) or ("deny_rules", "matched") in steps(rec)
    r = ctl(h, "explain", rec.id)
    assert f"deny_rules: matched — Bash(curl *) ({h.config_dir / 'policy.toml'}:2)" in r.stdout


def test_no_ui_connected_is_a_step(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY)
    agent = raw_factory(h.socket)
    assert agent.ask(req("git push origin main")).decision == "deny"
    rec = last_record(h, raw_factory)
    assert ("ask_rules", "matched") in steps(rec) and steps(rec)[-1] == ("no_ui", "deny")


def test_a_persons_answer_and_a_timeout_are_steps(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY, pending_timeout=1.0)
    ui = raw_factory(h.socket, role="ui", name="explain-ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(h.socket)
    pend = agent.ask(req("git push origin main"))
    ui.recv()
    ui.ask({"type": "answer", "id": pend.id, "decision": "allow"})
    agent.recv()
    rec = last_record(h, raw_factory)
    assert rec.id == pend.id
    assert steps(rec)[-2:] == [("pending", "ask"), ("answer", "allow")]
    assert "explain-ui" in rec.trace[-1].detail
    r = ctl(h, "explain", pend.id[:10])
    assert "answer: allow — explain-ui" in r.stdout and "ask_rules: matched" in r.stdout

    pend = agent.ask(req("git push origin dev", ref="r2"))
    assert isinstance(agent.recv(), p.Decision)  # nobody answers: the deadline denies
    deadline = time.monotonic() + 10
    while True:
        rec = last_record(h, raw_factory)
        if rec.id == pend.id:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert steps(rec)[-1] == ("timeout", "deny")


def test_a_limit_reached_is_a_step(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY, args=("--max-pending-per-connection", "1"))
    ui = raw_factory(h.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(h.socket)
    assert isinstance(agent.ask(req("git push origin a", ref="a")), p.Pending)
    d = agent.ask(req("git push origin b", ref="b"))
    assert isinstance(d, p.Decision) and d.decision == "deny"
    rec = last_record(h, raw_factory)
    assert steps(rec)[-1] == ("limit", "deny") and ("ask_rules", "matched") in steps(rec)


def test_an_edited_answer_records_both_decisions(daemon_factory, raw_factory, tmp_path) -> None:
    h = daemon_factory(policy='[permissions]\nask = ["Bash"]\n')
    ui = raw_factory(h.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(h.socket)
    c = req("rm -rf build")
    c["call"]["cwd"] = str(tmp_path)
    pend = agent.ask(c)
    ui.recv()
    ui.ask({"type": "answer", "id": pend.id, "decision": "allow", "updated_input": {"command": "rm -rf build/x"}})
    agent.recv()
    rec = last_record(h, raw_factory)
    names = [s.step for s in rec.trace]
    assert "edit" in names and "edit.ask_rules" in names and names[-1] == "wrap"


@pytest.mark.parametrize("args, code", [(["ffffffffffff"], 7), (["ab"], 2)])
def test_unknown_and_short_ids(daemon, args: list[str], code: int) -> None:
    r = ctl(daemon, "explain", *args)
    assert r.returncode == code, r.stdout + r.stderr


def test_an_ambiguous_prefix(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY)
    agent = raw_factory(h.socket)
    for i in range(3):
        agent.ask(req("git status", ref=f"r{i}"))
    rec = last_record(h, raw_factory)
    common = rec.id[:-2]  # the daemon's own ids share a prefix
    r = ctl(h, "explain", common[:8])
    assert r.returncode == 2 and "ambiguous" in r.stderr


def test_the_gates_sandbox_step_and_the_wrap(daemon_factory, raw_factory, tmp_path) -> None:
    h = daemon_factory(policy="[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = true\n")
    ui = raw_factory(h.socket, role="ui")
    deadline = time.monotonic() + 30
    while True:  # the probe runs in the background at start
        st = ui.ask({"type": "status"})
        if isinstance(st, p.StatusReply) and st.sandbox is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert st.sandbox.available, st.sandbox
    agent = raw_factory(h.socket)
    c = req("make build")
    c["call"]["cwd"] = str(tmp_path)
    d = agent.ask(c)
    assert d.decision == "allow" and d.updated_input is not None, d
    rec = last_record(h, raw_factory)
    assert ("sandbox", "allow") in steps(rec) and steps(rec)[-1] == ("wrap", "updated")


def test_explain_over_the_wire(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=POLICY)
    agent = raw_factory(h.socket)
    agent.ask(req("git status"))
    agent.ask(req("git push origin x", ref="r2"))
    first = last_record(h, raw_factory)
    ui = raw_factory(h.socket, role="ui")
    older = ui.ask({"type": "audit", "limit": 2})
    assert isinstance(older, p.AuditReply) and len(older.records) == 2
    want = older.records[0]
    r = ui.ask({"type": "audit", "id": want.id, "ref": "x"})
    assert isinstance(r, p.AuditReply) and r.ref == "x" and [x.id for x in r.records] == [want.id]
    assert r.records[0].trace and r.records[0].trace == want.trace and want.id != first.id
    assert isinstance(ui.ask({"type": "audit", "id": "nope"}), p.AuditReply)
    for bad in (b'{"type":"audit","id":5,"ref":"x"}', b'{"type":"audit","id":["a"],"ref":"x"}'):
        ui.send_bytes(bad + b"\n")
        e = ui.recv()
        assert isinstance(e, p.Error) and e.code == "invalid_message" and e.ref == "x"
