"""The hook's msgspec-free wire agrees with nexusd.protocol: same version, same literals, same verdict on replies.

The hook must never import msgspec (see test_hook.test_hook_import_path_is_lean); this test may, and checks
the copy against the original: outgoing messages must decode with ``protocol.decode_client``, and the lean
Decision reader must accept exactly what ``protocol.decode_server`` accepts as a Decision.
"""

from __future__ import annotations

import itertools
import json
import typing
from typing import Any

import pytest
from nexus_clients import claude, gemini, wire_lean
from nexus_clients.wire_lean import BadReply, LeanDecision

from nexusd import linesocket, protocol
from nexusd.conversation import NEED_DATA, Conversation
from nexusd.protocol import CallInfo

CLAUDE_PRE = {
    "session_id": "s-1",
    "cwd": "/work/proj",
    "hook_event_name": "PreToolUse",
    "permission_mode": "acceptEdits",
    "tool_name": "Bash",
    "tool_input": {"command": "echo hi ☃", "nested": [1, 2.5, None, True, {"k": "v"}]},
    "tool_use_id": "toolu_01",
}
GEMINI = {
    "session_id": "g-1",
    "cwd": "/work/proj",
    "hook_event_name": "BeforeTool",
    "tool_name": "write_file",
    "tool_input": {"file_path": "a.txt", "content": "x"},
}


def test_literal_sets_and_version_match_the_protocol() -> None:
    assert wire_lean.PROTOCOL_VERSION == protocol.PROTOCOL_VERSION
    assert set(typing.get_args(protocol.DecisionKind)) == wire_lean.DECISION_KINDS
    assert set(typing.get_args(protocol.Source)) == wire_lean.SOURCES
    assert set(typing.get_args(protocol.Role)) == wire_lean.ROLES
    assert set(typing.get_args(protocol.NoUi)) == wire_lean.NO_UI
    assert linesocket.MAX_REPLY_BYTES >= protocol.MAX_LINE_BYTES


def test_decision_fields_match_the_protocol() -> None:
    assert {f for f in protocol.Decision.__struct_fields__} | {"type"} == wire_lean._DECISION_FIELDS
    assert set(protocol.Welcome.__struct_fields__) | {"type"} == {
        "type", "proto", "version", "role", "sandbox", "idle_timeout", "ref"
    }  # fmt: skip
    assert set(protocol.Pending.__struct_fields__) == {"id", "deadline", "ref"}
    # omitted_bytes is the conversation's to set (a string too large to send), not the adapters'
    optional = set(protocol.CallInfo.__struct_fields__) - {
        "provider",
        "session",
        "tool",
        "input",
        "cwd",
        "omitted_bytes",
    }
    assert optional == set(wire_lean._CALL_OPTIONAL)


# --------------------------------------------------------------------------- outgoing


def _welcomed() -> Conversation:
    conv = Conversation(wire_lean.LeanCodec(), "agent", "nexus-hook claude", ref_prefix="h")
    hello = protocol.decode_client(conv.hello())
    assert hello == protocol.Hello(proto=protocol.PROTOCOL_VERSION, role="agent", name="nexus-hook claude", ref="h1")
    conv.receive_data(
        protocol.encode(protocol.Welcome(proto=protocol.PROTOCOL_VERSION, version="0", role="agent", ref="h1"))
    )
    assert conv.next_event() is not NEED_DATA
    return conv


@pytest.mark.parametrize("on_no_ui", ["deny", "ask"])
def test_outgoing_messages_decode_with_the_protocol(on_no_ui: str) -> None:
    conv = _welcomed()
    for mapper, payload in ((claude, CLAUDE_PRE), (gemini, GEMINI)):
        kwargs: dict[str, Any] = {"env": {"CLAUDE_PROJECT_DIR": "/work/proj"}, "agent_pid": 7, "fallback_cwd": "/x"}
        fields = mapper.call_fields_from_hook(payload, **kwargs)
        ref, line = conv.send_request(fields, on_no_ui)
        decoded = protocol.decode_client(line)
        assert isinstance(decoded, protocol.Request)
        # Same request as the msgspec path builds; the call is the same JSON msgspec would send.
        expected = protocol.Request(
            call=CallInfo(**mapper.call_fields_from_hook(payload, **kwargs)), on_no_ui=on_no_ui, ref=ref
        )
        assert decoded == expected
        assert json.loads(protocol.encode(decoded.call)) == fields
    ref, line = conv.send_call({"type": "session_end", "session": "s"})
    assert protocol.decode_client(line) == protocol.SessionEnd(session="s", ref=ref)


