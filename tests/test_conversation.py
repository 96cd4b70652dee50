"""The one client conversation (nexusd/conversation.py), driven directly: bytes in, events out, no socket.

Every state meets every kind of message the daemon can send, with our ref, another ref and none: only what
the protocol allows at that point becomes an event; everything else raises a client error (a deny for
the caller) and leaves the conversation FAILED. Both codecs are driven: msgspec Structs (Client,
AsyncClient) and the hook's json dicts (wire_lean).
"""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest
from nexus_clients.wire_lean import LeanCodec

from nexusd import protocol as p
from nexusd.client import StructCodec
from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError
from nexusd.conversation import (
    NEED_DATA,
    NO_REPLY,
    PUSHES,
    REPLIES,
    Conversation,
    Pushed,
    Refused,
    Replied,
    State,
    Waiting,
    Welcomed,
)
from tests.test_protocol import CALL, CLIENT_MESSAGES, ITEM, SERVER_MESSAGES

CODECS = {"struct": StructCodec, "lean": LeanCodec}
SERVER_TAGS = {str(c.__struct_config__.tag) for c in typing.get_args(p.ServerMessage)}
CLIENT_TAGS = {str(c.__struct_config__.tag) for c in typing.get_args(p.ClientMessage)}


def _line(msg: msgspec.Struct, ref: str | None = None) -> bytes:
    """``msg`` on the wire with ``ref`` (None: without one) where it has the field."""
    if "ref" in msg.__struct_fields__:
        msg = msgspec.structs.replace(msg, ref=ref)
    return p.encode(msg)


def _tag(msg: msgspec.Struct) -> str:
    return str(msg.__struct_config__.tag)


def _call_line(codec: str) -> dict[str, Any] | p.CallInfo:
    return msgspec.to_builtins(CALL) if codec == "lean" else CALL


def _greeting(codec: str = "struct", role: str = "agent") -> Conversation:
    conv = Conversation(CODECS[codec](), role, "t")
    hello = p.decode_client(conv.hello())
    assert hello == p.Hello(proto=p.PROTOCOL_VERSION, role=role, name="t", ref="c1")  # type: ignore[arg-type]
    assert conv.state is State.GREETING
    return conv


def _ready(codec: str = "struct", role: str = "agent") -> Conversation:
    conv = _greeting(codec, role)
    conv.receive_data(_line(p.Welcome(proto=p.PROTOCOL_VERSION, version="0", role=role, idle_timeout=60.0), "c1"))  # type: ignore[arg-type]
    event = conv.next_event()
    assert isinstance(event, Welcomed) and conv.state is State.READY and conv.idle_timeout == 60.0
    return conv


def _fails(conv: Conversation, data: bytes | None, error: type[NexusClientError] = BadReply) -> None:
    """``data`` (None: what was already received) raises ``error``, and the conversation stays failed."""
    if data is not None:
        conv.receive_data(data)
    with pytest.raises(error):
        conv.next_event()
    assert conv.state in (State.FAILED, State.CLOSED)
    with pytest.raises(NexusClientError):  # and it stays so: nothing more is read or sent
        conv.next_event()
    with pytest.raises(NexusClientError):
        conv.send_call({"type": "status"} if isinstance(conv.codec, LeanCodec) else p.Status())


# --------------------------------------------------------------------------- the table


def test_every_client_message_has_exactly_one_reply_type_of_the_protocol() -> None:
    assert set(REPLIES) | NO_REPLY == CLIENT_TAGS and not set(REPLIES) & NO_REPLY
    assert set(REPLIES.values()) <= SERVER_TAGS
    assert PUSHES <= SERVER_TAGS
    assert p.PROTOCOL_VERSION == 1


# --------------------------------------------------------------------------- happy paths


