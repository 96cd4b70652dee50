"""The client side of one nexusd connection as a sans-I/O state machine, in the manner of h11's ``Connection``.

Theory of operation. ``Conversation`` never touches a socket, a clock or a thread: calls go in and bytes
come out (``hello``, ``send_request``, ``send_call``, ``give_up``), bytes go in and events come out
(``receive_data``, ``next_event``). The three clients are thin drivers around it: the hook's lean wire
(``nexus_clients.wire_lean``, blocking, json), the blocking ``nexusd.client.Client`` (both through
``nexusd.channel.BlockingChannel``) and the anyio ``AsyncClient`` (msgspec). So hello → welcome → request
→ [pending] → decision is written once, here, and each driver only moves bytes and waits.

How a message is built, encoded and decoded is the ``Codec``'s business (json dicts for the hook, whose
start-up budget forbids importing msgspec; msgspec Structs for the rest); what may be said when is this
module's. Only the standard library is imported: the hook imports this module on every tool call.

States of the connection (``Conversation.state``)::

    START --hello()--> GREETING --welcome--> READY --bye / EOF--> CLOSED
                          |                    |
                          +--- anything else --+--> FAILED (a protocol error: drop the connection)

In READY any number of calls are open at once, each waiting for the one reply its message allows
(``REPLIES``; a request may first get one ``pending``). Fail closed: whatever the protocol does not allow
at that point — an undecodable line, a reply of the wrong type, a reply for a call never made, a push to
a connection that did not subscribe, an unsolicited error, an endless line — raises a ``NexusClientError``
and leaves the conversation FAILED; the end of the stream raises ``DaemonUnreachable``. Callers turn every
one of them into a deny. A timeout is the driver's to notice (it owns the clock): ``give_up`` forgets the
call, cancels it if a person was being asked, and drops its late reply when it comes.
"""

from nexusd.client_errors import BadReply, ClientError, DaemonUnreachable, NexusClientError
from nexusd.protocol_version import PROTOCOL_VERSION

TYPE_CHECKING = False  # the per-call hook imports this module: typing and enum cost it ~3 ms at start
if TYPE_CHECKING:
    from typing import Any, ClassVar, Final, Protocol

# The one reply each client message allows (besides an ``error`` for its ref); a request may get a
# ``pending`` before its ``decision``. tests/test_conversation.py checks this against the protocol's types.
REPLIES: "Final[dict[str, str]]" = {
    "hello": "welcome",
    "request": "decision",
    "cancel": "ack",
    "subscribe": "snapshot",
    "answer": "ack",
    "status": "status_reply",
    "check": "check_result",
    "set_mode": "ack",
    "reload": "ack",
    "rules": "rules_reply",
    "rule_change": "ack",
    "trust_change": "ack",
    "probe": "probe_reply",
    "sandbox_plan": "sandbox_plan_reply",
    "sandbox_report": "ack",
    "audit": "audit_reply",
    "ping": "pong",
    "grants": "grants_reply",
    "revoke_grant": "ack",
    "session_end": "ack",
    "history": "history_reply",
    "rewind": "rewind_reply",
    "hold": "ack",
    "rule_check": "rule_check_reply",
}
# Sent without a reply: the pieces of a large input string, ahead of the request that names them.
NO_REPLY: "Final" = frozenset({"part"})
# Pushed without a ref to a connection that subscribed; ``bye`` may come to any connection at any time.
PUSHES: "Final" = frozenset({"prompt", "resolved", "policy_notice", "sandbox_notice", "held"})
MAX_LINE_BYTES: "Final" = 64 << 20  # replies (audit tails, snapshots, rewritten tool input) may be long
# Large tool input (a Write's content) travels as ``part`` lines before its request, so no line nears the
# daemon's 1 MiB framing limit: when the input's top-level strings total more than SPLIT_CHARS, each of at
# least MIN_UPLOAD_CHARS goes in pieces of PIECE_CHARS (JSON escapes at most 6 bytes a character: < 1 MiB).
# A string over MAX_UPLOAD_CHARS is not sent at all: its size goes as ``omitted_bytes``, and the daemon
# refuses the write as over 10 MB with that size.
SPLIT_CHARS: "Final" = 256 << 10
MIN_UPLOAD_CHARS: "Final" = 16 << 10
PIECE_CHARS: "Final" = 128 << 10
MAX_UPLOAD_CHARS: "Final" = 16 << 20


