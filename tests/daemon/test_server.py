"""The real daemon over the wire: every message type, malformed input, the pending table, roles, shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from pathlib import Path

import pytest

from nexusd import protocol as p
from tests.daemon.conftest import CALL_BASH

CALL_READ = {**CALL_BASH, "tool": "Read", "input": {"file_path": "/tmp/x"}}


def request(call=CALL_BASH, ref="r1", on_no_ui="deny"):
    return {"type": "request", "call": call, "on_no_ui": on_no_ui, "ref": ref}


def status(raw_conn) -> p.StatusReply:
    msg = raw_conn.ask({"type": "status", "ref": "st"})
    assert isinstance(msg, p.StatusReply), msg
    return msg


# ---------------------------------------------------------------- handshake


def test_hello_welcome_carries_version_role_and_ref(daemon, raw_factory):
    r = raw_factory(daemon.socket, role=None)
    msg = r.ask({"type": "hello", "proto": p.PROTOCOL_VERSION, "role": "ui", "name": "t", "ref": "h"})
    assert isinstance(msg, p.Welcome)
    assert (msg.proto, msg.role, msg.ref) == (p.PROTOCOL_VERSION, "ui", "h")
    assert msg.version


def test_wrong_protocol_version_is_refused_and_closed(daemon, raw_factory):
    r = raw_factory(daemon.socket, role=None)
    msg = r.ask({"type": "hello", "proto": 999, "role": "agent", "name": "t"})
    assert isinstance(msg, p.Error) and msg.code == "protocol_version"
    assert r.closed()


def test_first_message_must_be_hello(daemon, raw_factory):
    r = raw_factory(daemon.socket, role=None)
    msg = r.ask(request())
    assert isinstance(msg, p.Error) and msg.code == "protocol_version"
    assert r.closed()


def test_second_hello_is_an_error_but_connection_stays(daemon, raw_factory):
    r = raw_factory(daemon.socket)
    msg = r.ask({"type": "hello", "proto": 1, "role": "admin", "name": "t"})
    assert isinstance(msg, p.Error) and msg.code == "invalid_message"
    assert status(r).connections.get("agent") == 1  # still an agent, not promoted


# ---------------------------------------------------------------- malformed input

MALFORMED = {
    # message type -> a wrong-typed form and an unknown-field form
    "hello": ({"type": "hello", "proto": "1", "role": "agent", "name": "x"}, None),
    "request": ({"type": "request", "call": {"provider": 1}}, {"type": "request", "call": CALL_BASH, "x": 1}),
    "cancel": ({"type": "cancel", "id": 5}, {"type": "cancel", "id": "a", "x": 1}),
    "subscribe": ({"type": "subscribe", "ref": 3}, {"type": "subscribe", "x": 1}),
    "answer": (
        {"type": "answer", "id": "a", "decision": "maybe"},
        {"type": "answer", "id": "a", "decision": "allow", "x": 1},
    ),
    "status": ({"type": "status", "ref": []}, {"type": "status", "x": 1}),
    "check": ({"type": "check", "call": "Bash"}, {"type": "check", "call": CALL_BASH, "x": 1}),
    "set_mode": (
        {"type": "set_mode", "session": 1, "mode": "x"},
        {"type": "set_mode", "session": "s", "mode": None, "x": 1},
    ),
    "reload": ({"type": "reload", "ref": 1.5}, {"type": "reload", "x": 1}),
    "rules": ({"type": "rules", "ref": {}}, {"type": "rules", "x": 1}),
    "rule_change": ({"type": "rule_change", "action": "drop", "kind": "allow", "rule": "Bash"}, None),
    "trust_change": ({"type": "trust_change", "action": "add", "path": 7}, None),
    "probe": ({"type": "probe", "refresh": "yes"}, {"type": "probe", "x": 1}),
    "sandbox_plan": ({"type": "sandbox_plan", "command": ["ls"], "cwd": "/"}, None),
    "audit": ({"type": "audit", "limit": "all"}, {"type": "audit", "x": 1}),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_forms_of_every_message_get_an_error_and_keep_the_connection(daemon, raw_factory, kind):
    r = raw_factory(daemon.socket, role="admin")
    wrong_types, unknown_field = MALFORMED[kind]
    for bad in (wrong_types, unknown_field):
        if bad is None:
            continue
        msg = r.ask(bad)
        assert isinstance(msg, p.Error), (kind, msg)
        assert msg.code == "invalid_message", (kind, msg)
    r.send_bytes(b'{"type": "' + kind.encode() + b'", \n')  # bad JSON of this type
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "bad_json"
    assert isinstance(status(r), p.StatusReply)


@pytest.mark.parametrize("line", [b"{bad json", b"[]", b"42", b'"x"', b"{}", b'{"type": 5}', b"nul" + b"l"])
def test_bad_json_and_shapes_keep_the_connection(daemon, raw_factory, line):
    r = raw_factory(daemon.socket)
    r.send_bytes(line + b"\n")
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code in ("bad_json", "invalid_message", "unknown_type")
    assert isinstance(status(r), p.StatusReply)


def test_unknown_type_has_its_own_code_and_echoes_ref(daemon, raw_factory):
    r = raw_factory(daemon.socket)
    msg = r.ask({"type": "launch_missiles", "ref": "z"})
    assert isinstance(msg, p.Error) and msg.code == "unknown_type" and msg.ref == "z"
    assert isinstance(status(r), p.StatusReply)


@pytest.mark.parametrize(
    "payload,code",
    [
        (b'{"type":"status","ref":"\xff\xfe"}\n', "bad_json"),  # invalid UTF-8
        (b'{"type":"status",\x00"ref":"a"}\n', "bad_json"),  # NUL byte
        (b"\xc0\xaf\n", "bad_json"),  # overlong encoding
    ],
)
def test_framing_errors_close_the_connection(daemon, raw_factory, payload, code):
    r = raw_factory(daemon.socket)
    r.send_bytes(payload)
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == code
    assert r.closed()
    assert isinstance(status(raw_factory(daemon.socket)), p.StatusReply)


def test_line_over_the_limit_closes_whether_it_arrives_whole_or_in_pieces(daemon_factory, raw_factory):
    d = daemon_factory(args=["--max-line-bytes", "4096"])
    r = raw_factory(d.socket)
    r.send_bytes(b'{"type":"status","ref":"' + b"a" * 5000 + b'"}\n')  # one read, longer than asked
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "line_too_long"
    assert r.closed()
    r2 = raw_factory(d.socket)
    for _ in range(10):  # no newline at all, in pieces
        try:
            r2.send_bytes(b"x" * 1000)
        except (BrokenPipeError, ConnectionResetError):
            break
    msg = r2.recv()
    assert isinstance(msg, p.Error) and msg.code == "line_too_long"
    # exactly at the limit is fine
    r3 = raw_factory(d.socket)
    ref = "b" * (4096 - len('{"type":"status","ref":""}'))
    assert status(r3).pending == 0
    r3.send({"type": "status", "ref": ref})
    assert r3.recv().ref == ref


def test_default_limit_is_one_mebibyte(daemon, raw_factory):
    r = raw_factory(daemon.socket)
    r.send_bytes(b'{"type":"status","ref":"' + b"a" * (1 << 20) + b'"}\n')
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "line_too_long"


def test_half_a_line_then_eof_and_a_thousand_dropped_connections(daemon, raw_factory):
    from tests.daemon.conftest import Raw

    r = Raw(daemon.socket)
    r.hello()
    r.send_bytes(b'{"type":"request","call":{"provider":"claude"')
    r.close()
    for i in range(1000):
        c = Raw(daemon.socket)
        if i % 3 == 0:
            c.send_bytes(b'{"type":"hel')
        elif i % 3 == 1:
            c.hello()
        c.close()
    probe = raw_factory(daemon.socket, role="admin")
    deadline = time.monotonic() + 10
    while True:
        st = status(probe)
        if sum(st.connections.values()) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert st.connections == {"admin": 1}
    assert not any(k.startswith("allow/") for k in st.counters)


# ---------------------------------------------------------------- roles


@pytest.mark.parametrize(
    "role,msg",
    [
        ("agent", {"type": "subscribe"}),
        ("agent", {"type": "answer", "id": "0" * 32, "decision": "allow"}),
        ("agent", {"type": "set_mode", "session": "s", "mode": "bypassPermissions"}),
        ("agent", {"type": "reload"}),
        ("agent", {"type": "rule_change", "action": "add", "kind": "allow", "rule": "Bash"}),
        ("agent", {"type": "trust_change", "action": "add", "path": "/"}),
        ("agent", {"type": "audit"}),
        ("ui", request()),
        ("admin", request()),
    ],
)
def test_roles_gate_messages(daemon, raw_factory, role, msg):
    r = raw_factory(daemon.socket, role=role)
    reply = r.ask({**msg, "ref": "q"})
    assert isinstance(reply, p.Error) and reply.code == "wrong_role" and reply.ref == "q"
    assert isinstance(status(r), p.StatusReply)


# ---------------------------------------------------------------- requests


def test_safe_call_is_decided_at_once_and_audited(daemon, raw_factory):
    r = raw_factory(daemon.socket)
    d = r.ask(request(CALL_READ))
    assert isinstance(d, p.Decision) and d.decision == "allow" and d.ref == "r1" and d.id is None
    admin = raw_factory(daemon.socket, role="admin")
    audit = admin.ask({"type": "audit", "tool": "Read"})
    assert isinstance(audit, p.AuditReply)
    (rec,) = audit.records
    assert (rec.tool, rec.decision, rec.summary, rec.peer_pid) == ("Read", "allow", "/tmp/x", os.getpid())


def test_ask_without_ui_denies_or_hands_back(daemon, raw_factory):
    r = raw_factory(daemon.socket)
    d = r.ask(request())
    assert isinstance(d, p.Decision) and d.decision == "deny"
    assert "no nexusd UI" in d.reason
    d = r.ask(request(on_no_ui="ask", ref="r2"))
    assert isinstance(d, p.Decision) and d.decision == "ask" and d.ref == "r2"


def test_prompt_answer_allow_reaches_agent_and_every_ui(daemon, raw_factory):
    ui1 = raw_factory(daemon.socket, role="ui", name="tui-1")
    ui2 = raw_factory(daemon.socket, role="ui", name="tui-2")
    for ui in (ui1, ui2):
        snap = ui.ask({"type": "subscribe", "ref": "s"})
        assert isinstance(snap, p.Snapshot) and snap.items == [] and snap.ref == "s"
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    assert isinstance(pend, p.Pending) and pend.ref == "r1" and len(pend.id) == 32
    assert pend.deadline > time.time() + 5
    for ui in (ui1, ui2):
        prompt = ui.recv()
        assert isinstance(prompt, p.Prompt) and prompt.item.id == pend.id
        assert prompt.item.call.tool == "Bash" and prompt.item.verdict.decision == "ask"
    ui1.send({"type": "answer", "id": pend.id, "decision": "allow", "message": "go ahead", "ref": "a"})
    res = ui1.recv()  # the answering UI sees the resolution first, then its Ack
    assert isinstance(res, p.Resolved) and res.id == pend.id and res.decision == "allow" and res.scope == "once"
    ack = ui1.recv()
    assert isinstance(ack, p.Ack) and ack.ref == "a"
    d = agent.recv()
    assert isinstance(d, p.Decision)
    assert (d.decision, d.source, d.id, d.ref, d.message) == ("allow", "user", pend.id, "r1", "go ahead")
    assert "tui-1" in d.answered_by
    res = ui2.recv()
    assert isinstance(res, p.Resolved) and res.id == pend.id and res.decision == "allow" and res.scope == "once"
    late = ui2.ask({"type": "answer", "id": pend.id, "decision": "deny", "ref": "b"})
    assert isinstance(late, p.Error) and late.code == "already_decided"
    unknown = ui2.ask({"type": "answer", "id": "f" * 32, "decision": "allow"})
    assert isinstance(unknown, p.Error) and unknown.code == "not_found"
    audit = ui2.ask({"type": "audit", "tool": "Bash"})  # the person's message is part of the record
    assert [(r.id, r.message, r.tier) for r in audit.records if r.id == pend.id] == [(pend.id, "go ahead", "dangerous")]


def test_abort_goes_with_deny_reaches_the_agent_and_the_audit(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui", name="tui-abort")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    assert isinstance(ui.recv(), p.Prompt)
    bad = ui.ask({"type": "answer", "id": pend.id, "decision": "allow", "abort": True, "ref": "x"})
    assert isinstance(bad, p.Error) and bad.code == "invalid_message"  # and the request is still pending
    for bad_value in ("yes", 1, None):
        err = ui.ask({"type": "answer", "id": pend.id, "decision": "deny", "abort": bad_value, "ref": "y"})
        assert isinstance(err, p.Error) and err.code == "invalid_message"
    ui.send({"type": "answer", "id": pend.id, "decision": "deny", "abort": True, "message": "stop", "ref": "a"})
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.abort, d.message) == ("deny", True, "stop")
    assert "stopped the agent" in d.reason
    ui.recv()  # resolved
    ui.recv()  # ack
    audit = ui.ask({"type": "audit", "tool": "Bash"})
    assert [r.abort for r in audit.records if r.id == pend.id] == [True]


def test_snapshot_lists_what_is_pending(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    late_ui = raw_factory(daemon.socket, role="ui")
    snap = late_ui.ask({"type": "subscribe"})
    assert [i.id for i in snap.items] == [pend.id]
    assert snap.items[0].peer_pid == os.getpid()


def test_deadline_denies_with_source_timeout(daemon_factory, raw_factory):
    d = daemon_factory(pending_timeout=0.5)
    ui = raw_factory(d.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(d.socket)
    pend = agent.ask(request())
    assert isinstance(pend, p.Pending)
    dec = agent.recv()
    assert isinstance(dec, p.Decision) and (dec.decision, dec.source) == ("deny", "timeout")
    ui.recv()  # prompt
    res = ui.recv()
    assert isinstance(res, p.Resolved) and res.source == "timeout"
    late = ui.ask({"type": "answer", "id": pend.id, "decision": "allow"})
    assert isinstance(late, p.Error) and late.code == "already_decided"


def test_many_deadlines_share_one_timer_and_all_fire(daemon_factory, raw_factory):
    d = daemon_factory(pending_timeout=0.3)
    ui = raw_factory(d.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(d.socket)
    for i in range(200):
        agent.send(request(ref=f"r{i}"))
    decisions = {}
    while len(decisions) < 200:
        m = agent.recv()
        if isinstance(m, p.Decision):
            decisions[m.ref] = m
    assert {(m.decision, m.source) for m in decisions.values()} == {("deny", "timeout")}


def test_requester_disconnect_cancels_and_never_allows(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    ui.recv()
    agent.close()
    res = ui.recv()
    assert isinstance(res, p.Resolved) and (res.id, res.decision, res.source) == (pend.id, "deny", "cancelled")
    late = ui.ask({"type": "answer", "id": pend.id, "decision": "allow"})
    assert isinstance(late, p.Error) and late.code == "already_decided"


def test_cancel_own_request_only(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    other = raw_factory(daemon.socket)
    pend = agent.ask(request())
    stolen = other.ask({"type": "cancel", "id": pend.id, "ref": "x"})
    assert isinstance(stolen, p.Error) and stolen.code == "not_found"
    agent.send({"type": "cancel", "id": pend.id, "ref": "c"})
    got = {type(agent.recv()), type(agent.recv())}
    assert got == {p.Decision, p.Ack}


def test_two_uis_answering_at_once_exactly_one_wins(daemon, raw_factory):
    for _round in range(5):
        uis = [raw_factory(daemon.socket, role="ui", name=f"ui{i}") for i in range(4)]
        for ui in uis:
            ui.ask({"type": "subscribe"})
        agent = raw_factory(daemon.socket)
        pend = agent.ask(request())
        for ui in uis:
            assert isinstance(ui.recv(), p.Prompt)
        payloads = [
            json.dumps({"type": "answer", "id": pend.id, "decision": dec, "ref": "x"}).encode() + b"\n"
            for dec in ("allow", "deny", "allow", "deny")
        ]
        barrier = threading.Barrier(len(uis))

        def fire(ui, data, barrier=barrier):
            barrier.wait()
            ui.send_bytes(data)

        threads = [threading.Thread(target=fire, args=(ui, data)) for ui, data in zip(uis, payloads, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        replies = []
        for ui in uis:
            m = ui.recv()
            while isinstance(m, p.Resolved):
                m = ui.recv()
            replies.append(m)
        acks = [m for m in replies if isinstance(m, p.Ack)]
        errors = [m for m in replies if isinstance(m, p.Error)]
        assert len(acks) == 1 and len(errors) == 3
        assert {e.code for e in errors} == {"already_decided"}
        assert isinstance(agent.recv(), p.Decision)
        for c in [*uis, agent]:
            c.close()


def test_per_connection_and_global_limits_deny_with_a_reason(daemon_factory, raw_factory):
    d = daemon_factory(args=["--max-pending-per-connection", "2", "--max-pending", "3"])
    ui = raw_factory(d.socket, role="ui")
    ui.ask({"type": "subscribe"})
    a = raw_factory(d.socket)
    assert isinstance(a.ask(request(ref="1")), p.Pending)
    assert isinstance(a.ask(request(ref="2")), p.Pending)
    third = a.ask(request(ref="3"))
    assert isinstance(third, p.Decision) and third.decision == "deny" and "per" not in third.reason.split()[0]
    assert "this connection" in third.reason
    b = raw_factory(d.socket)
    assert isinstance(b.ask(request(ref="4")), p.Pending)
    over = b.ask(request(ref="5"))
    assert isinstance(over, p.Decision) and over.decision == "deny" and "in the daemon" in over.reason


def test_self_approval_from_the_agents_process_tree_is_refused(daemon, raw_factory):
    """A fake agent process runs a requester and then, as its own child, `answer`: refused and audited."""
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent_script = textwrap.dedent(
        """
        import subprocess, sys
        req = subprocess.Popen([sys.executable, "-c", REQ], stdout=subprocess.PIPE, text=True)
        pid_line = req.stdout.readline().strip()
        ans = subprocess.run([sys.executable, "-c", ANS, pid_line], capture_output=True, text=True)
        print("ANSWER", ans.stdout.strip(), flush=True)
        print("DECISION", req.stdout.readline().strip(), flush=True)
        req.wait()
        """
    )
    req_script = textwrap.dedent(
        """
        from nexusd.client import Client
        from nexusd import protocol as p
        import json
        with Client(role="agent", name="hook") as c:
            m = c.request(p.CallInfo(provider="claude", session="s", tool="Bash",
                          input={"command": "rm -rf build"}, cwd="/tmp"), timeout=20,
                          on_pending=lambda pending: print(pending.id, flush=True))
            print(m.decision, m.source, flush=True)
        """
    )
    ans_script = textwrap.dedent(
        """
        import sys
        from nexusd.client import Client, ClientError
        with Client(role="ui", name="nexusctl") as c:
            try:
                c.answer(sys.argv[1], "allow")
                print("accepted")
            except ClientError as e:
                print(e.code)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", f"REQ={req_script!r}\nANS={ans_script!r}\n{agent_script}"],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt)
    line = proc.stdout.readline()
    assert line.split() == ["ANSWER", "self_approval"], line
    # still pending: a person elsewhere can decide it
    ack = ui.ask({"type": "answer", "id": prompt.item.id, "decision": "deny"})
    ack = ack if isinstance(ack, p.Ack) else ui.recv()
    assert isinstance(ack, p.Ack)
    assert proc.stdout.readline().split() == ["DECISION", "deny", "user"]
    proc.wait(10)
    admin = raw_factory(daemon.socket, role="admin")
    records = admin.ask({"type": "audit"}).records
    assert any(r.event == "self_approval_refused" and r.id == prompt.item.id for r in records)