@pytest.mark.parametrize("codec", CODECS)
def test_request_pending_decision_fed_one_byte_at_a_time(codec: str) -> None:
    conv = _ready(codec)
    ref, data = conv.send_request(_call_line(codec), "deny")
    assert p.decode_client(data) == p.Request(call=CALL, on_no_ui="deny", ref=ref)
    wire = _line(p.Pending(id="ab", deadline=1.0), ref) + b"\n" + _line(p.Decision("allow", "ok", "user"), ref)
    events = []
    for i in range(len(wire)):
        conv.receive_data(wire[i : i + 1])
        while (event := conv.next_event()) is not NEED_DATA:
            events.append(event)
    assert [type(e) for e in events] == [Waiting, Replied]
    assert isinstance(events[0], Waiting) and events[0].id == "ab" and events[0].ref == ref
    assert isinstance(events[1], Replied) and conv.codec.get(events[1].message, "decision") == "allow"
    assert conv.open_calls == 0 and conv.state is State.READY


@pytest.mark.parametrize(
    "query", [m for m in CLIENT_MESSAGES if _tag(m) not in ("hello", "request", *NO_REPLY)], ids=_tag
)
def test_every_query_gets_exactly_its_reply_type(query: msgspec.Struct) -> None:
    for reply in SERVER_MESSAGES:
        conv = _ready(role="admin")
        ref, _ = conv.send_call(msgspec.structs.replace(query, ref=None))
        if _tag(reply) == REPLIES[_tag(query)]:
            conv.receive_data(_line(reply, ref))
            event = conv.next_event()
            assert isinstance(event, Replied) and event.ref == ref
        elif _tag(reply) == "error":
            conv.receive_data(_line(reply, ref))
            event = conv.next_event()
            assert isinstance(event, Refused) and event.error.code == "policy_error" and conv.state is State.READY
        elif "ref" not in reply.__struct_fields__:
            continue  # a push: covered below
        else:
            _fails(conv, _line(reply, ref))


def test_a_refs_own_is_kept_and_a_duplicate_or_missing_one_is_replaced() -> None:
    conv = _ready()
    ref, _ = conv.send_call(p.Status(ref="mine"))
    assert ref == "mine"
    again, _ = conv.send_call(p.Status(ref="mine"))
    assert again != "mine"


# --------------------------------------------------------------------------- every state x unexpected input


@pytest.mark.parametrize("msg", SERVER_MESSAGES, ids=_tag)
def test_start_refuses_everything(msg: msgspec.Struct) -> None:
    conv = Conversation(StructCodec(), "agent", "t")
    _fails(conv, _line(msg))


def test_start_refuses_calls_before_the_welcome() -> None:
    conv = Conversation(StructCodec(), "agent", "t")
    with pytest.raises(RuntimeError):
        conv.send_call(p.Status())
    conv.hello()
    with pytest.raises(RuntimeError):
        conv.hello()
    with pytest.raises(RuntimeError):
        conv.send_request(CALL, "deny")


@pytest.mark.parametrize("msg", SERVER_MESSAGES, ids=_tag)
@pytest.mark.parametrize("ref", [None, "c1", "zz"])
def test_greeting_accepts_only_a_welcome(msg: msgspec.Struct, ref: str | None) -> None:
    conv = _greeting(role="ui")
    if _tag(msg) == "welcome" and ref != "zz":
        conv.receive_data(_line(msg, ref))
        assert isinstance(conv.next_event(), Welcomed)
        return
    error = {"error": ClientError, "bye": DaemonUnreachable}.get(_tag(msg), BadReply)
    _fails(conv, _line(msg, ref), error)


@pytest.mark.parametrize(
    "welcome",
    [
        p.Welcome(proto=2, version="0", role="agent"),
        p.Welcome(proto=0, version="0", role="agent"),
        p.Welcome(proto=1, version="0", role="admin"),  # not the role asked for
    ],
)
@pytest.mark.parametrize("codec", CODECS)
def test_greeting_refuses_another_version_or_role(welcome: p.Welcome, codec: str) -> None:
    _fails(_greeting(codec), _line(welcome))


