"""The wire contract: every message round-trips, and no byte string makes the decoder do anything but refuse."""

from __future__ import annotations

import typing

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from nexusd import protocol as p
from tests.conftest import examples

CALL = p.CallInfo(provider="claude", session="s", tool="Bash", input={"command": "ls"}, cwd="/")
VERDICT = p.Verdict("ask", "needs a person", "mode", trace=[p.TraceStep("escalation", "ask")])
ITEM = p.PendingItem(id="a" * 32, call=CALL, verdict=VERDICT, created=1.0, deadline=31.0)

CLIENT_MESSAGES = [
    p.Hello(proto=1, role="agent", name="x"),
    p.Request(call=CALL, on_no_ui="ask", ref="1"),
    p.Part(upload="h7", text="a piece of a large content"),
    p.Cancel(id="a" * 32),
    p.Subscribe(),
    p.Answer(id="a" * 32, decision="allow", scope="session", message="m", rules=["Bash(ls)"]),
    p.Status(),
    p.Check(call=CALL),
    p.SetMode(session="s", mode=None),
    p.Reload(),
    p.Rules(),
    p.RuleChange(action="add", kind="deny", rule="Bash(rm *)"),
    p.TrustChange(action="remove", path="/w"),
    p.Probe(refresh=True),
    p.SandboxPlan(command="ls", cwd="/"),
    p.SandboxReport(command="touch x", cwd="/w", violations=["v"], session="s", exit_code=1),
    p.Audit(limit=5, decision="deny"),
    p.Ping(ref="k"),
    p.Grants(),
    p.RevokeGrant(id="g-1"),
    p.SessionEnd(session="s"),
    p.History(session="s", id=3, diff=True, paths=["/w/a"]),
    p.Rewind(id=3, dry_run=True, force=False, paths=["/w/a"]),
    p.Answer(id="a" * 32, decision="allow", scope="timed", duration=900.0, rules=["Bash(ls)"]),
    p.Hold(id="a" * 32, seconds=60.0),
    p.RuleCheck(kind="allow", rules=["Bash(rm *)"]),
]
SERVER_MESSAGES = [
    p.Welcome(proto=1, version="0", role="ui", idle_timeout=600.0),
    p.Pending(id="a", deadline=1.0),
    p.Decision(decision="deny", reason="r", source="timeout", updated_input={"command": "x"}),
    p.Snapshot(items=[ITEM]),
    p.Prompt(item=ITEM),
    p.Resolved(id="a", decision="allow", source="user", scope="once"),
    p.Ack(detail="ok"),
    p.Error(code="policy_error", message="m"),
    p.StatusReply(version="0", pid=1, uptime=0, connections={}, pending=0, counters={}, policy=[], policy_errors=[]),
    p.CheckResult(verdict=VERDICT),
    p.RulesReply(rules=[p.RuleInfo("allow", "Read", "user", "x:1")]),
    p.ProbeReply(probe=p.SandboxProbe(platform="linux", available=False)),
    p.SandboxPlanReply(allowed=True, argv=["bwrap"]),
    p.AuditReply(records=[]),
    p.GrantsReply(
        grants=[
            p.GrantInfo(
                id="g-1",
                kind="allow",
                rule="Bash(ls)",
                scope="timed",
                given_by="tui (pid 1)",
                ui="tui",
                given_at=1.0,
                expires=901.0,
                uses=3,
            )
        ]
    ),
    p.PolicyNotice(ok=False, errors=["e"]),
    p.SandboxNotice(command="touch x", cwd="/w", violations=["write refused (read-only): x"], session="s", time=1.0),
    p.Bye(reason="stop"),
    p.Pong(ref="k"),
    p.HistoryReply(
        entries=[
            p.HistoryEntry(
                id=3, time=1.0, workspace="/w", tree="ab" * 20, files=[p.FileChange("a", "M", 1, 2)], changed=1
            )
        ],
        diff="--- a/a\n+++ b/a\n",
    ),
    p.RewindReply(ok=True, detail="rewound", changes=[["restore", "a"]], rescue=4),
    p.Held(id="a", deadline=2.0, limit=3.0, by="tui (pid 1)"),
    p.RuleCheckReply(results=[p.RuleVerdict(rule="Bash(rm *)", status="confirm", reason="r")]),
]