class State:
    """A connection state: plain singletons with enum's ``value`` and ``is`` comparison (``enum`` costs the
    per-call hook its import)."""

    __slots__ = ("value",)
    START: "ClassVar[State]"  # nothing sent yet
    GREETING: "ClassVar[State]"  # hello sent, waiting for the welcome
    READY: "ClassVar[State]"  # welcomed: calls may be made
    CLOSED: "ClassVar[State]"  # the daemon said bye or closed the stream: nothing more will come
    FAILED: "ClassVar[State]"  # a protocol error: the connection must be dropped

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"State.{self.value.upper()}"


State.START = State("start")
State.GREETING = State("greeting")
State.READY = State("ready")
State.CLOSED = State("closed")
State.FAILED = State("failed")


if TYPE_CHECKING:

    class Codec(Protocol):
        """How one client spells messages; the conversation only asks for tags, refs and a few fields."""

        def build(self, tag: str, fields: "dict[str, Any]") -> "Any":
            """A message the conversation writes itself (hello, request, cancel, ping)."""

        def tag_of(self, msg: "Any") -> str:
            """A message's wire ``type``."""

        def get(self, msg: "Any", field: str) -> "Any":
            """A field's value, or None when absent."""

        def with_ref(self, msg: "Any", ref: str) -> "Any":
            """The message with ``ref`` set."""

        def with_field(self, msg: "Any", field: str, value: "Any") -> "Any":
            """The message (or call) with ``field`` set."""

        def encode(self, msg: "Any") -> bytes:
            """One wire line, newline included; ValueError when it cannot be encoded."""

        def decode(self, line: bytes) -> "Any":
            """One line (without its newline) as a message; BadReply for anything the protocol refuses."""


def large_keys(inp: "dict[str, Any]") -> list[str]:
    """The top-level input strings to send as parts (none while the strings total at most SPLIT_CHARS)."""
    sizes = {k: len(v) for k, v in inp.items() if type(k) is str and type(v) is str}
    if sum(sizes.values()) <= SPLIT_CHARS:
        return []
    return [k for k, n in sizes.items() if n >= MIN_UPLOAD_CHARS]


# --------------------------------------------------------------------------- events


