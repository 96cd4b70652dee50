"""The agent side of the wire in the standard library only, for ``nexus-hook``.

Importing msgspec (via ``nexusd.protocol`` / ``nexusd.client``) costs 15-17 ms, most of the hook's
whole-process budget, and the hook only ever sends a few messages and reads a few kinds of reply. So this
module is ``nexusd.conversation``'s codec in ``json``: it validates every reply as strictly as the
protocol's msgspec decoder would (exact types, known literals, no unknown fields), and the conversation
(what may be said when) is the one every client shares. Anything else raises ``BadReply`` and the hook
denies; nothing here can turn a malformed reply into an allow.

The literal sets are copies of ``nexusd/protocol.py``; ``tests/clients/test_wire_lean.py`` asserts they
are equal and checks this reader against the protocol's own decoder on every Decision shape.
"""

import time

from nexus_clients import leanjson
from nexusd.channel import BlockingChannel
from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError, ReplyTimeout
from nexusd.conversation import PROTOCOL_VERSION, Conversation

TYPE_CHECKING = False  # the per-call hook imports this module: typing costs it ~2 ms
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "PROTOCOL_VERSION",
    "AgentConnection",
    "BadReply",
    "ClientError",
    "DaemonUnreachable",
    "LeanCodec",
    "LeanDecision",
    "NexusClientError",
    "ReplyTimeout",
    "call_fields",
    "check_decision",
    "parse_line",
]

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
_CALL_OPTIONAL = (
    "mode",
    "agent_request_id",
    "agent_pid",
    "workspace",
    "transcript_path",
    "subagent_id",
    "subagent_type",
)


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

    def __init__(self, fields: "dict[str, Any]") -> None:
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


def encode(msg: "dict[str, Any]") -> bytes:
    """One wire line. NaN/Infinity are refused (not JSON); non-ASCII is escaped, so lone surrogates too."""
    return leanjson.dumps(msg).encode("ascii") + b"\n"


def call_fields(
    *,
    provider: str,
    session: str,
    tool: str,
    input: "dict[str, Any]",
    cwd: str,
    mode: str | None = None,
    agent_request_id: str | None = None,
    agent_pid: int | None = None,
    workspace: str | None = None,
    transcript_path: str | None = None,
    subagent_id: str | None = None,
    subagent_type: str | None = None,
) -> "dict[str, Any]":
    """A ``protocol.CallInfo`` as its wire dict, defaults omitted as msgspec's ``omit_defaults`` does."""
    out: dict[str, Any] = {"provider": provider, "session": session, "tool": tool, "input": input, "cwd": cwd}
    values = (mode, agent_request_id, agent_pid, workspace, transcript_path, subagent_id, subagent_type)
    for key, value in zip(_CALL_OPTIONAL, values, strict=True):
        if value is not None:
            out[key] = value
    return out


# --------------------------------------------------------------------------- decoding


def parse_line(line: bytes) -> "dict[str, Any]":
    """Strict JSON object: UTF-8, no NaN/Infinity, no lone surrogates (msgspec refuses all three)."""
    try:
        text = line.decode("utf-8")
    except UnicodeError as e:
        raise BadReply(f"undecodable reply from nexusd: {type(e).__name__}") from None
    try:
        obj = leanjson.loads(text)
    except leanjson.JSONError as e:
        raise BadReply(f"undecodable reply from nexusd: {e}") from None
    if "\\" in text:  # an escape may have produced a lone surrogate; re-encoding finds it
        try:
            leanjson.utf8_checked(obj)
        except (UnicodeError, RecursionError) as e:
            raise BadReply(f"undecodable reply from nexusd: {type(e).__name__}") from None
    if not isinstance(obj, dict):
        raise BadReply("reply is not a JSON object")
    return obj


def _opt_str(msg: "dict[str, Any]", key: str) -> None:
    value = msg.get(key)
    if value is not None and type(value) is not str:
        raise BadReply(f"{key!r} must be a string")


def _req_str(msg: "dict[str, Any]", key: str) -> str:
    value = msg.get(key)
    if type(value) is not str:
        raise BadReply(f"{key!r} must be a string")
    return value


def check_decision(msg: "dict[str, Any]") -> "LeanDecision":
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


def _check_welcome(msg: "dict[str, Any]") -> None:
    """Field types only: the version, the role and the ref are the conversation's to check."""
    extra = set(msg) - {"type", "proto", "version", "role", "sandbox", "idle_timeout", "ref"}
    if extra:
        raise BadReply(f"unknown welcome fields {sorted(extra)}")
    if type(msg.get("proto")) is not int:
        raise BadReply("'proto' must be an integer")
    _req_str(msg, "version")
    if _req_str(msg, "role") not in ROLES:
        raise BadReply("unknown role")
    if msg.get("sandbox") is not None and type(msg["sandbox"]) is not dict:
        raise BadReply("'sandbox' must be an object")
    if msg.get("idle_timeout") is not None and type(msg["idle_timeout"]) not in (int, float):
        raise BadReply("'idle_timeout' must be a number")
    _opt_str(msg, "ref")


