"""Grants over the wire: timed grants that expire exactly, session and learned grants, listing, revocation that
holds for the very next call (the decision memo included), persistence across restarts, malformed messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle

CMD = "make build"
RULE = "Bash(make build)"


def call(cmd: str = CMD, session: str = "s1") -> dict[str, Any]:
    return {"provider": "claude", "session": session, "tool": "Bash", "input": {"command": cmd}, "cwd": "/tmp"}


def req(cmd: str = CMD, session: str = "s1", ref: str = "r") -> dict[str, Any]:
    return {"type": "request", "call": call(cmd, session), "ref": ref}


def decide_alone(h: DaemonHandle, raw_factory, cmd: str = CMD, session: str = "s1") -> p.Decision:
    """A request with no UI connected: only a rule, a mode or a grant can allow it."""
    agent = raw_factory(h.socket)
    d = agent.ask(req(cmd, session))
    assert isinstance(d, p.Decision), d
    agent.close()
    return d


def grant(
    h: DaemonHandle, raw_factory, answer: dict[str, Any], cmd: str = CMD, session: str = "s1", name: str = "grant-ui"
) -> p.ServerMessage:
    """Ask, and answer from a UI with ``answer``; returns the UI's reply to the answer (Ack or Error)."""
    ui = raw_factory(h.socket, role="ui", name=name)
    assert isinstance(ui.ask({"type": "subscribe"}), p.Snapshot)
    agent = raw_factory(h.socket)
    pend = agent.ask(req(cmd, session))
    assert isinstance(pend, p.Pending), pend
    assert isinstance(ui.recv(), p.Prompt)
    ui.send({"type": "answer", "id": pend.id, **answer})
    reply = ui.recv()
    if isinstance(reply, p.Resolved):
        reply = ui.recv()
        assert agent.recv().decision == answer["decision"]
    else:  # refused: the request is still pending; deny it so the agent is released
        ui.send({"type": "answer", "id": pend.id, "decision": "deny"})
    ui.close()
    agent.close()
    return reply


def grants(h: DaemonHandle, raw_factory) -> list[p.GrantInfo]:
    ui = raw_factory(h.socket, role="ui")
    r = ui.ask({"type": "grants", "ref": "g"})
    ui.close()
    assert isinstance(r, p.GrantsReply) and r.ref == "g", r
    return r.grants


def revoke(h: DaemonHandle, raw_factory, gid: Any) -> p.ServerMessage:
    ui = raw_factory(h.socket, role="ui")
    r = ui.ask({"type": "revoke_grant", "id": gid, "ref": "v"})
    ui.close()
    return r


def ctl(h: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_timed_grant_allows_until_its_expiry_and_not_an_instant_longer(daemon, raw_factory) -> None:
    assert decide_alone(daemon, raw_factory).decision == "deny"  # asks; nobody there
    # A loaded machine can take longer than a short grant lasts between giving it and the calls under it:
    # such a round proves nothing (the grant had expired), and runs again with a longer grant. A deny while
    # the grant still held ends the loop and fails below.
    for duration in (2.0, 8.0, 30.0):
        given = time.time()
        answer = {"decision": "allow", "scope": "timed", "duration": duration, "rules": [RULE]}
        reply = grant(daemon, raw_factory, answer)
        assert isinstance(reply, p.Ack), reply
        d = decide_alone(daemon, raw_factory)
        other = decide_alone(daemon, raw_factory, session="another")
        listed = grants(daemon, raw_factory)
        if (d.decision == "allow" and other.decision == "allow" and listed) or time.time() - given < duration:
            break
    assert (d.decision, d.source, d.rule) == ("allow", "rule", RULE)
    assert other.decision == "allow"  # every session
    (g,) = listed
    assert g.scope == "timed" and g.rule == RULE and g.kind == "allow" and g.uses == 2
    assert g.ui == "grant-ui" and "grant-ui" in (g.given_by or "") and g.given_at is not None
    assert g.expires is not None and abs(g.expires - g.given_at - duration) < 1e-6
    assert d.rule_origin == f"grant:{g.id}"
    while time.time() < g.expires:
        time.sleep(0.05)
    d = decide_alone(daemon, raw_factory)
    assert d.decision == "deny" and d.source != "rule"  # the first call after the expiry asks again
    assert grants(daemon, raw_factory) == []  # and the timer has dropped it (no call needed)
    saved = json.loads((daemon.state_dir / "grants.json").read_text())
    assert saved["grants"] == []


def test_the_timer_drops_an_expired_grant_without_any_call(daemon, raw_factory) -> None:
    assert isinstance(
        grant(daemon, raw_factory, {"decision": "allow", "scope": "timed", "duration": 0.5, "rules": [RULE]}), p.Ack
    )
    assert json.loads((daemon.state_dir / "grants.json").read_text())["grants"]
    deadline = time.monotonic() + 10
    while json.loads((daemon.state_dir / "grants.json").read_text())["grants"]:
        assert time.monotonic() < deadline, "the expired grant was never dropped"
        time.sleep(0.05)
    while "grant expired" not in daemon.log.read_text():  # logged just after the file is rewritten
        assert time.monotonic() < deadline, "the expiry was never logged"
        time.sleep(0.05)


def test_a_timed_deny(daemon, raw_factory) -> None:
    assert isinstance(
        grant(daemon, raw_factory, {"decision": "deny", "scope": "timed", "duration": 600, "rules": ["Bash(make *)"]}),
        p.Ack,
    )
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})  # a person is there, but the grant decides first
    d = decide_alone(daemon, raw_factory, "make clean")
    assert (d.decision, d.source, d.rule) == ("deny", "rule", "Bash(make *)")