def test_self_approval_by_declared_agent_pid(daemon, raw_factory):
    """The call names its agent process; an answer from that process (or below it) is refused."""
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    answerer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom nexusd.client import Client, ClientError\n"
            "i = sys.stdin.readline().strip()\n"
            "with Client(role='ui') as c:\n"
            "    try:\n        c.answer(i, 'allow'); print('accepted')\n"
            "    except ClientError as e:\n        print(e.code)\n",
        ],
        env=daemon.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request({**CALL_BASH, "agent_pid": answerer.pid}))
    out, _ = answerer.communicate(pend.id + "\n", timeout=10)
    assert out.strip() == "self_approval"
    assert isinstance(ui.recv(), p.Prompt)
    ack = ui.ask({"type": "answer", "id": pend.id, "decision": "allow"})  # someone else may
    ack = ack if isinstance(ack, p.Ack) else ui.recv()
    assert isinstance(ack, p.Ack)


# ---------------------------------------------------------------- scopes, modes, queries


def test_session_scope_adds_session_rules(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    ui.recv()
    ui.send({"type": "answer", "id": pend.id, "decision": "allow", "scope": "session", "rules": ["Bash(ls *)"]})
    assert isinstance(ui.recv(), p.Resolved)
    assert isinstance(ui.recv(), p.Ack)
    assert agent.recv().decision == "allow"
    rules = ui.ask({"type": "rules"})
    assert isinstance(rules, p.RulesReply)
    assert any(r.rule == "Bash(ls *)" and r.layer == "session" and r.origin == "session:s-test" for r in rules.rules)


def test_always_persists_the_rule_and_the_next_call_is_not_asked(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    ui.recv()
    rule = "Bash(npm install left-pad)"
    reply = ui.ask({"type": "answer", "id": pend.id, "decision": "allow", "scope": "always", "rules": [rule]})
    assert isinstance(reply, p.Resolved), reply
    assert isinstance(ui.recv(), p.Ack)
    assert agent.recv().decision == "allow"
    learned = tomllib.loads((daemon.state_dir / "learned.toml").read_text())
    assert rule in learned["permissions"]["allow"], learned
    rules = ui.ask({"type": "rules"})
    assert isinstance(rules, p.RulesReply)
    assert any(r.rule == rule and r.layer == "learned" for r in rules.rules), rules.rules
    again = agent.ask(request())  # the same call again: settled by the learned rule, nobody asked
    assert isinstance(again, p.Decision) and again.decision == "allow", again


def test_always_refused_changes_nothing_and_the_request_stays_pending(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    ui.recv()
    # a blanket rule is never learned: refused, nothing written, and the request still waits for an answer
    reply = ui.ask({"type": "answer", "id": pend.id, "decision": "allow", "scope": "always", "rules": ["Bash"]})
    assert isinstance(reply, p.Error) and reply.code == "refused", reply
    assert "still pending" in reply.message
    assert not (daemon.state_dir / "learned.toml").exists()
    ui.send({"type": "answer", "id": pend.id, "decision": "deny"})
    assert isinstance(ui.recv(), p.Resolved)
    assert isinstance(ui.recv(), p.Ack)
    assert agent.recv().decision == "deny"


def test_never_requires_deny(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    ui.recv()
    reply = ui.ask({"type": "answer", "id": pend.id, "decision": "allow", "scope": "never", "rules": ["Bash"]})
    assert isinstance(reply, p.Error) and reply.code == "invalid_message"


def test_set_mode_shows_in_status(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ack = ui.ask({"type": "set_mode", "session": "sess-9", "mode": "plan", "ref": "m"})
    assert isinstance(ack, p.Ack) and ack.ref == "m"
    assert status(ui).sessions["sess-9"] == "plan"
    ui.ask({"type": "set_mode", "session": "sess-9", "mode": None})
    assert status(ui).sessions["sess-9"] == "default"


@pytest.mark.parametrize("mode", ["bypas", "superuser", "Yolo", "plan mode", "defaults"])
def test_set_mode_refuses_unknown_names(daemon, raw_factory, mode):
    ui = raw_factory(daemon.socket, role="ui")
    reply = ui.ask({"type": "set_mode", "session": "sess-u", "mode": mode, "ref": "m"})
    assert isinstance(reply, p.Error) and reply.code == "invalid_message" and reply.ref == "m"
    assert "unknown mode" in reply.message and "acceptEdits" in reply.message
    assert "sess-u" not in status(ui).sessions or status(ui).sessions["sess-u"] == "default"


def test_check_has_no_side_effects(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    res = agent.ask({"type": "check", "call": CALL_BASH, "ref": "k"})
    assert isinstance(res, p.CheckResult) and res.ref == "k" and res.verdict.decision == "ask"
    assert res.verdict.trace
    st = status(agent)
    assert st.pending == 0 and st.counters == {}


def test_status_reports_connections_counters_policy(daemon, raw_factory):
    agent = raw_factory(daemon.socket)
    agent.ask(request(CALL_READ))
    admin = raw_factory(daemon.socket, role="admin")
    st = status(admin)
    assert st.pid == daemon.proc.pid
    assert st.connections == {"agent": 1, "admin": 1}
    assert sum(v for k, v in st.counters.items() if k.startswith("allow/")) == 1
    assert st.policy and isinstance(st.policy_errors, list)


def test_reload_rules_trust_probe_plan_and_audit_answer(daemon, raw_factory, tmp_path):
    admin = raw_factory(daemon.socket, role="admin")
    assert isinstance(admin.ask({"type": "reload", "ref": "1"}), p.Ack | p.Error)
    assert isinstance(admin.ask({"type": "rules"}), p.RulesReply)
    rc = admin.ask({"type": "rule_change", "action": "add", "kind": "deny", "rule": "Bash(rm -rf *)"})
    assert isinstance(rc, p.Ack) or (isinstance(rc, p.Error) and rc.code == "refused")
    tc = admin.ask({"type": "trust_change", "action": "add", "path": "/tmp"})
    assert isinstance(tc, p.Ack) or (isinstance(tc, p.Error) and tc.code == "refused")
    pr = admin.ask({"type": "probe"})
    assert isinstance(pr, p.ProbeReply) and pr.probe.platform
    # a workspace of its own: planning walks it, and a shared host's /tmp can hold anything (10-20 s seen)
    plan = admin.ask({"type": "sandbox_plan", "command": "ls", "cwd": str(tmp_path), "ref": "pl"})
    assert isinstance(plan, p.SandboxPlanReply) and plan.ref == "pl"
    if not plan.allowed:
        assert plan.reason
    au = admin.ask({"type": "audit", "limit": 5})
    assert isinstance(au, p.AuditReply)


def test_sighup_reloads_and_keeps_serving(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    daemon.proc.send_signal(signal.SIGHUP)
    notice = ui.recv()
    assert isinstance(notice, p.PolicyNotice)
    assert isinstance(status(ui), p.StatusReply)


def test_audit_filters_and_survives_a_torn_line(daemon, raw_factory):
    agent = raw_factory(daemon.socket)
    agent.ask(request(CALL_READ, ref="a"))
    agent.ask(request(ref="b"))
    daemon.stop()
    with open(daemon.state_dir / "audit.jsonl", "ab") as f:
        f.write(b'{"time": 1, "id": "torn')  # as if a crash cut the last write
    daemon.start()
    agent = raw_factory(daemon.socket)
    agent.ask(request(CALL_READ, ref="c"))
    admin = raw_factory(daemon.socket, role="admin")
    reads = admin.ask({"type": "audit", "tool": "Read"}).records
    denies = admin.ask({"type": "audit", "decision": "deny"}).records
    assert [r.tool for r in reads] == ["Read", "Read"]
    # the torn line is sealed at start by a record of its own (issue 34)
    assert [(r.tool, r.event) for r in denies] == [("Bash", "decision"), ("nexusd.audit", "audit_sealed")]
    (last,) = admin.ask({"type": "audit", "limit": 1}).records
    assert last.tool == "Read" and last.summary == "/tmp/x"


# ---------------------------------------------------------------- shutdown


def test_sigterm_denies_pending_says_bye_and_exits_zero(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    pend = agent.ask(request())
    assert isinstance(pend, p.Pending)
    ui.recv()
    assert daemon.stop(signal.SIGTERM) == 0
    d = agent.recv()
    assert isinstance(d, p.Decision) and d.decision == "deny" and d.reason == "daemon stopping"
    assert isinstance(agent.recv(), p.Bye)
    assert isinstance(ui.recv(), p.Resolved)
    assert isinstance(ui.recv(), p.Bye)
    assert not daemon.socket.exists()
    records = [json.loads(line) for line in (daemon.state_dir / "audit.jsonl").read_text().splitlines()]
    assert any(r["id"] == pend.id and r["decision"] == "deny" for r in records)


def test_sigint_also_stops_cleanly(daemon):
    assert daemon.stop(signal.SIGINT) == 0
    assert not daemon.socket.exists()


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def test_a_signal_during_start_up_is_kept_for_the_signal_loop(daemon_factory):
    """The socket accepts before the modules load and the loop runs. A stop signal anywhere in that window
    stops the daemon cleanly (exit 0, socket removed), and a SIGHUP there does not kill it. Before, SIGTERM
    and SIGHUP killed it outright and a SIGINT could end it "killed by SIGINT" or leave it running. Each
    daemon is signalled at its own delay after its socket first accepts, spread over the start-up."""
    cases = [(sig, d) for sig in (signal.SIGINT, signal.SIGTERM) for d in (0.0, 0.05, 0.1, 0.3)]
    cases += [(signal.SIGHUP, d) for d in (0.0, 0.1)]
    handles = [daemon_factory(autostart=False) for _ in cases]
    for h in handles:  # all at once: the machine's two cores make each start-up longer, the window wider
        h.spawn()
    accepted: dict[int, float] = {}
    signalled: set[int] = set()
    deadline = time.monotonic() + 60
    while len(signalled) < len(cases):
        assert time.monotonic() < deadline, f"sockets accepted: {len(accepted)} of {len(cases)} within 60 s"
        now = time.monotonic()
        for i, ((sig, delay), h) in enumerate(zip(cases, handles, strict=True)):
            if i not in accepted and _accepts(h.socket):
                accepted[i] = now
            if i in accepted and i not in signalled and now >= accepted[i] + delay:
                assert h.proc is not None
                h.proc.send_signal(sig)
                signalled.add(i)
        time.sleep(0.002)
    for (sig, delay), h in zip(cases, handles, strict=True):
        assert h.proc is not None
        if sig == signal.SIGHUP:
            until = time.monotonic() + 30
            while "listening" not in h.log.read_text() and h.proc.poll() is None and time.monotonic() < until:
                time.sleep(0.01)
            assert h.proc.poll() is None, f"SIGHUP {delay}s into start-up ended the daemon:\n{h.log.read_text()}"
            assert h.stop(signal.SIGTERM) == 0
        else:
            try:  # (not h.stop: a second signal while it stops is a person's "now", not this test's case)
                rc = h.proc.wait(30)
            except subprocess.TimeoutExpired:
                rc = h.stop(sig)  # SIGABRT after it: every thread's stack in the message below
            assert rc == 0, f"{sig.name} {delay}s into start-up: exit {rc}\n{h.log.read_text()}"
        assert not h.socket.exists(), f"{sig.name} {delay}s into start-up left the socket file"


# ---------------------------------------------------------------- fuzzing the live daemon


def test_arbitrary_bytes_never_take_the_daemon_down_or_allow(daemon):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.conftest import examples
    from tests.daemon.conftest import Raw

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=300))
    def feed(data: bytes) -> None:
        r = Raw(daemon.socket)
        try:
            r.hello()
            r.send_bytes(data + b"\n" + b'{"type":"status","ref":"fz"}\n')
            while True:
                try:
                    m = r.recv()
                except (EOFError, ConnectionResetError):
                    return  # closed after a framing error: fine
                assert not (isinstance(m, p.Decision) and m.decision == "allow")
                if isinstance(m, p.StatusReply) and m.ref == "fz":
                    return
        finally:
            r.close()

    feed()
    admin = Raw(daemon.socket)
    admin.hello("admin")
    st_ = admin.ask({"type": "status"})
    assert isinstance(st_, p.StatusReply)
    assert not any(k.startswith("allow/") for k in st_.counters)


# ---------------------------------------------------------------- per-provider prompt timeout


def test_provider_prompt_timeout_sets_the_deadline_of_that_providers_requests(daemon_factory, raw_factory):
    """``[providers.claude] prompt_timeout = 1`` wins over --pending-timeout 60 for claude only."""
    d = daemon_factory(policy="[permissions]\n\n[providers.claude]\nprompt_timeout = 1\n", pending_timeout=60)
    ui = raw_factory(d.socket, role="ui")
    ui.ask({"type": "subscribe"})
    gemini = raw_factory(d.socket)
    slow = gemini.ask(request({**CALL_BASH, "provider": "gemini", "tool": "run_shell_command"}, ref="g"))
    assert isinstance(slow, p.Pending) and slow.deadline > time.time() + 30  # the daemon's default
    claude = raw_factory(d.socket)
    sent = time.time()
    pend = claude.ask(request())
    assert isinstance(pend, p.Pending) and sent + 0.5 < pend.deadline < sent + 5
    dec = claude.recv()
    assert isinstance(dec, p.Decision) and (dec.decision, dec.source, dec.id) == ("deny", "timeout", pend.id)
    st = status(raw_factory(d.socket, role="admin"))
    assert st.pending == 1  # gemini's request is still waiting


def test_self_approval_sees_through_the_shell_that_ran_the_hook(daemon, raw_factory):
    """A fake agent runs its hook as ``sh -c '<requester>'`` (the shell stays in between), then a second,
    separate child answers: it descends from the agent but not from that shell, and is refused. An
    unrelated process may answer."""
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    req_script = textwrap.dedent(
        """
        import os, time
        from nexusd.client import Client
        from nexusd import protocol as p
        parent = open(f"/proc/{os.getppid()}/comm").read().strip()
        with Client(role="agent", name="hook") as c:
            m = c.request(p.CallInfo(provider="claude", session="s", tool="Bash",
                          input={"command": "rm -rf build"}, cwd="/tmp", agent_pid=os.getppid()), timeout=20,
                          on_pending=lambda pending: print(pending.id, parent, flush=True))
            print(m.decision, m.source, flush=True)
        """
    )
    ans_script = textwrap.dedent(
        """
        import sys
        from nexusd.client import Client, ClientError
        with Client(role="ui", name="nexusctl") as c:
            try:
                c.answer(sys.argv[1], "allow")
                print("accepted")
            except ClientError as e:
                print(e.code)
        """
    )
    agent_script = textwrap.dedent(
        """
        import os, subprocess, sys
        env = dict(os.environ, PY=sys.executable, REQ=REQ)
        # "; exit $?" keeps the shell alive as the hook's parent (no exec of the last command)
        req = subprocess.Popen(["/bin/sh", "-c", '"$PY" -c "$REQ"; exit $?'], env=env,
                               stdout=subprocess.PIPE, text=True)
        rid, parent = req.stdout.readline().split()
        ans = subprocess.run([sys.executable, "-c", ANS, rid], capture_output=True, text=True)
        print("ANSWER", parent, ans.stdout.strip(), rid, flush=True)
        print("DECISION", req.stdout.readline().strip(), flush=True)
        req.wait()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", f"REQ={req_script!r}\nANS={ans_script!r}\n{agent_script}"],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt)
    _, shell, verdict, rid = proc.stdout.readline().split()
    assert shell in ("sh", "dash", "bash", "busybox"), shell  # the hook's parent really is the shell
    assert verdict == "self_approval" and rid == prompt.item.id
    outsider = subprocess.run(
        [sys.executable, "-c", ans_script, rid], env=daemon.env, capture_output=True, text=True, timeout=20
    )
    assert outsider.stdout.strip() == "accepted", outsider
    assert proc.stdout.readline().split() == ["DECISION", "allow", "user"]
    proc.wait(10)


def test_a_client_that_never_reads_its_replies_is_not_read_either(daemon, raw_factory):
    """Backpressure: the daemon stops reading from a client whose replies pile up unread, so the client's
    own send blocks; it is neither buffered without bound nor dropped, and others are served meanwhile."""
    import socket as socket_mod

    flood = raw_factory(daemon.socket, role="admin")
    flood.sock.settimeout(2.0)
    chunk = b'{"type":"status"}\n' * 4096  # 72 KiB of queries, each answered by a far longer reply
    sent = 0
    with pytest.raises(socket_mod.timeout):
        while sent < (64 << 20):
            flood.sock.sendall(chunk)
            sent += len(chunk)
    assert sent < (8 << 20)  # stalled after kernel buffers and the daemon's 64 KiB high-water mark
    assert isinstance(status(raw_factory(daemon.socket, role="admin")), p.StatusReply)
    flood.sock.settimeout(10.0)
    assert isinstance(flood.recv(), p.StatusReply)  # still connected: its replies are all there to read


# ---------------------------------------------------------------- decision memo over the wire

MEMO_POLICY = '[permissions]\nallow = ["Bash(cat *)"]\ndeny = ["Read(//etc/hostname)"]\n'


def _cat_link(ws: Path) -> dict:
    return {
        "provider": "claude",
        "session": "memo",
        "tool": "Bash",
        "input": {"command": "cat link.txt"},
        "cwd": str(ws),
    }


def _three_allowed_cats(d, raw_factory, ws: Path):
    """A repository whose link.txt points inside it; the same allowed call three times."""
    (ws / ".git").mkdir(parents=True)
    (ws / "a.txt").write_text("a")
    os.symlink(ws / "a.txt", ws / "link.txt")
    agent = raw_factory(d.socket)
    for i in range(3):
        assert agent.ask(request(_cat_link(ws), ref=f"a{i}")).decision == "allow"
    return agent


def test_memo_hits_repeats_and_sees_a_swapped_symlink(daemon_factory, raw_factory, tmp_path):
    ws = tmp_path / "ws"
    agent = _three_allowed_cats(daemon_factory(policy=MEMO_POLICY), raw_factory, ws)
    (ws / "link.txt").unlink()
    os.symlink("/etc/hostname", ws / "link.txt")
    res = agent.ask(request(_cat_link(ws), ref="b"))
    assert res.decision == "deny" and res.rule == "Read(//etc/hostname)", res
    st = status(agent)
    assert (st.counters.get("memo/hit"), st.counters.get("memo/stale")) == (2, 1), st.counters


def test_memo_can_be_turned_off(daemon_factory, raw_factory, tmp_path):
    d = daemon_factory(policy=MEMO_POLICY, args=("--decision-memo", "0"))
    agent = _three_allowed_cats(d, raw_factory, tmp_path / "ws")
    assert not any(k.startswith("memo/") for k in status(agent).counters)
