"""Deeply nested messages (issue 34, item 8): a tool input nested ~1,000 deep made the message parser raise
RecursionError; the client got no reply and every connection logged a full traceback outside the log rate
limit. Now a message deeper than ``protocol.MAX_DEPTH`` gets an ``invalid_message`` reply, logged through the
client-fault rate limit like any other bad line."""

from __future__ import annotations

import json

import msgspec
import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle
from tests.daemon.conftest import Raw


def _request(depth: int, shape: str = "[]") -> bytes:
    """A request whose tool input nests ``depth`` levels below the message (arrays, objects or both)."""
    if shape == "[]":
        inner = "[" * depth + "]" * depth
    elif shape == "{}":
        inner = '{"a":' * depth + "1" + "}" * depth
    else:
        inner = '[{"a":' * (depth // 2) + "1" + "}]" * (depth // 2)
    call = '{"provider":"claude","session":"s","tool":"Bash","input":{"command":"ls","x":' + inner + '},"cwd":"/tmp"}'
    return ('{"type":"request","ref":"deep","call":' + call + "}\n").encode()


@pytest.mark.parametrize("shape", ["[]", "{}", "mixed"])
def test_a_deep_message_gets_an_invalid_message_reply(daemon: DaemonHandle, shape: str) -> None:
    r = Raw(daemon.socket, timeout=10)
    r.hello("agent")
    r.send_bytes(_request(1000, shape))
    reply = r.recv()
    assert isinstance(reply, p.Error) and reply.code == "invalid_message", reply
    assert "nested deeper" in reply.message  # (its ref cannot be read without parsing the depth)
    # the connection goes on: a normal request right after is decided
    call = {**json.loads(_request(3).decode())["call"], "input": {"command": "ls"}}
    r.send({"type": "request", "ref": "ok", "call": call})
    reply = r.recv()
    assert isinstance(reply, p.Decision | p.Pending), reply
    r.close()


def test_the_limit_is_exact_and_strings_do_not_count() -> None:
    line = _request(p.MAX_DEPTH - 3)  # the message, call and input objects are three levels
    assert p.nesting_depth(line) == p.MAX_DEPTH
    p.decode_client(line)
    with pytest.raises(msgspec.ValidationError, match="nested deeper"):
        p.decode_client(_request(p.MAX_DEPTH - 2))
    text = '{"type":"request","call":{"provider":"c","session":"s","tool":"Bash","cwd":"/","input":{"command":"'
    brackets = "[{" * 5000 + '\\"' + "]}" * 10
    p.decode_client((text + brackets + '"}}}').encode())  # brackets inside a string are text
    with pytest.raises(msgspec.ValidationError, match="nested deeper"):
        p.decode_client(_request(100_000))


def test_many_deep_connections_log_within_the_rate_limit(daemon_factory) -> None:
    """300 connections, each one deep message: every one answered, no traceback, a bounded log."""
    h = daemon_factory(args=["--client-log-interval", "600"])
    before = h.log.stat().st_size
    for _ in range(300):
        r = Raw(h.socket, timeout=10)
        r.hello("agent")
        r.send_bytes(_request(1000))
        reply = r.recv()
        assert isinstance(reply, p.Error) and reply.code == "invalid_message"
        r.close()
    Raw(h.socket).hello("admin")  # the daemon is still serving
    log = h.log.read_bytes()[before:].decode(errors="replace")
    assert "Traceback" not in log and "RecursionError" not in log
    assert log.count("\n") < 60, log[-2000:]