# The wire's tags as deployed hooks and UIs speak them: a class rename must not change one silently.
WIRE_TAGS = {
    "part",
    "hold",
    "held",
    "rule_check",
    "rule_check_reply",
    "answer",
    "history",
    "history_reply",
    "rewind",
    "rewind_reply",
    "audit",
    "cancel",
    "check",
    "grants",
    "hello",
    "ping",
    "probe",
    "reload",
    "request",
    "revoke_grant",
    "rule_change",
    "rules",
    "sandbox_plan",
    "sandbox_report",
    "session_end",
    "set_mode",
    "status",
    "subscribe",
    "trust_change",
    "ack",
    "audit_reply",
    "bye",
    "check_result",
    "decision",
    "error",
    "grants_reply",
    "pending",
    "policy_notice",
    "pong",
    "probe_reply",
    "prompt",
    "resolved",
    "rules_reply",
    "sandbox_notice",
    "sandbox_plan_reply",
    "snapshot",
    "status_reply",
    "welcome",
}


def _snake(name: str) -> str:
    out = ""
    for i, ch in enumerate(name):
        out += ("_" if i and ch.isupper() else "") + ch.lower()
    return out


def test_every_wire_tag_is_the_snake_case_of_its_class_name():
    """Names said once: the tag is derived from the class name by one rule, for every message type."""
    classes = [*typing.get_args(p.ClientMessage), *typing.get_args(p.ServerMessage)]
    for cls in classes:
        assert cls.__struct_config__.tag == _snake(cls.__name__) == p.wire_tag(cls.__name__), cls
        assert msgspec.json.decode(p.encode(_minimal(cls)))["type"] == _snake(cls.__name__)
    assert {cls.__struct_config__.tag for cls in classes} == WIRE_TAGS
    assert len(classes) == len(WIRE_TAGS)  # no tag is shared


def _minimal(cls: type) -> msgspec.Struct:
    """One instance of ``cls`` from the fixtures above."""
    return next(m for m in (*CLIENT_MESSAGES, *SERVER_MESSAGES) if type(m) is cls)


def test_every_client_message_round_trips_as_one_line():
    assert {type(m) for m in CLIENT_MESSAGES} == set(p.ClientMessage.__args__)
    for m in CLIENT_MESSAGES:
        line = p.encode(m)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert p.decode_client(line[:-1]) == m


def test_every_server_message_round_trips():
    assert {type(m) for m in SERVER_MESSAGES} == set(p.ServerMessage.__args__)
    for m in SERVER_MESSAGES:
        assert p.decode_server(p.encode(m)) == m


def test_defaults_are_omitted_and_unknown_fields_refused():
    assert p.encode(p.Status()) == b'{"type":"status"}\n'
    try:
        p.decode_client(b'{"type":"status","extra":1}')
    except msgspec.ValidationError:
        pass
    else:
        raise AssertionError("unknown field accepted")


REFUSALS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)


@settings(max_examples=examples(2000), deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_are_decoded_or_refused_never_anything_else(data):
    for decode in (p.decode_client, p.decode_server):
        try:
            msg = decode(data)
        except REFUSALS:
            continue
        assert isinstance(msg, msgspec.Struct)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(1000), deadline=None)
@given(
    st.sampled_from([m.__struct_config__.tag for m in CLIENT_MESSAGES] + ["nope", ""]),
    st.dictionaries(st.sampled_from(["id", "call", "decision", "scope", "ref", "proto", "role", "x"]), json_values),
)
def test_near_miss_messages_are_refused_cleanly(tag, fields):
    data = msgspec.json.encode({"type": tag, **fields})
    try:
        msg = p.decode_client(data)
    except REFUSALS:
        return
    assert msg.__struct_config__.tag == tag


def test_status_reply_keeps_decisions_apart_from_memo_and_gate_timing() -> None:
    st = p.StatusReply(
        version="x",
        pid=1,
        uptime=1.0,
        connections={},
        pending=0,
        counters={"allow/rule": 4, "deny/mode": 1, "memo/hit": 3, "gate/calls": 5, "gate/ns": 250_000},
        policy=[],
        policy_errors=[],
    )
    assert st.decisions() == {"allow/rule": 4, "deny/mode": 1}
    assert st.decision_time_us() == 50.0
    st.counters = {"allow/rule": 1}
    assert st.decision_time_us() is None
