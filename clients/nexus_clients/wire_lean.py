"""The agent side of the wire in the standard library only, for ``nexus-hook``.

Importing msgspec (via ``nexusd.protocol`` / ``nexusd.client``) costs 15-17 ms, most of the hook's
whole-process budget, and the hook only ever sends two messages and reads three kinds of reply. So this
module speaks those JSON lines with ``json`` and ``socket`` and validates the reply as strictly as the
protocol's msgspec decoder would: exact types, known literals, no unknown fields. Anything else raises
``BadReply`` and the hook denies; nothing here can turn a malformed reply into an allow.

The literal sets and the version are copies of ``nexusd/protocol.py``; ``tests/clients/test_wire_lean.py``
asserts they are equal and checks this reader against the protocol's own decoder on every Decision shape.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError, ReplyTimeout
from nexusd.linesocket import LineSocket

PROTOCOL_VERSION = 1

DECISION_KINDS = frozenset({"allow", "deny", "ask"})
SOURCES = frozenset(
    {"rule", "mode", "safety", "hook", "classifier", "user", "timeout", "cancelled", "error", "default"}
)
ROLES = frozenset({"agent", "ui", "admin"})
NO_UI = frozenset({"deny", "ask"})

# Decision fields (protocol.Decision): required str literals / str, optional str-or-null, optional dict-or-null.
_DECISION_REQUIRED = ("decision", "reason", "source")
_DECISION_OPTIONAL_STR = ("id", "rule", "rule_origin", "message", "answered_by", "ref")
_DECISION_FIELDS = frozenset(("type", *_DECISION_REQUIRED, *_DECISION_OPTIONAL_STR, "updated_input", "abort"))
_CALL_OPTIONAL = ("mode", "agent_request_id", "agent_pid", "workspace", "transcript_path", "subagent_id",
                  "subagent_type")

HELLO_REF = "h1"
REQUEST_REF = "r1"
SESSION_END_REF = "e1"


class LeanDecision:
    """A validated ``protocol.Decision`` with the same attribute names, so the mappers take either."""

    __slots__ = (
        "abort",
        "answered_by",
        "decision",
        "id",
        "message",
        "reason",
        "ref",
        "rule",
        "rule_origin",
        "source",
        "updated_input",
    )

    def __init__(self, fields: dict[str, Any]) -> None:
        self.decision: str = fields["decision"]
        self.reason: str = fields["reason"]
        self.source: str = fields["source"]
        self.id: str | None = fields.get("id")
        self.rule: str | None = fields.get("rule")
        self.rule_origin: str | None = fields.get("rule_origin")
        self.updated_input: dict[str, Any] | None = fields.get("updated_input")
        self.message: str | None = fields.get("message")
        self.answered_by: str | None = fields.get("answered_by")
        self.abort: bool = fields.get("abort") is True
        self.ref: str | None = fields.get("ref")


# --------------------------------------------------------------------------- encoding


def encode(msg: dict[str, Any]) -> bytes:
    """One wire line. NaN/Infinity are refused (not JSON); non-ASCII is escaped, so lone surrogates too."""
    return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def call_fields(
    *,
    provider: str,
    session: str,
    tool: str,
    input: dict[str, Any],
    cwd: str,
    mode: str | None = None,
    agent_request_id: str | None = None,
    agent_pid: int | None = None,
    workspace: str | None = None,
    transcript_path: str | None = None,
    subagent_id: str | None = None,
    subagent_type: str | None = None,
) -> dict[str, Any]:
    """A ``protocol.CallInfo`` as its wire dict, defaults omitted as msgspec's ``omit_defaults`` does."""
    out: dict[str, Any] = {"provider": provider, "session": session, "tool": tool, "input": input, "cwd": cwd}
    values = (mode, agent_request_id, agent_pid, workspace, transcript_path, subagent_id, subagent_type)
    for key, value in zip(_CALL_OPTIONAL, values, strict=True):
        if value is not None:
            out[key] = value
    return out


def hello(name: str) -> dict[str, Any]:
    return {"type": "hello", "proto": PROTOCOL_VERSION, "role": "agent", "name": name, "ref": HELLO_REF}


def request(call: dict[str, Any], on_no_ui: str) -> dict[str, Any]:
    if on_no_ui not in NO_UI:
        raise ValueError(f"on_no_ui must be one of {sorted(NO_UI)}")
    return {"type": "request", "call": call, "on_no_ui": on_no_ui, "ref": REQUEST_REF}


# --------------------------------------------------------------------------- decoding