def test_optional_call_fields_are_omitted_like_msgspec() -> None:
    fields = wire_lean.call_fields(provider="p", session="s", tool="t", input={}, cwd="/")
    assert json.loads(protocol.encode(protocol.CallInfo(**fields))) == fields


def test_request_refuses_unknown_on_no_ui() -> None:
    with pytest.raises(ValueError):
        _welcomed().send_request({}, "allow")


def test_encode_refuses_non_json_numbers() -> None:
    with pytest.raises(ValueError):
        wire_lean.encode({"x": float("nan")})


# --------------------------------------------------------------------------- incoming: differential


def _valid_decisions() -> list[bytes]:
    """Every kind x source, plus every optional field present, absent and null."""
    out = []
    for kind, source in itertools.product(typing.get_args(protocol.DecisionKind), typing.get_args(protocol.Source)):
        out.append(protocol.encode(protocol.Decision(kind, "why", source, ref="r1")))
    full = protocol.Decision(
        "allow",
        "sandboxed",
        "rule",
        id="ab" * 16,
        rule="Bash(ls *)",
        rule_origin="/p:3",
        updated_input={"command": "bwrap -- ls", "deep": {"a": [1, None]}},
        message="ok from a person ☃",
        answered_by="tui (pid 1)",
        ref="r1",
    )
    out.append(protocol.encode(full))
    for key in ("id", "rule", "rule_origin", "updated_input", "message", "answered_by"):
        obj = json.loads(protocol.encode(full))
        obj[key] = None
        out.append(json.dumps(obj).encode())
    out.append(protocol.encode(protocol.Decision("deny", "", "error", updated_input={}, ref="r1")))
    out.append(protocol.encode(protocol.Decision("deny", "stopped", "user", abort=True, ref="r1")))
    return out


def _malformed_decisions() -> list[bytes]:
    base = {"type": "decision", "decision": "allow", "reason": "r", "source": "rule", "ref": "r1"}
    variants: list[Any] = []
    for key in ("decision", "reason", "source"):
        variants.append({k: v for k, v in base.items() if k != key})  # missing required
    bad_values: dict[str, list[Any]] = {
        "decision": ["ALLOW", "allow ", "permit", "", None, 1, True, ["allow"], {"allow": 1}],
        "reason": [None, 1, 1.5, False, [], {}],
        "source": ["person", "Rule", "", None, 0, ["rule"]],
        "updated_input": ["x", [], ["command"], 1, True, 0.5],
        "message": [1, [], {}, False],
        "id": [1, [], {}],
        "rule": [1, True],
        "rule_origin": [[], 2],
        "answered_by": [{}, 3],
        "abort": [1, 0, "true", None, [], {}],
        "ref": [1, []],
        "type": ["Decision", "pending", 1, None],
    }
    for key, values in bad_values.items():
        for value in values:
            variants.append({**base, key: value})
    variants.append({**base, "extra": 1})
    variants.append({**base, "scope": "always"})
    lines = [json.dumps(v).encode() for v in variants]
    lines += [
        b"",
        b"null",
        b"[]",
        b'"decision"',
        b"{",
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule","rule":NaN}',
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule","updated_input":{"x":Infinity}}',
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule","updated_input":{"x":1e400}}',
        b'{"type":"decision","decision":"allow","reason":"\\ud800","source":"rule"}',
        b'{"type":"decision","decision":"allow","reason":"\xff","source":"rule"}',
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule"} trailing',
    ]
    return lines


def _protocol_accepts(line: bytes) -> bool:
    try:
        return isinstance(protocol.decode_server(line), protocol.Decision)
    except Exception:
        return False


def _lean_accepts(line: bytes) -> LeanDecision | None:
    try:
        return wire_lean.check_decision(wire_lean.parse_line(line))
    except BadReply:
        return None


