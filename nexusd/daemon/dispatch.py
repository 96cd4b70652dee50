"""Dispatch: one client line to the concern that handles it.

A line is checked (NUL, UTF-8, JSON, the message's shape), the first must be a valid ``hello`` of this
protocol version, each role may send only its own messages (``ROLE_MESSAGES``), and a message that widens
the gate (``guard.widens``) from an agent's process tree is refused and audited. Then the concern's handler
runs: inline when it is a plain function, as a task when it returns a coroutine; a handler's exception
costs one ``internal`` error reply, never the daemon.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from nexusd import __version__
from nexusd import protocol as p
from nexusd.daemon.connection import Connection
from nexusd.daemon.guard import widens

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")

Handler = Callable[[Connection, Any], Coroutine[Any, Any, None] | None]

# Which messages each role may send (Hello is always allowed first). Agents only submit and ask about
# their own calls; UIs watch and answer; admin (nexusctl) may do everything but submit tool calls.
ROLE_MESSAGES: dict[str, frozenset[type]] = {
    "agent": frozenset(
        {
            p.Request,
            p.Part,
            p.Cancel,
            p.Check,
            p.Status,
            p.SandboxPlan,  # nexusctl run
            p.SandboxReport,
            p.Ping,
            p.SessionEnd,
        }
    ),  # and the sandbox's scrub reporting what it refused
    "ui": frozenset(
        {
            p.Subscribe,
            p.Answer,
            p.SetMode,
            p.Status,
            p.Check,
            p.Rules,
            p.RuleChange,
            p.TrustChange,
            p.Probe,
            p.SandboxPlan,
            p.SandboxReport,
            p.Audit,
            p.Reload,
            p.Ping,
            p.Grants,
            p.RevokeGrant,
            p.SessionEnd,
            p.History,  # undo (nexusd/undo): a person's review and rewind
            p.Rewind,
            p.Hold,
            p.RuleCheck,
        }
    ),
}
ROLE_MESSAGES["admin"] = ROLE_MESSAGES["ui"] | {p.Cancel}


class _RefOnly(msgspec.Struct):
    """Recovers the ``ref`` of a message that failed validation, so the error can carry it."""

    ref: str | None = None


_ref_decoder = msgspec.json.Decoder(_RefOnly)


def _clean(text: str, limit: int = 100) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


class Dispatch:
    """Lines to messages to handlers, with the checks every message passes first."""

    def __init__(self, state: DaemonState, handlers: dict[type, Handler]) -> None:
        self.state = state
        self.handlers = handlers

    def framing_error(self, conn: Connection, code: p.ErrorCode, message: str) -> None:
        self.state.client_fault(conn, "framing error; closing", code=code, message=message)
        conn.send(p.encode(p.Error(code=code, message=message)))

    def on_line(self, conn: Connection, line: bytes) -> bool | Coroutine[Any, Any, None]:
        """Handle one line: True when done, False to close the connection, or a coroutine still to await."""
        if b"\0" in line:
            self.framing_error(conn, "bad_json", "NUL byte in line")
            return False
        if not line.isascii():
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                self.framing_error(conn, "bad_json", "line is not valid UTF-8")
                return False
        if not line.strip():
            return True  # blank lines are ignored
        try:
            msg = p.decode_client(line)
        except msgspec.ValidationError as e:
            text = str(e)
            if conn.role is None:
                return self._bad_hello(conn, text, line)
            code: p.ErrorCode = "unknown_type" if "`$.type`" in text else "invalid_message"
            self.state.reply_error(conn, code, text, _ref_of(line))
            return True
        except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as e:
            if conn.role is None:
                return self._bad_hello(conn, str(e), line)
            self.state.reply_error(conn, "bad_json", str(e), _ref_of(line))
            return True
        kind = type(msg)
        if conn.role is None:
            if not isinstance(msg, p.Hello):
                self.state.reply_error(conn, "protocol_version", "the first message must be hello", msg.ref)
                return False
            return self._on_hello(conn, msg)
        if kind is p.Hello:
            self.state.reply_error(conn, "invalid_message", "already said hello", msg.ref)
            return True
        if kind not in ROLE_MESSAGES[conn.role]:
            self.state.reply_error(
                conn, "wrong_role", f"role {conn.role} may not send {msg.__struct_config__.tag}", msg.ref
            )
            return True
        # an Answer is checked in answers.on_answer, where the refusal is audited against its request
        if kind is not p.Request and kind is not p.Answer and widens(msg) and self.state.from_agent(conn):
            self._refuse_from_agent(conn, msg)
            return True
        try:
            outcome = self.handlers[kind](conn, msg)
        except Exception as e:  # a bug must cost one reply, not the daemon
            log.exception("handler failed", type=kind.__name__)
            self.state.reply_error(conn, "internal", f"internal error: {type(e).__name__}", msg.ref)
            return True
        if outcome is None:
            return True
        return self._guarded(conn, kind, msg.ref, outcome)

    def _refuse_from_agent(self, conn: Connection, msg: Any) -> None:
        """A message that widens the gate, from inside an agent's process tree: refused, logged, audited."""
        tag = msg.__struct_config__.tag
        self.state.client_fault(conn, "gate change from an agent refused", message=tag)
        body = msgspec.to_builtins(msg)
        call = p.CallInfo(
            provider="nexusd", session=str(body.get("session") or "-"), tool=f"nexusd.{tag}", input=body, cwd="/"
        )
        self.state.replies.record(
            self.state.replies.record_id(),
            call,
            p.Decision("deny", f"{tag} refused: it came from an agent's process tree", "user"),
            time.monotonic(),
            peer=conn.peer,
            event="gate_control_refused",
        )
        self.state.reply_error(
            conn,
            "self_approval",
            f"refused: {tag} widens what agents may do, and this process descends from an agent; a person must "
            "do it from a terminal or UI outside the agents",
            msg.ref,
        )

    async def _guarded(self, conn: Connection, kind: type, ref: str | None, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception as e:  # a bug must cost one reply, not the daemon
            log.exception("handler failed", type=kind.__name__)
            self.state.reply_error(conn, "internal", f"internal error: {type(e).__name__}", ref)

    def _bad_hello(self, conn: Connection, why: str, line: bytes) -> bool:
        """A first line that is not a valid hello (wrong types, missing fields, unknown role, not JSON):
        ``protocol_version``, and the connection is closed, as for any other first message."""
        self.state.reply_error(
            conn, "protocol_version", f"the first message must be a valid hello: {why}", _ref_of(line)
        )
        return False

    def _on_hello(self, conn: Connection, msg: p.Hello) -> bool:
        if msg.proto != p.PROTOCOL_VERSION:
            self.state.reply_error(
                conn, "protocol_version", f"daemon speaks protocol {p.PROTOCOL_VERSION}, not {msg.proto}", msg.ref
            )
            return False
        conn.role = msg.role
        conn.name = _clean(msg.name)
        conn.send(
            p.encode(
                p.Welcome(
                    proto=p.PROTOCOL_VERSION,
                    version=__version__,
                    role=msg.role,
                    sandbox=self.state.probe,
                    idle_timeout=(self.state.config.idle_timeout or None) if msg.role != "agent" else None,
                    ref=msg.ref,
                )
            )
        )
        return True


def _ref_of(line: bytes) -> str | None:
    try:
        return _ref_decoder.decode(line).ref
    except Exception:
        return None
