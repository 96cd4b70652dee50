"""The gate cannot be managed by the agents it gates (issue "Close the gate", class 10).

A fake agent process makes a request through a hook-like child, then a script of its own (a child, and a
grandchild through ``sh -c``) tries to widen the gate over the real socket: mode changes, allow rules,
removing deny rules, trust. All refused and audited; narrowing stays open; the test process (a person's
terminal, outside every agent) is unaffected.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import typing

import pytest

from nexusd import protocol as p
from nexusd.daemon.guard import WIDENS, AgentRegistry, widens
from tests.conftest import DaemonHandle

REQUEST = textwrap.dedent(
    """
    from nexusd.client import Client
    from nexusd import protocol as p
    with Client(role="agent", name="hook") as c:
        d = c.request(p.CallInfo(provider="claude", session="sess-g", tool="Read", input={"file_path": "/tmp/x"},
                                 cwd="/tmp"))
        print("REQUESTED", d.decision, flush=True)
    """
)

# what the agent's own script sends: (message, expected) where expected is "refused" or "ok"
# every change below would succeed from a person's terminal (the learned deny/ask rules exist, the allow rule
# is narrow enough to learn): only the guard can refuse them
ATTEMPTS = [
    ({"type": "set_mode", "session": "sess-g", "mode": "bypassPermissions"}, "blocked"),
    ({"type": "set_mode", "session": "sess-g", "mode": None}, "blocked"),
    ({"type": "rule_change", "action": "add", "kind": "allow", "rule": "Bash(npm run lint)"}, "blocked"),
    ({"type": "rule_change", "action": "remove", "kind": "deny", "rule": "Bash(curl evil.io)"}, "blocked"),
    ({"type": "rule_change", "action": "remove", "kind": "ask", "rule": "Bash(git push origin main)"}, "blocked"),
    ({"type": "trust_change", "action": "add", "path": "/tmp"}, "blocked"),
    ({"type": "rule_change", "action": "add", "kind": "deny", "rule": "Bash(rm -rf build)"}, "ok"),
    ({"type": "trust_change", "action": "remove", "path": "/tmp"}, "ok"),
    ({"type": "status"}, "ok"),
]

SEND = textwrap.dedent(
    """
    import json, sys
    from nexusd.client import Client, ClientError
    import msgspec
    from nexusd import protocol as p
    out = []
    with Client(role="admin", name="script") as c:
        for raw in json.loads(sys.argv[1]):
            try:
                c.call(msgspec.convert(raw, p.ClientMessage))
                out.append("ok")
            except ClientError as e:
                out.append("blocked" if e.code == "self_approval" else e.code)
    print(json.dumps(out), flush=True)
    """
)

AGENT = textwrap.dedent(
    """
    import json, subprocess, sys
    req = subprocess.run([sys.executable, "-c", REQUEST], capture_output=True, text=True)
    print(req.stdout.strip() or req.stderr[-300:], flush=True)
    child = subprocess.run([sys.executable, "-c", SEND, MSGS], capture_output=True, text=True)
    print("CHILD", child.stdout.strip() or child.stderr[-300:], flush=True)
    grand = subprocess.run(["sh", "-c", 'exec "$0" -c "$1" "$2"', sys.executable, SEND, MSGS],
                           capture_output=True, text=True)
    print("GRANDCHILD", grand.stdout.strip() or grand.stderr[-300:], flush=True)
    """
)


def run_agent(daemon: DaemonHandle) -> list[str]:
    msgs = json.dumps([m for m, _ in ATTEMPTS])
    code = f"REQUEST={REQUEST!r}\nSEND={SEND!r}\nMSGS={msgs!r}\n{AGENT}"
    out = subprocess.run([sys.executable, "-c", code], env=daemon.env, capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()


def test_an_agents_own_scripts_cannot_widen_the_gate(daemon_factory) -> None:
    d = daemon_factory()
    from nexusd.client import Client

    with Client(socket_path=str(d.socket), role="admin", name="person") as c:  # learned by a person first
        c.call(p.RuleChange(action="add", kind="deny", rule="Bash(curl evil.io)"))
        c.call(p.RuleChange(action="add", kind="ask", rule="Bash(git push origin main)"))
    lines = run_agent(d)
    assert lines[0].startswith("REQUESTED"), lines
    expected = [e for _, e in ATTEMPTS]
    for prefix in ("CHILD", "GRANDCHILD"):
        line = next(x for x in lines if x.startswith(prefix))
        assert json.loads(line.split(" ", 1)[1]) == expected, line
    with Client(socket_path=str(d.socket), role="admin", name="person") as c:
        st = c.status()
        assert st.sessions.get("sess-g", "default") == "default"  # still not bypass
        rules = c.call(p.Rules())
        texts = {(r.kind, r.rule) for r in rules.rules}
        assert ("allow", "Bash(npm run lint)") not in texts and ("deny", "Bash(curl evil.io)") in texts
        assert ("ask", "Bash(git push origin main)") in texts
        assert ("deny", "Bash(rm -rf build)") in texts  # narrowing went through
        assert "/tmp" not in rules.trusted
        # a person outside every agent's tree is unaffected
        c.call(p.SetMode(session="sess-g", mode="plan"))
        assert c.status().sessions["sess-g"] == "plan"
    records = [json.loads(x) for x in (d.state_dir / "audit.jsonl").read_text().splitlines()]
    refused = [r for r in records if r.get("event") == "gate_control_refused"]
    assert len(refused) == 2 * sum(1 for _, e in ATTEMPTS if e == "blocked")
    assert {r["tool"] for r in refused} == {"nexusd.set_mode", "nexusd.rule_change", "nexusd.trust_change"}


def test_nothing_is_refused_before_any_agent_was_seen(daemon) -> None:
    from nexusd.client import Client

    with Client(socket_path=str(daemon.socket), role="admin", name="person") as c:
        c.call(p.SetMode(session="s", mode="acceptEdits"))
        assert c.status().sessions["s"] == "acceptEdits"


def test_every_client_message_is_classified() -> None:
    """A new message type cannot be added without deciding whether it widens the gate."""
    members = set(typing.get_args(p.ClientMessage))
    assert members == set(WIDENS), members ^ set(WIDENS)


@pytest.mark.parametrize(
    ("msg", "wide"),
    [
        (p.SetMode(session="s", mode="plan"), True),
        (p.SetMode(session="s", mode=None), True),
        (p.RuleChange(action="add", kind="allow", rule="Bash(x)"), True),
        (p.RuleChange(action="add", kind="ask", rule="Bash(x)"), False),
        (p.RuleChange(action="remove", kind="allow", rule="Bash(x)"), False),
        (p.RuleChange(action="remove", kind="ask", rule="Bash(x)"), True),
        (p.TrustChange(action="add", path="/p"), True),
        (p.TrustChange(action="remove", path="/p"), False),
        (p.Answer(id="x" * 32, decision="deny"), True),
        (p.Check(call=p.CallInfo("claude", "s", "Bash", {"command": "ls"}, "/")), False),
    ],
)
def test_widening_table(msg, wide) -> None:
    assert widens(msg) is wide


def test_registry_pid_reuse_and_transient_shells() -> None:
    """Identity is (pid, start time): a recycled pid is a different process. A `sh -c` between the hook and
    the agent is stepped over, an interactive shell is not."""
    agent = subprocess.Popen(["sleep", "30"])
    try:
        reg = AgentRegistry(frozenset({0, 1}))
        reg.saw(agent.pid, None)
        assert reg.from_agent(agent.pid)
        ((pid, start),) = reg.agents
        reg.agents.clear()
        reg.agents[(pid, start + 1)] = None  # the same pid, started at another time: not that agent
        assert not reg.from_agent(agent.pid)
    finally:
        agent.kill()
        agent.wait()
    outer = subprocess.Popen(["sh", "-c", "sleep 30; true"])  # a transient shell whose child is the "hook"
    try:
        time.sleep(0.2)
        reg = AgentRegistry(frozenset({0, 1}))
        reg.saw(outer.pid, None)
        ((pid, _),) = reg.agents
        assert pid != outer.pid  # stepped over the sh -c to its parent (this test process)
    finally:
        outer.kill()
        outer.wait()
    assert not AgentRegistry(frozenset({0, 1})).from_agent(None)  # no agent seen: nothing to refuse
    reg = AgentRegistry(frozenset({0, 1}))
    reg.agents[(999_999_999, 1)] = None
    assert reg.from_agent(None) and reg.from_agent(999_999_998)  # cannot tell: refused


class _Peer(typing.NamedTuple):
    pid: int | None


class _Answerer(typing.NamedTuple):
    peer: _Peer


def test_an_answer_from_the_askers_tree_is_told_apart_from_a_strangers() -> None:
    """``answered_by_its_agent`` over the real process table: this test process descends from its parent."""
    import os

    from nexusd.daemon.guard import answered_by_its_agent

    me = typing.cast(typing.Any, _Answerer(_Peer(os.getpid())))
    assert answered_by_its_agent(me, frozenset({os.getppid()}))  # the asker's agent is an ancestor
    assert answered_by_its_agent(me, frozenset({os.getpid()}))  # or the answerer itself
    assert not answered_by_its_agent(me, frozenset({2**22 + 12345}))  # not in the chain
    assert not answered_by_its_agent(me, frozenset())  # no agent known for the ask
    unknown = typing.cast(typing.Any, _Answerer(_Peer(None)))
    assert answered_by_its_agent(unknown, frozenset({os.getppid()}))  # cannot tell: refused (fail closed)
    gone = typing.cast(typing.Any, _Answerer(_Peer(2**22 + 54321)))  # no such process: no chain
    assert answered_by_its_agent(gone, frozenset({os.getppid()}))