@pytest.mark.parametrize("codec", CODECS)
def test_greeting_at_the_end_of_the_stream_is_unreachable(codec: str) -> None:
    conv = _greeting(codec)
    conv.receive_data(b'{"type":"welc')
    conv.receive_data(b"")
    with pytest.raises(DaemonUnreachable):
        conv.next_event()
    with pytest.raises(DaemonUnreachable):
        conv.send_request(_call_line(codec), "deny")


@pytest.mark.parametrize("msg", SERVER_MESSAGES, ids=_tag)
def test_ready_without_calls_takes_only_bye_pong_and_pushes_to_a_subscriber(msg: msgspec.Struct) -> None:
    tag = _tag(msg)
    for subscribed in (False, True):
        conv = _ready(role="ui")
        if subscribed:
            ref, _ = conv.send_call(p.Subscribe())
            conv.receive_data(_line(p.Snapshot(items=[]), ref))
            assert isinstance(conv.next_event(), Replied)
        data = _line(msg, None)
        if tag == "pong":
            conv.receive_data(data)
            assert conv.next_event() is NEED_DATA  # a keep-alive's answer
        elif tag == "bye":
            conv.receive_data(data)
            assert isinstance(conv.next_event(), Pushed) and conv.state is State.CLOSED
            with pytest.raises(DaemonUnreachable):
                conv.send_call(p.Status())
        elif tag in PUSHES and subscribed:
            conv.receive_data(data)
            assert isinstance(conv.next_event(), Pushed) and conv.state is State.READY
        else:
            _fails(conv, data, ClientError if tag == "error" else BadReply)
        if "ref" in msg.__struct_fields__ and tag != "bye":  # a reply for a call never made
            conv = _ready(role="ui")
            _fails(conv, _line(msg, "never"))


@pytest.mark.parametrize("msg", [m for m in SERVER_MESSAGES if "ref" in m.__struct_fields__], ids=_tag)
@pytest.mark.parametrize("codec", CODECS)
def test_an_open_request_takes_only_pending_decision_or_error(msg: msgspec.Struct, codec: str) -> None:
    """Every message that can carry a ref, with the request's (pushes carry none: see above)."""
    tag = _tag(msg)
    conv = _ready(codec)
    ref, _ = conv.send_request(_call_line(codec), "deny")
    conv.receive_data(_line(msg, ref))
    if tag in ("pending", "decision", "error"):
        event = conv.next_event()
        assert isinstance(event, {"pending": Waiting, "decision": Replied, "error": Refused}[tag])
        if tag == "pending":  # a second pending is not allowed
            _fails(conv, _line(msg, ref))
    else:
        _fails(conv, None)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "garbage",
    [
        b"not json",
        b"[]",
        b"null",
        b'{"type":"decision"}',
        b'{"type":"nope","ref":"c2"}',
        b'{"ref":"c2"}',
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule","ref":"c2","extra":1}',
        b'{"type":"decision","decision":"ALLOW","reason":"r","source":"rule","ref":"c2"}',
        b"\xff\xfe",
        b'{"type":"pending","id":5,"deadline":1,"ref":"c2"}',
        b'{"type":"welcome","proto":1,"version":"x","role":["agent"],"ref":"c1"}',
        b'{"type":["decision"],"ref":"c2"}',
        b'{"type":"ack","ref":["c2"]}',
        b'{"type":"decision","decision":"allow","reason":"r","source":"rule","ref":{}}',
    ],
)
def test_malformed_lines_fail_closed(codec: str, garbage: bytes) -> None:
    conv = _ready(codec)
    conv.send_request(_call_line(codec), "deny")
    _fails(conv, garbage + b"\n")


def test_an_endless_line_fails_and_blank_lines_are_skipped() -> None:
    conv = Conversation(StructCodec(), "agent", "t", max_line=100)
    conv.hello()
    conv.receive_data(b"\n  \n")
    assert conv.next_event() is NEED_DATA
    _fails(conv, b"x" * 101)