@pytest.mark.parametrize("scope", ["timed", "session", "always"])
def test_revocation_holds_for_the_next_call_even_from_the_memo(daemon, raw_factory, scope: str) -> None:
    answer: dict[str, Any] = {"decision": "allow", "scope": scope, "rules": [RULE]}
    if scope == "timed":
        answer["duration"] = 3600
    reply = grant(daemon, raw_factory, answer)
    assert isinstance(reply, p.Ack), reply
    for _ in range(3):  # the second and third come from the verified decision memo
        assert decide_alone(daemon, raw_factory).decision == "allow"
    ui = raw_factory(daemon.socket, role="ui")
    st = ui.ask({"type": "status"})
    assert isinstance(st, p.StatusReply) and st.counters.get("memo/hit", 0) >= 1
    (g,) = [x for x in grants(daemon, raw_factory) if x.rule == RULE]
    assert g.scope == ("learned" if scope == "always" else scope) and g.uses >= 3
    if scope == "always":
        assert g.origin and "learned.toml" in g.origin and g.given_by and "grant-ui" in g.given_by
    ack = revoke(daemon, raw_factory, g.id)
    assert isinstance(ack, p.Ack) and ack.ref == "v" and g.id in (ack.detail or ""), ack
    d = decide_alone(daemon, raw_factory)
    assert d.decision == "deny" and d.source != "rule", d
    assert [x for x in grants(daemon, raw_factory) if x.rule == RULE] == []
    r = revoke(daemon, raw_factory, g.id)  # twice: gone
    assert isinstance(r, p.Error) and r.code == "not_found"


def test_timed_grants_survive_a_restart_with_their_expiry(daemon_factory, raw_factory) -> None:
    h = daemon_factory()
    assert isinstance(
        grant(h, raw_factory, {"decision": "allow", "scope": "timed", "duration": 3600, "rules": [RULE]}), p.Ack
    )
    assert isinstance(
        grant(
            h,
            raw_factory,
            {"decision": "allow", "scope": "timed", "duration": 1.0, "rules": ["Bash(make test)"]},
            cmd="make test",
        ),
        p.Ack,
    )
    assert isinstance(
        grant(h, raw_factory, {"decision": "allow", "scope": "session", "rules": ["Bash(make lint)"]}, cmd="make lint"),
        p.Ack,
    )
    before = {g.rule: g for g in grants(h, raw_factory)}
    assert set(before) == {RULE, "Bash(make test)", "Bash(make lint)"}
    f = h.state_dir / "grants.json"
    assert f.stat().st_mode & 0o777 == 0o600
    h.stop()
    time.sleep(1.1)  # the short one expires while the daemon is down
    h.start()
    after = {g.rule: g for g in grants(h, raw_factory)}
    assert set(after) == {RULE}  # the session grant ended with the daemon's sessions; the short one expired
    assert after[RULE].id == before[RULE].id and after[RULE].expires == before[RULE].expires
    assert decide_alone(h, raw_factory).decision == "allow"