def _check_pending(msg: "dict[str, Any]") -> None:
    extra = set(msg) - {"type", "id", "deadline", "ref"}
    if extra:
        raise BadReply(f"unknown pending fields {sorted(extra)}")
    _req_str(msg, "id")
    if type(msg.get("deadline")) not in (int, float):
        raise BadReply("'deadline' must be a number")
    _opt_str(msg, "ref")


def _check_simple(msg: "dict[str, Any]", required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    """A message of string fields only (error, ack, bye, pong)."""
    extra = set(msg) - {"type", *required, *optional}
    if extra:
        raise BadReply(f"unknown {msg['type']} fields {sorted(extra)}")
    for key in required:
        _req_str(msg, key)
    for key in optional:
        _opt_str(msg, key)


def _check_error(msg: "dict[str, Any]") -> None:
    _check_simple(msg, ("code", "message"), ("ref",))


# What an agent connection may be sent, each read as strictly as protocol.decode_server would.
_CHECKS: "dict[str, Any]" = {
    "welcome": _check_welcome,
    "pending": _check_pending,
    "decision": check_decision,
    "error": _check_error,
    "ack": lambda m: _check_simple(m, (), ("ref", "detail")),
    "bye": lambda m: _check_simple(m, ("reason",), ()),
    "pong": lambda m: _check_simple(m, (), ("ref",)),
}


# --------------------------------------------------------------------------- the conversation


class LeanCodec:
    """``nexusd.conversation``'s codec in json dicts, for the hook (no msgspec)."""

    def build(self, tag: str, fields: "dict[str, Any]") -> "dict[str, Any]":
        if tag == "request" and fields.get("on_no_ui") not in NO_UI:
            raise ValueError(f"on_no_ui must be one of {sorted(NO_UI)}")
        return {"type": tag, **fields}

    def tag_of(self, msg: "dict[str, Any]") -> str:
        return str(msg["type"])

    def get(self, msg: "dict[str, Any]", field: str) -> "Any":
        return msg.get(field)

    def with_ref(self, msg: "dict[str, Any]", ref: str) -> "dict[str, Any]":
        return {**msg, "ref": ref}

    def with_field(self, msg: "dict[str, Any]", field: str, value: "Any") -> "dict[str, Any]":
        return {**msg, field: value}

    def encode(self, msg: "dict[str, Any]") -> bytes:
        return encode(msg)

    def decode(self, line: bytes) -> "dict[str, Any]":
        msg = parse_line(line)
        kind = msg.get("type")
        check = _CHECKS.get(kind) if type(kind) is str else None
        if check is None:
            raise BadReply(f"unexpected {kind!r} message")
        check(msg)
        return msg


class AgentConnection:
    """One agent connection: hello, welcome, then a request ([pending], decision) or a session end.

    A thin blocking driver of ``nexusd.conversation.Conversation``; every rule of the exchange is there."""

    def __init__(self, socket_path: str, timeout: float) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self._chan: BlockingChannel | None = None

    def __enter__(self) -> "AgentConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._chan is not None:
            self._chan.close()
            self._chan = None

    def connect(self, name: str) -> None:
        conv = Conversation(LeanCodec(), "agent", name, ref_prefix="h")
        self._chan = BlockingChannel.connect(conv, self.socket_path, self.timeout)

    def request(self, call: "dict[str, Any]", on_no_ui: str, timeout: float) -> "LeanDecision":
        """Send the request and wait (through Pending) for its Decision; ReplyTimeout at ``timeout``, which
        the daemon is told (``max_wait``): a person may hold the ask up to it, never past it."""
        chan = self._connected()
        ref, data = chan.conv.send_request(call, on_no_ui, max_wait=round(max(timeout, 0.001), 3))
        return LeanDecision(chan.call(ref, data, time.monotonic() + timeout))

    def session_end(self, session: str, timeout: float) -> None:
        """Tell the daemon the agent session ended (its session allow grants end; it only narrows)."""
        chan = self._connected()
        ref, data = chan.conv.send_call({"type": "session_end", "session": session})
        chan.call(ref, data, time.monotonic() + timeout)

    def _connected(self) -> "BlockingChannel":
        if self._chan is None:
            raise DaemonUnreachable("not connected")
        return self._chan