@pytest.mark.parametrize("line", _valid_decisions())
def test_lean_reader_accepts_every_valid_decision(line: bytes) -> None:
    assert _protocol_accepts(line)
    lean = _lean_accepts(line)
    assert lean is not None
    ref = protocol.decode_server(line)
    assert isinstance(ref, protocol.Decision)
    for field in protocol.Decision.__struct_fields__:
        assert getattr(lean, field) == getattr(ref, field), field
    # The mappers answer the same for either object.
    for event in claude.EVENTS:
        for ask in (False, True):
            assert claude.hook_answer(event, lean, ask_allowed=ask) == claude.hook_answer(event, ref, ask_allowed=ask)
            assert gemini.answer(lean, ask_allowed=ask) == gemini.answer(ref, ask_allowed=ask)


@pytest.mark.parametrize("line", _malformed_decisions())
def test_lean_reader_rejects_what_the_protocol_rejects(line: bytes) -> None:
    assert not _protocol_accepts(line), "the fixture must be malformed for the protocol too"
    assert _lean_accepts(line) is None


# --------------------------------------------------------------------------- the conversation


WELCOME = protocol.encode(
    protocol.Welcome(proto=protocol.PROTOCOL_VERSION, version="0", role="agent", ref="h1")
).strip()


def _conversation(replies: list[bytes]) -> LeanDecision:
    """Drive ``AgentConnection`` against scripted reply lines after a welcome (a Unix socket stands in for
    nexusd, whose real replies test_hook covers end to end). The request's ref is ``h2``."""
    import socket
    import threading

    from tests.conftest import short_tmpdir

    path = str(short_tmpdir() / "fake.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    received: list[bytes] = []

    def serve() -> None:
        peer, _ = server.accept()
        with peer, peer.makefile("rb") as lines:
            received.append(lines.readline())
            peer.sendall(WELCOME + b"\n")
            received.append(lines.readline())
            peer.sendall(b"".join(r + b"\n" for r in replies))
            peer.shutdown(socket.SHUT_WR)
            lines.read()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with wire_lean.AgentConnection(path, timeout=2.0) as conn:
            conn.connect("t")
            return conn.request(
                wire_lean.call_fields(provider="p", session="s", tool="t", input={}, cwd="/"), "deny", 2
            )
    finally:
        thread.join(5)
        server.close()
        assert isinstance(protocol.decode_client(received[0]), protocol.Hello)
        assert protocol.decode_client(received[1]) == protocol.Request(
            call=protocol.CallInfo(provider="p", session="s", tool="t", input={}, cwd="/"), max_wait=2.0, ref="h2"
        )  # max_wait: the daemon is told how long the hook waits (a person may hold the ask up to it)


DENY = protocol.encode(protocol.Decision("deny", "no", "rule", ref="h2")).strip()


def test_pending_then_decision() -> None:
    pending = protocol.encode(protocol.Pending(id="ab", deadline=1.5, ref="h2")).strip()
    assert _conversation([pending, DENY]).decision == "deny"


@pytest.mark.parametrize(
    ("replies", "error"),
    [
        ([protocol.encode(protocol.Decision("allow", "x", "rule", ref="r9")).strip()], BadReply),
        ([protocol.encode(protocol.Decision("allow", "x", "rule")).strip()], BadReply),
        ([b'{"type":"pending","id":"a","deadline":"soon","ref":"h2"}', DENY], BadReply),
        ([b'{"type":"pending","id":"a","deadline":1,"ref":"h2","x":1}', DENY], BadReply),
        ([protocol.encode(protocol.Ack(ref="h2")).strip()], BadReply),
        ([protocol.encode(protocol.PolicyNotice(ok=True)).strip()], BadReply),
        ([protocol.encode(protocol.Error(code="internal", message="boom", ref="h2")).strip()], wire_lean.ClientError),
        ([protocol.encode(protocol.Bye(reason="stop")).strip()], wire_lean.DaemonUnreachable),
        ([], wire_lean.DaemonUnreachable),
    ],
)
def test_anything_but_a_matching_decision_raises(replies: list[bytes], error: type[Exception]) -> None:
    with pytest.raises(error):
        _conversation(replies)