@pytest.mark.parametrize("codec", CODECS)
def test_the_end_of_the_stream_while_a_request_is_open_is_unreachable(codec: str) -> None:
    conv = _ready(codec)
    ref, _ = conv.send_request(_call_line(codec), "deny")
    conv.receive_data(_line(p.Pending(id="ab", deadline=1.0), ref))
    assert isinstance(conv.next_event(), Waiting)
    conv.receive_data(b"")
    with pytest.raises(DaemonUnreachable):
        conv.next_event()
    assert conv.state is State.CLOSED and conv.open_calls == 0


# --------------------------------------------------------------------------- giving up (the driver's timeout)


@pytest.mark.parametrize("codec", CODECS)
def test_giving_up_cancels_a_pending_request_and_drops_its_late_replies(codec: str) -> None:
    conv = _ready(codec)
    ref, _ = conv.send_request(_call_line(codec), "deny")
    assert conv.give_up("unknown") == b""
    conv.receive_data(_line(p.Pending(id="ab", deadline=1.0), ref))
    assert isinstance(conv.next_event(), Waiting)
    cancel = p.decode_client(conv.give_up(ref))
    assert isinstance(cancel, p.Cancel) and cancel.id == "ab" and cancel.ref
    conv.receive_data(_line(p.Decision("allow", "late", "user"), ref) + _line(p.Ack(), cancel.ref))
    assert conv.next_event() is NEED_DATA and conv.state is State.READY
    conv.receive_data(_line(p.Decision("allow", "again", "user"), ref))  # no second final reply
    with pytest.raises(BadReply):
        conv.next_event()


def test_giving_up_before_pending_sends_nothing() -> None:
    conv = _ready()
    ref, _ = conv.send_call(p.Status())
    assert conv.give_up(ref) == b""
    conv.receive_data(_line(p.Error(code="internal", message="late"), ref))
    assert conv.next_event() is NEED_DATA
    assert conv.data_to_send() == b""


@pytest.mark.parametrize("codec", CODECS)
def test_a_pending_that_comes_after_giving_up_is_cancelled(codec: str) -> None:
    """Nobody waits for the decision any more: the person must not be asked for nobody."""
    conv = _ready(codec)
    ref, _ = conv.send_request(_call_line(codec), "deny")
    assert conv.give_up(ref) == b""
    conv.receive_data(_line(p.Pending(id="cd", deadline=1.0), ref))
    assert conv.next_event() is NEED_DATA
    cancel = p.decode_client(conv.data_to_send())
    assert isinstance(cancel, p.Cancel) and cancel.id == "cd"
    assert conv.data_to_send() == b""
    conv.receive_data(_line(p.Ack(), cancel.ref) + _line(p.Decision("deny", "cancelled", "cancelled"), ref))
    assert conv.next_event() is NEED_DATA and conv.state is State.READY


def test_a_refused_subscription_does_not_let_pushes_in() -> None:
    conv = _ready(role="agent")
    ref, _ = conv.send_call(p.Subscribe())
    conv.receive_data(_line(p.Error(code="wrong_role", message="agents cannot subscribe"), ref))
    assert isinstance(conv.next_event(), Refused)
    _fails(conv, _line(p.Prompt(item=ITEM)))


def test_unencodable_calls_raise_value_error_and_change_nothing() -> None:
    conv = _ready("lean")
    with pytest.raises(ValueError):
        conv.send_request({**msgspec.to_builtins(CALL), "input": {"x": float("nan")}}, "deny")
    with pytest.raises(ValueError):
        conv.send_request(msgspec.to_builtins(CALL), "allow")
    assert conv.open_calls == 0 and conv.state is State.READY


def test_a_codec_that_slips_still_fails_closed() -> None:
    """Whatever a codec raises while decoding is a reply nobody may act on: BadReply, and FAILED."""

    class Slipping(LeanCodec):
        def decode(self, line: bytes) -> dict[str, Any]:
            raise TypeError("unhashable type: 'list'")

    conv = Conversation(Slipping(), "agent", "t")
    conv.hello()
    _fails(conv, b'{"type":"welcome"}\n')
