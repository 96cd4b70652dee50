"""The one writer of what the daemon says back and what it records: error replies and audit records.

Every concern (requests, answers, queries, the network gate, the dispatcher) sends its errors and writes
its audit records through ``Replies``, so the shape of an error line, what a client fault costs in the
log, and what an audit record holds are stated once.
"""

from __future__ import annotations

import itertools
import secrets
import time
from typing import Any

from nexusd import protocol as p
from nexusd.core.tools import tool_info
from nexusd.daemon.audit import AuditLog, Confirm
from nexusd.daemon.connection import ClientErrorLog, Connection
from nexusd.daemon.peer import PeerCred
from nexusd.daemon.pending import PendingEntry

_CLIENT_FAULTS = frozenset(
    {"bad_json", "line_too_long", "invalid_message", "unknown_type", "wrong_role", "protocol_version"}
)


class Stats:
    """The daemon's counters (``nexusctl status``)."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}

    def count(self, decision: str, source: str) -> None:
        key = f"{decision}/{source}"
        self.counters[key] = self.counters.get(key, 0) + 1

    def decided(self, ns: int) -> None:
        """``gate/calls`` and ``gate/ns``: the time a request's decision took (facts, ruling, rounds), summed
        (``nexusctl status`` and the benchmark split a call's cost into the decision and the rest)."""
        counters = self.counters
        counters["gate/calls"] = counters.get("gate/calls", 0) + 1
        counters["gate/ns"] = counters.get("gate/ns", 0) + ns


class Replies:
    """Error replies and audit records, for every concern of the daemon."""

    def __init__(self, audit: AuditLog, stats: Stats, errlog: ClientErrorLog) -> None:
        self.audit, self.stats, self.errlog = audit, stats, errlog
        # Audit ids of calls settled at once: unique, not secret (nobody answers them), so a random prefix
        # per daemon run and a counter, not a getrandom syscall per call. Pending ids stay 128-bit random.
        self._id_prefix = secrets.token_hex(8)
        self._id_counter = itertools.count(1)

    def error(self, conn: Connection, code: p.ErrorCode, message: str, ref: str | None) -> None:
        if code in _CLIENT_FAULTS:
            self.client_fault(conn, "protocol error", code=code, message=message)
        conn.send(p.encode(p.Error(code=code, message=message, ref=ref)))

    def client_fault(self, conn: Connection, event: str, **fields: Any) -> None:
        """Anything a client can make the daemon log goes through the rate-limited ClientErrorLog."""
        self.errlog.note(conn.label, event, fields, time.monotonic())

    def record_id(self) -> str:
        return f"{self._id_prefix}{next(self._id_counter):016x}"

    def self_approval_refused(self, conn: Connection, msg: p.Answer, entry: PendingEntry) -> None:
        """An answer from an agent's process tree (``guard.answered_by_its_agent``): logged as the client's
        fault, audited with the answering pid, refused with the reason; the ask stays pending."""
        self.client_fault(conn, "self-approval refused", request=msg.id)
        self.record(
            msg.id,
            entry.call,
            p.Decision(msg.decision, "answer refused: it came from the requesting agent's own process tree", "user"),
            entry.started,
            peer=entry.conn.peer,
            answer_pid=conn.peer.pid,
            scope=msg.scope,
            event="self_approval_refused",
        )
        self.error(
            conn,
            "self_approval",
            "refused: the answering process descends from an agent (the one that made the request, or "
            "another); a person answers from a terminal or UI outside the agents",
            msg.ref,
        )

    def record(
        self,
        rid: str,
        call: p.CallInfo,
        decision: p.Decision,
        started: float,
        *,
        peer: PeerCred | None,
        answer_pid: int | None = None,
        scope: p.Scope | None = None,
        event: str = "decision",
        trace: list[p.TraceStep] | None = None,
        requirement: str | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        """``confirm``: under [audit] on_failure = "deny", what sends the allow once its record is on disk."""
        self.stats.count(decision.decision, decision.source)
        mode = next((s.outcome for s in trace or () if s.step == "mode"), None)  # the engine's first step
        self.audit.write(
            p.AuditRecord(
                time=time.time(),
                id=rid,
                provider=call.provider,
                session=call.session,
                tool=call.tool,
                summary="",  # the writer thread summarizes call.input, off the loop
                decision=decision.decision,
                source=decision.source,
                reason=decision.reason,
                cwd=call.cwd,
                rule=decision.rule,
                rule_origin=decision.rule_origin,
                peer_pid=peer.pid if peer else None,
                agent_pid=call.agent_pid if call.agent_pid is not None else (peer.ppid if peer else None),
                answered_by=decision.answered_by,
                answer_pid=answer_pid,
                scope=scope,
                tier=tool_info(call.tool, call.provider).tier,
                mode=mode,
                requirement=requirement,
                message=decision.message,
                abort=decision.abort,
                latency_ms=round((time.monotonic() - started) * 1000, 3),
                event=event,
                workspace=call.workspace,
                subagent_id=call.subagent_id,
                subagent_type=call.subagent_type,
                trace=trace or [],
            ),
            call.input,
            confirm=confirm,
        )  # no log line besides: the audit trail is the record of every decision