def test_a_broken_grants_file_applies_no_grant_and_is_not_rewritten(daemon_factory, raw_factory) -> None:
    h = daemon_factory(autostart=False)
    h.state_dir.mkdir(parents=True, exist_ok=True)
    f = h.state_dir / "grants.json"
    f.write_text(
        '{"grants": [{"id": "g-1", "kind": "allow", "rule": "Bash(make build)", "scope": "timed", '
        '"expires": 1e12}], "version": 1, "extra": true}'
    )
    h.start()
    assert decide_alone(h, raw_factory).decision == "deny"
    assert "not a grants file" in h.log.read_text()
    assert "extra" in f.read_text()


@pytest.mark.parametrize("rules", [["Bash(*)"], ["Bash"], ["Trust(/tmp)"]])
def test_a_timed_grant_is_checked_like_always(daemon, raw_factory, rules: list[str]) -> None:
    reply = grant(daemon, raw_factory, {"decision": "allow", "scope": "timed", "duration": 60, "rules": rules})
    assert isinstance(reply, p.Error) and reply.code == "refused", reply
    assert grants(daemon, raw_factory) == []


def test_a_timed_grant_of_what_always_needs_a_person_is_refused(daemon, raw_factory) -> None:
    reply = grant(
        daemon,
        raw_factory,
        {"decision": "allow", "scope": "timed", "duration": 60, "rules": ["Bash(rm -rf /)"]},
        cmd="rm -rf /",
    )
    assert isinstance(reply, p.Error) and reply.code == "refused", reply


@pytest.mark.parametrize(
    "answer",
    [
        {"decision": "allow", "scope": "timed"},  # no duration
        {"decision": "allow", "scope": "once", "duration": 5},
        {"decision": "allow", "scope": "session", "duration": 5},
        {"decision": "allow", "scope": "timed", "duration": 0},
        {"decision": "allow", "scope": "timed", "duration": -3},
        {"decision": "allow", "scope": "timed", "duration": 31 * 86400},
        {"decision": "allow", "scope": "timed", "duration": float("inf")},
    ],
)
def test_malformed_timed_answers_are_refused_and_the_request_stays_pending(daemon, raw_factory, answer) -> None:
    reply = grant(daemon, raw_factory, {**answer, "rules": [RULE]})
    assert isinstance(reply, p.Error) and reply.code == "invalid_message", reply
    assert grants(daemon, raw_factory) == []


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"revoke_grant","ref":"x"}',
        b'{"type":"revoke_grant","id":5,"ref":"x"}',
        b'{"type":"revoke_grant","id":null,"ref":"x"}',
        b'{"type":"revoke_grant","id":"g-1","extra":1,"ref":"x"}',
        b'{"type":"grants","all":true,"ref":"x"}',
        b'{"type":"answer","id":"00","decision":"allow","scope":"timed","duration":"1h","ref":"x"}',
        b'{"type":"answer","id":"00","decision":"allow","scope":"for","ref":"x"}',
    ],
)
def test_malformed_grant_messages(daemon, raw_factory, line: bytes) -> None:
    ui = raw_factory(daemon.socket, role="ui")
    ui.send_bytes(line + b"\n")
    r = ui.recv()
    assert isinstance(r, p.Error) and r.code == "invalid_message" and r.ref == "x", r
    assert isinstance(ui.ask({"type": "status"}), p.StatusReply)  # the connection and the daemon go on


@pytest.mark.parametrize("gid", ["", "g-nope", "l-000000000000", "x" * 10_000, "../grants.json"])
def test_revoking_an_unknown_grant(daemon, raw_factory, gid: str) -> None:
    r = revoke(daemon, raw_factory, gid)
    assert isinstance(r, p.Error) and r.code == "not_found"


@pytest.mark.parametrize("msg", [{"type": "grants"}, {"type": "revoke_grant", "id": "g-1"}])
def test_agents_may_not_list_or_revoke(daemon, raw_factory, msg) -> None:
    agent = raw_factory(daemon.socket)
    r = agent.ask(msg)
    assert isinstance(r, p.Error) and r.code == "wrong_role"