class _Event:
    """Base of the events: plain slotted classes (``dataclasses`` costs the hook start-up time)."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(repr(getattr(self, k)) for k in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Welcomed(_Event):
    """The daemon accepted the hello."""

    __slots__ = ("message",)

    def __init__(self, message: "Any") -> None:
        self.message = message


class Waiting(_Event):
    """A request went to a person (``pending``); its decision follows, at the latest at the deadline."""

    __slots__ = ("id", "message", "ref")

    def __init__(self, ref: str, id: str, message: "Any") -> None:
        self.ref = ref
        self.id = id
        self.message = message


class Replied(_Event):
    """The one final reply to the call ``ref`` (a decision for a request)."""

    __slots__ = ("message", "ref")

    def __init__(self, ref: str, message: "Any") -> None:
        self.ref = ref
        self.message = message


class Refused(_Event):
    """The daemon answered the call ``ref`` with a protocol error; the connection goes on."""

    __slots__ = ("error", "ref")

    def __init__(self, ref: str, error: "ClientError") -> None:
        self.ref = ref
        self.error = error


class Pushed(_Event):
    """A message nobody asked for: a prompt, resolved or notice to a subscriber, or ``bye`` (then CLOSED)."""

    __slots__ = ("message",)

    def __init__(self, message: "Any") -> None:
        self.message = message


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: "Final" = _NeedData()  # no whole line buffered: feed ``receive_data``

Event = Welcomed | Waiting | Replied | Refused | Pushed


class _Call:
    __slots__ = ("pending_id", "tag")

    def __init__(self, tag: str) -> None:
        self.tag = tag  # the client message's tag
        self.pending_id: str | None = None  # a request a person is being asked about


# --------------------------------------------------------------------------- the machine


class Conversation:
    """One connection's client side. ``role`` and ``name`` go into the hello; refs are ``prefix`` + n."""

    def __init__(
        self, codec: "Codec", role: str, name: str, *, ref_prefix: str = "c", max_line: int = MAX_LINE_BYTES
    ) -> None:
        self.codec = codec
        self.role = role
        self.name = name
        self.state = State.START
        self.welcome: Any = None
        self.idle_timeout: float | None = None  # from the welcome: the driver keeps the connection alive
        self._prefix = ref_prefix
        self._counter = 0
        self._max_line = max_line
        self._buf = bytearray()
        self._scan = 0  # where a newline may still be in ``_buf``
        self._eof = False
        self._hello_ref: str | None = None
        self._calls: dict[str, _Call] = {}
        self._abandoned: dict[str, str] = {}  # calls given up (ref -> tag): their late replies are dropped
        self._outbox = bytearray()  # lines the conversation owes the daemon on its own (``data_to_send``)
        self._subscribed = False
        self._failure: NexusClientError | None = None

    # ---------------------------------------------------------------- calls in, bytes out

    def hello(self) -> bytes:
        """The first line: START -> GREETING."""
        if self.state is not State.START:
            raise RuntimeError(f"hello in state {self.state.value}")
        self._hello_ref = self._new_ref()
        data = self._encode(
            self.codec.build(
                "hello", {"proto": PROTOCOL_VERSION, "role": self.role, "name": self.name, "ref": self._hello_ref}
            )
        )
        self.state = State.GREETING
        return data

    def send_request(self, call: "Any", on_no_ui: str, max_wait: float | None = None) -> tuple[str, bytes]:
        """A tool call to decide: its ref (for ``Waiting`` / ``Replied``) and the lines to send (its large
        strings as ``part`` lines first, see SPLIT_CHARS). ``max_wait``: how long the caller will wait at
        most (a person may hold the ask up to it)."""
        fields: dict[str, Any] = {"call": call, "on_no_ui": on_no_ui}
        if max_wait is not None:
            fields["max_wait"] = max_wait
        inp = self.codec.get(call, "input")
        keys = large_keys(inp) if isinstance(inp, dict) else []
        if not keys:
            return self._open("request", self.codec.build("request", fields))
        self._check_open()
        smaller, uploads, omitted, data = dict(inp), {}, 0, bytearray()
        for key in keys:
            text: str = inp[key]
            smaller[key] = ""
            if len(text) > MAX_UPLOAD_CHARS:
                omitted += len(text.encode("utf-8", "surrogatepass"))
                continue
            uploads[key] = upload = self._new_ref()
            for i in range(0, len(text), PIECE_CHARS):
                data += self._encode(self.codec.build("part", {"upload": upload, "text": text[i : i + PIECE_CHARS]}))
        call = self.codec.with_field(call, "input", smaller)
        if omitted:
            call = self.codec.with_field(call, "omitted_bytes", omitted)
        fields["call"] = call
        if uploads:
            fields["uploads"] = uploads
        ref, line = self._open("request", self.codec.build("request", fields))
        return ref, bytes(data) + line

    def send_call(self, msg: "Any") -> tuple[str, bytes]:
        """Any other message that has a reply (``REPLIES``); its own ``ref`` is kept if it has one."""
        tag = self.codec.tag_of(msg)
        if tag in ("hello", "request"):
            raise ValueError(f"{tag} has its own method")
        return self._open(tag, msg)

    def keepalive(self) -> bytes:
        """A ``ping`` without a ref; its ``pong`` is swallowed."""
        self._check_open()
        return self._encode(self.codec.build("ping", {}))

    def give_up(self, ref: str) -> bytes:
        """The driver stopped waiting for ``ref`` (a timeout): forget it, drop its late reply, and return the
        line that cancels it if a person was being asked (else b"")."""
        call = self._calls.pop(ref, None)
        if call is None:
            return b""
        self._abandoned[ref] = call.tag
        if call.pending_id is None or self.state is not State.READY:
            return b""  # a request's pending that still comes is cancelled then (``data_to_send``)
        return self._cancel(call.pending_id)

    def data_to_send(self) -> bytes:
        """Lines the conversation decided to send by itself (the cancel of a request given up before its
        pending came); drivers send them after reading events. Empty most of the time."""
        data = bytes(self._outbox)
        self._outbox.clear()
        return data

    # ---------------------------------------------------------------- bytes in, events out

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the daemon; ``b""`` is the end of the stream."""
        if not data:
            self._eof = True
            return
        self._buf += data

    def next_event(self) -> "Event | _NeedData":
        """The next event, or NEED_DATA. Raises a NexusClientError for anything the protocol does not allow
        here (the conversation is FAILED from then on) and DaemonUnreachable once the stream has ended."""
        if self._failure is not None:
            raise self._failure
        while True:
            if self.state is State.CLOSED:
                raise DaemonUnreachable("the connection to nexusd is closed")
            line = self._next_line()
            if line is None:
                return NEED_DATA
            if not line.strip():
                continue  # blank lines are allowed on the wire
            try:
                try:
                    msg = self.codec.decode(line)
                except NexusClientError:
                    raise
                except Exception as e:  # a codec's own slip is still a reply nobody may act on
                    raise BadReply(f"undecodable reply from nexusd: {type(e).__name__}") from None
                event = self._handle(msg)
            except NexusClientError as e:
                self._fail(e)
                raise
            if event is not None:
                return event

    @property
    def open_calls(self) -> int:
        return len(self._calls)

    # ---------------------------------------------------------------- internals

    def _new_ref(self) -> str:
        self._counter += 1
        return f"{self._prefix}{self._counter}"

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self.state is State.CLOSED:
            raise DaemonUnreachable("the connection to nexusd is closed")
        if self.state is not State.READY:
            raise RuntimeError(f"a call in state {self.state.value}: say hello and wait for the welcome first")

    def _open(self, tag: str, msg: "Any") -> tuple[str, bytes]:
        self._check_open()
        if tag not in REPLIES:
            raise ValueError(f"{tag!r} is not a message with a reply")
        ref = self.codec.get(msg, "ref")
        if not isinstance(ref, str) or not ref or ref in self._calls or ref in self._abandoned:
            ref = self._new_ref()
        data = self._encode(self.codec.with_ref(msg, ref))
        self._calls[ref] = _Call(tag)
        if tag == "subscribe":
            self._subscribed = True
        return ref, data

    def _cancel(self, pending_id: str) -> bytes:
        cancel_ref = self._new_ref()
        self._abandoned[cancel_ref] = "cancel"  # its ack (or not_found, if decided meanwhile) matters to nobody
        return self._encode(self.codec.build("cancel", {"id": pending_id, "ref": cancel_ref}))

    def _encode(self, msg: "Any") -> bytes:
        try:
            return self.codec.encode(msg)
        except (ValueError, TypeError, RecursionError) as e:
            raise ValueError(f"cannot encode the message: {e}") from None

    def _fail(self, error: "NexusClientError") -> None:
        self._failure = error
        self.state = State.FAILED
        self._calls.clear()

    def _next_line(self) -> bytes | None:
        nl = self._buf.find(b"\n", self._scan)
        if nl < 0:
            self._scan = len(self._buf)
            if len(self._buf) > self._max_line:
                self._fail(BadReply("reply line too long"))
                raise self._failure  # type: ignore[misc]  # set just above
            if self._eof:
                self.state = State.CLOSED
                self._calls.clear()
                raise DaemonUnreachable("nexusd closed the connection")
            return None
        line = bytes(self._buf[:nl])
        del self._buf[: nl + 1]
        self._scan = 0
        return line

    def _handle(self, msg: "Any") -> "Event | None":
        tag = self.codec.tag_of(msg)
        ref = self.codec.get(msg, "ref")
        if ref is not None and not isinstance(ref, str):
            raise BadReply("a ref that is not a string")
        if self.state is State.START:
            raise BadReply(f"a {tag!r} before the hello")
        if self.state is State.GREETING:
            return self._greeting(tag, ref, msg)
        if ref is None:
            return self._unsolicited(tag, msg)
        if ref in self._abandoned:  # a late reply to a call given up: nobody waits for it
            if tag == "pending" and self._abandoned[ref] == "request":
                pending_id = self.codec.get(msg, "id")
                if isinstance(pending_id, str):  # a person would be asked for nobody: take it back
                    self._outbox += self._cancel(pending_id)
                return None
            del self._abandoned[ref]
            return None
        call = self._calls.get(ref)
        if call is None:
            raise BadReply(f"a {tag!r} for a call never made")
        if tag == "error":
            del self._calls[ref]
            if call.tag == "subscribe":
                self._subscribed = False
            return Refused(ref, _client_error(self.codec, msg))
        if call.tag == "request" and tag == "pending":
            if call.pending_id is not None:
                raise BadReply("a second pending for one request")
            pending_id = self.codec.get(msg, "id")
            if not isinstance(pending_id, str):
                raise BadReply("a pending without an id")
            call.pending_id = pending_id
            return Waiting(ref, pending_id, msg)
        if tag != REPLIES[call.tag]:
            raise BadReply(f"expected {REPLIES[call.tag]} for {call.tag}, got {tag}")
        del self._calls[ref]
        return Replied(ref, msg)

    def _greeting(self, tag: str, ref: "Any", msg: "Any") -> "Event":
        if tag == "error":  # refused at the door (protocol version, forbidden, ...): with or without our ref
            raise _client_error(self.codec, msg)
        if tag == "bye":
            raise DaemonUnreachable("nexusd is stopping")
        if tag != "welcome":
            raise BadReply(f"expected welcome, got {tag}")
        if ref not in (None, self._hello_ref):
            raise BadReply("a welcome for another hello")
        if self.codec.get(msg, "proto") != PROTOCOL_VERSION:
            raise BadReply("the welcome speaks another protocol version")
        if self.codec.get(msg, "role") != self.role:
            raise BadReply("the welcome grants another role")
        idle = self.codec.get(msg, "idle_timeout")
        self.idle_timeout = float(idle) if isinstance(idle, int | float) and idle > 0 else None
        self.welcome = msg
        self.state = State.READY
        return Welcomed(msg)

    def _unsolicited(self, tag: str, msg: "Any") -> "Event | None":
        if tag == "pong":
            return None  # the answer to a keep-alive
        if tag == "bye":
            self.state = State.CLOSED
            self._calls.clear()
            return Pushed(msg)
        if tag == "error":  # the daemon closing on us (idle, framing, forbidden)
            raise _client_error(self.codec, msg)
        if tag in PUSHES and self._subscribed:
            return Pushed(msg)
        raise BadReply(f"unexpected {tag!r} message")


def _client_error(codec: "Codec", msg: "Any") -> "ClientError":
    code = codec.get(msg, "code")
    text = codec.get(msg, "message")
    return ClientError(code if isinstance(code, str) else "?", text if isinstance(text, str) else "malformed error")
