"""Seed 000's 10 MB write limit over a 1 MiB line limit: a large Write's content travels in ``part`` lines
before its request (``nexusd.conversation``), is put back whole by the daemon (``daemon/uploads.py``) and
decided on; over 10 MB it is refused with its real size and a clear reason, never "daemon not reachable"."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest
from nexus_clients.wire_lean import LeanCodec

from nexusd import protocol as p
from nexusd.conversation import MAX_UPLOAD_CHARS, PIECE_CHARS, SPLIT_CHARS, Conversation, large_keys
from tests.clients.test_hook import HOOK
from tests.daemon.conftest import Raw

MIB = 1 << 20


def _write(ws: Path, size: int, mode: str = "acceptEdits", char: str = "x") -> bytes:
    payload = {"session_id": "big", "transcript_path": "/nonexistent.jsonl", "cwd": str(ws), "permission_mode": mode,
               "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "t1",
               "tool_input": {"file_path": str(ws / "big.bin"), "content": char * size}}  # fmt: skip
    return json.dumps(payload).encode()


def _hook(env: dict[str, str], stdin: bytes) -> tuple[str, str]:
    proc = subprocess.run([*HOOK, "claude"], input=stdin, env=env, capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    return out["permissionDecision"], out["permissionDecisionReason"]


@pytest.mark.parametrize("size", [2 * MIB, 9 * MIB])
def test_a_write_over_the_line_limit_is_decided_on_its_whole_content(daemon, tmp_path, size):
    decision, reason = _hook(daemon.env, _write(tmp_path, size))
    assert decision == "allow" and "allows workspace-write" in reason, reason


@pytest.mark.parametrize("size", [10 * MIB + 1, 12 * MIB, 17 * MIB])
def test_a_write_over_10_mb_is_refused_with_its_size(daemon, tmp_path, size):
    decision, reason = _hook(daemon.env, _write(tmp_path, size))
    assert decision == "deny" and f"writes {size} bytes" in reason and "10485760" in reason, reason


def test_a_person_sees_the_whole_large_content(daemon, raw_factory, tmp_path):
    ui = raw_factory(daemon.socket, role="ui", name="person")
    ui.ask({"type": "subscribe"})
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.update(r=_hook(daemon.env, _write(tmp_path, 3 * MIB, "default", "é"))))
    t.start()
    prompt = ui.recv()
    assert isinstance(prompt, p.Prompt)
    assert prompt.item.call.input["content"] == "é" * (3 * MIB)
    ui.send({"type": "answer", "id": prompt.item.id, "decision": "deny"})
    t.join(60)
    assert out["r"][0] == "deny"  # type: ignore[index]


def test_the_split_keeps_every_line_under_the_limit_and_small_calls_whole():
    conv = Conversation(LeanCodec(), "agent", "t")
    conv.hello()
    conv.receive_data(b'{"type":"welcome","proto":1,"version":"x","role":"agent"}\n')
    conv.next_event()
    small = {"provider": "claude", "session": "s", "tool": "Write", "input": {"file_path": "/w/a", "content": "x"},
             "cwd": "/w"}  # fmt: skip
    _, data = conv.send_request(small, "deny")
    assert data.count(b"\n") == 1 and b'"part"' not in data
    big = {**small, "input": {"file_path": "/w/a", "content": "\x01" * (2 * PIECE_CHARS + 5), "note": "n"}}
    _, data = conv.send_request(big, "deny")
    lines = data.splitlines()
    assert len(lines) == 4 and all(len(line) < MIB for line in lines)  # \x01 escapes to 6 bytes a character
    parts, request = [json.loads(x) for x in lines[:-1]], json.loads(lines[-1])
    assert {x["type"] for x in parts} == {"part"} and request["type"] == "request"
    assert request["call"]["input"] == {"file_path": "/w/a", "content": "", "note": "n"}
    assert "".join(x["text"] for x in parts) == big["input"]["content"]
    assert request["uploads"] == {"content": parts[0]["upload"]}
    huge = {**small, "input": {"file_path": "/w/a", "content": "y" * (MAX_UPLOAD_CHARS + 1)}}
    _, data = conv.send_request(huge, "deny")
    request = json.loads(data)
    assert request["call"]["omitted_bytes"] == MAX_UPLOAD_CHARS + 1 and "uploads" not in request
    assert large_keys({"a": "x" * SPLIT_CHARS}) == []  # at the threshold: one line still


def _request(uploads: dict[str, str], content: str = "") -> dict[str, object]:
    call = {"provider": "claude", "session": "raw", "tool": "Write", "cwd": "/tmp", "mode": "bypassPermissions",
            "input": {"file_path": "/tmp/nx-large/a", "content": content}}  # fmt: skip
    return {"type": "request", "call": call, "uploads": uploads, "ref": "r"}


@pytest.mark.parametrize(
    ("parts", "uploads", "content", "why"),
    [
        ([], {"content": "u1"}, "", "never arrived"),  # named, never sent
        ([("u1", "abc")], {"content": "u1"}, "abc", "both in the request and in parts"),
        ([("u1", "a" * PIECE_CHARS)] * (MAX_UPLOAD_CHARS // PIECE_CHARS + 9), {"content": "u1"}, "", "could not be"),
        ([(f"u{i}", "a") for i in range(17)], {"content": "u16"}, "", "could not be received"),
    ],
)
def test_what_does_not_arrive_whole_is_denied_with_why(daemon, parts, uploads, content, why):
    agent = Raw(daemon.socket, timeout=60)
    agent.hello()
    for upload, text in parts:
        agent.send({"type": "part", "upload": upload, "text": text})
    d = agent.ask(_request(uploads, content))
    assert isinstance(d, p.Decision) and d.decision == "deny" and why in d.reason, d
    ok = agent.ask({"type": "ping", "ref": "after"})  # the connection goes on
    assert isinstance(ok, p.Pong)


def test_parts_are_for_agents_only(daemon, raw_factory):
    ui = raw_factory(daemon.socket, role="ui", name="ui")
    err = ui.ask({"type": "part", "upload": "u1", "text": "x", "ref": "x"})
    assert isinstance(err, p.Error) and err.code == "wrong_role"