def test_learned_rules_added_by_hand_are_grants_too(daemon_factory, raw_factory) -> None:
    h = daemon_factory(autostart=False)
    h.state_dir.mkdir(parents=True, exist_ok=True)
    (h.state_dir / "learned.toml").write_text('[permissions]\nallow = ["Bash(make build)"]\n')
    h.start()
    (g,) = grants(h, raw_factory)
    assert g.scope == "learned" and g.given_by is None and g.id.startswith("l-")
    assert decide_alone(h, raw_factory).decision == "allow"
    assert isinstance(revoke(h, raw_factory, g.id), p.Ack)
    assert decide_alone(h, raw_factory).decision == "deny"
    assert "make build" not in (h.state_dir / "learned.toml").read_text()


def test_nexusctl_answer_for_grants_and_revoke(daemon, raw_factory) -> None:
    agent = raw_factory(daemon.socket)
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    pend = agent.ask(req())
    assert isinstance(pend, p.Pending)
    r = ctl(daemon, "answer", pend.id, "allow", "--for", "15m", "--rule", RULE)
    assert r.returncode == 0, r.stderr
    assert agent.recv().decision == "allow"
    r = ctl(daemon, "grants", "--json")
    assert r.returncode == 0, r.stderr
    (g,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert g["rule"] == RULE and g["scope"] == "timed" and 899 < g["expires"] - g["given_at"] <= 900
    r = ctl(daemon, "grants")
    assert r.returncode == 0 and g["id"] in r.stdout and "timed" in r.stdout and "left" in r.stdout
    r = ctl(daemon, "grants", "revoke", g["id"])
    assert r.returncode == 0 and "revoked" in r.stdout
    assert ctl(daemon, "grants").stdout.strip() == "no grants"
    r = ctl(daemon, "grants", "revoke", g["id"])
    assert r.returncode == 7
    r = ctl(daemon, "answer", "0" * 32, "allow", "--for", "forever")
    assert r.returncode == 2 and "not a duration" in r.stderr
    r = ctl(daemon, "answer", "0" * 32, "allow", "--for", "1h", "--session")
    assert r.returncode == 2
    assert os.path.exists(daemon.state_dir / "grants.json")


def test_session_end_ends_its_allow_grants_only(daemon, raw_factory) -> None:
    assert isinstance(grant(daemon, raw_factory, {"decision": "allow", "scope": "session", "rules": [RULE]}), p.Ack)
    assert isinstance(
        grant(
            daemon, raw_factory, {"decision": "deny", "scope": "session", "rules": ["Bash(make lint)"]}, cmd="make lint"
        ),
        p.Ack,
    )
    assert isinstance(
        grant(daemon, raw_factory, {"decision": "allow", "scope": "session", "rules": [RULE]}, session="other"), p.Ack
    )
    ui = raw_factory(daemon.socket, role="ui")
    assert isinstance(ui.ask({"type": "set_mode", "session": "s1", "mode": "plan"}), p.Ack)
    assert decide_alone(daemon, raw_factory).decision == "allow"
    agent = raw_factory(daemon.socket)  # the agent's adapter says its session ended
    ack = agent.ask({"type": "session_end", "session": "s1", "ref": "e"})
    assert isinstance(ack, p.Ack) and ack.ref == "e"
    left = {(g.session, g.kind, g.rule) for g in grants(daemon, raw_factory)}
    assert left == {("s1", "deny", "Bash(make lint)"), ("other", "allow", RULE)}  # never widening
    assert decide_alone(daemon, raw_factory).decision == "deny"
    assert decide_alone(daemon, raw_factory, session="other").decision == "allow"
    st = ui.ask({"type": "status"})
    assert isinstance(st, p.StatusReply) and st.sessions["s1"] == "plan"  # a person's override stays


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"session_end","ref":"x"}',
        b'{"type":"session_end","session":1,"ref":"x"}',
        b'{"type":"session_end","session":"s","mode":"bypass","ref":"x"}',
    ],
)
def test_malformed_session_end(daemon, raw_factory, line: bytes) -> None:
    agent = raw_factory(daemon.socket)
    agent.send_bytes(line + b"\n")
    r = agent.recv()
    assert isinstance(r, p.Error) and r.code == "invalid_message" and r.ref == "x"