def _reject_constant(name: str) -> Any:
    raise BadReply(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadReply("number out of range")
    return value


def parse_line(line: bytes) -> dict[str, Any]:
    """Strict JSON object: UTF-8, no NaN/Infinity, no lone surrogates (msgspec refuses all three)."""
    try:
        text = line.decode("utf-8")
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
        if "\\" in text:  # an escape may have produced a lone surrogate; re-encoding finds it
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except BadReply:
        raise
    except (ValueError, UnicodeError, RecursionError) as e:
        raise BadReply(f"undecodable reply from nexusd: {type(e).__name__}") from None
    if not isinstance(obj, dict):
        raise BadReply("reply is not a JSON object")
    return obj


def _opt_str(msg: dict[str, Any], key: str) -> None:
    value = msg.get(key)
    if value is not None and type(value) is not str:
        raise BadReply(f"{key!r} must be a string")


def _req_str(msg: dict[str, Any], key: str) -> str:
    value = msg.get(key)
    if type(value) is not str:
        raise BadReply(f"{key!r} must be a string")
    return value


def check_decision(msg: dict[str, Any]) -> LeanDecision:
    """Validate a decoded ``decision`` message exactly as ``protocol.Decision`` would."""
    if msg.get("type") != "decision":
        raise BadReply("not a decision")
    extra = set(msg) - _DECISION_FIELDS
    if extra:
        raise BadReply(f"unknown decision fields {sorted(extra)}")
    if _req_str(msg, "decision") not in DECISION_KINDS:
        raise BadReply("unknown decision kind")
    _req_str(msg, "reason")
    if _req_str(msg, "source") not in SOURCES:
        raise BadReply("unknown decision source")
    for key in _DECISION_OPTIONAL_STR:
        _opt_str(msg, key)
    updated = msg.get("updated_input")
    if updated is not None and type(updated) is not dict:
        raise BadReply("'updated_input' must be an object")
    if type(msg.get("abort", False)) is not bool:
        raise BadReply("'abort' must be a boolean")
    return LeanDecision(msg)


def _check_error(msg: dict[str, Any]) -> ClientError:
    code = msg.get("code")
    text = msg.get("message")
    return ClientError(code if type(code) is str else "?", text if type(text) is str else "malformed error")


def _check_welcome(msg: dict[str, Any]) -> None:
    extra = set(msg) - {"type", "proto", "version", "role", "sandbox", "idle_timeout", "ref"}
    if extra:
        raise BadReply(f"unknown welcome fields {sorted(extra)}")
    if type(msg.get("proto")) is not int or msg["proto"] != PROTOCOL_VERSION:
        raise BadReply("welcome speaks another protocol version")
    _req_str(msg, "version")
    if msg.get("role") != "agent":
        raise BadReply("welcome grants another role")
    if msg.get("sandbox") is not None and type(msg["sandbox"]) is not dict:
        raise BadReply("'sandbox' must be an object")
    if msg.get("idle_timeout") is not None and type(msg["idle_timeout"]) not in (int, float):
        raise BadReply("'idle_timeout' must be a number")
    if msg.get("ref") not in (None, HELLO_REF):  # the daemon echoes it; a welcome decides nothing either way
        raise BadReply("welcome for another hello")


def _check_pending(msg: dict[str, Any]) -> str:
    extra = set(msg) - {"type", "id", "deadline", "ref"}
    if extra:
        raise BadReply(f"unknown pending fields {sorted(extra)}")
    pending_id = _req_str(msg, "id")
    if type(msg.get("deadline")) not in (int, float):
        raise BadReply("'deadline' must be a number")
    return pending_id


# --------------------------------------------------------------------------- the conversation


class AgentConnection:
    """One request over one connection: hello, welcome, request, [pending], decision."""

    def __init__(self, socket_path: str, timeout: float) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._line: LineSocket | None = None

    def __enter__(self) -> AgentConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._line is not None:
            self._line.close()
            self._line = None

    def connect(self, name: str) -> None:
        self._line = LineSocket.connect(self.socket_path, self.timeout)
        self._send(hello(name))
        msg = self._next(time.monotonic() + self.timeout)
        kind = msg.get("type")
        if kind == "error":
            raise _check_error(msg)
        if kind != "welcome":
            raise BadReply(f"expected welcome, got {kind!r}")
        _check_welcome(msg)

    def request(self, call: dict[str, Any], on_no_ui: str, timeout: float) -> LeanDecision:
        """Send the request and wait (through Pending) for its Decision; ReplyTimeout at ``timeout``."""
        self._send(request(call, on_no_ui))
        deadline = time.monotonic() + timeout
        pending_id: str | None = None
        while True:
            try:
                msg = self._next(deadline)
            except ReplyTimeout:
                if pending_id is not None:
                    with contextlib.suppress(NexusClientError):
                        self._send({"type": "cancel", "id": pending_id})
                raise
            kind = msg.get("type")
            if kind == "error":
                raise _check_error(msg)
            if kind == "bye":
                raise DaemonUnreachable("nexusd is stopping")
            if msg.get("ref") != REQUEST_REF:
                raise BadReply(f"unexpected {kind!r} message")
            if kind == "pending":
                pending_id = _check_pending(msg)
                continue
            if kind == "decision":
                return check_decision(msg)
            raise BadReply(f"expected decision, got {kind!r}")

    def session_end(self, session: str, timeout: float) -> None:
        """Tell the daemon the agent session ended (its session allow grants end; it only narrows)."""
        self._send({"type": "session_end", "session": session, "ref": SESSION_END_REF})
        msg = self._next(time.monotonic() + timeout)
        kind = msg.get("type")
        if kind == "error":
            raise _check_error(msg)
        if kind != "ack" or msg.get("ref") != SESSION_END_REF:
            raise BadReply(f"expected ack, got {kind!r}")

    def _send(self, msg: dict[str, Any]) -> None:
        if self._line is None:
            raise DaemonUnreachable("not connected")
        try:
            data = encode(msg)
        except (ValueError, TypeError, RecursionError) as e:
            raise ValueError(f"cannot encode the request: {e}") from None
        self._line.send(data)

    def _next(self, deadline: float) -> dict[str, Any]:
        return parse_line(self._read_line(deadline))

    def _read_line(self, deadline: float) -> bytes:
        if self._line is None:
            raise DaemonUnreachable("not connected")
        return self._line.read_line(deadline)
