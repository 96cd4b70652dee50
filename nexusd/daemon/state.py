"""The daemon's state, as one explicit object, and the ports through which its concerns reach each other.

``DaemonState`` holds what the request, answer, query and network concerns read and change: the policy
store, the pending table, sessions, connections and subscribers, grants, the audit log, the probe, the
decision pipeline and its pool, counters and limits. Each concern is built from it (and ``Replies``), never
from ``Server``; where one concern needs another (a request's deadline resolves through the answers, an
answer's allow is wrapped by the requests' ``decision``), it goes through the port named here, so no
module of ``nexusd/daemon`` imports a concern that imports it back (an import-linter contract keeps it so).
Everything here runs on the event loop.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from nexusd import locations
from nexusd import protocol as p
from nexusd.core.model import Session
from nexusd.core.policy.policy import Policy
from nexusd.daemon.audit import AuditLog
from nexusd.daemon.auditexport import exporter
from nexusd.daemon.connection import ClientErrorLog, Connection
from nexusd.daemon.guard import AGENTS_NAME, AgentRegistry
from nexusd.daemon.limits import RunawayLimiter
from nexusd.daemon.overrides import OVERRIDES_NAME, ModeOverrides
from nexusd.daemon.peer import ancestors
from nexusd.daemon.pending import PendingEntry, PendingTable
from nexusd.daemon.replies import Replies, Stats
from nexusd.decision.pipeline import Pipeline
from nexusd.decision.pool import FactPool
from nexusd.policy import gate
from nexusd.policy.grants import GrantTable
from nexusd.policy.memo import DecisionMemo
from nexusd.policy.store import PolicyStore

log = structlog.get_logger("nexusd")

MAX_PROMPT_TIMEOUT = 3600.0  # the policy loader's own bound on [providers.<name>] prompt_timeout

MAX_SESSIONS = 10_000


@dataclass
class Config:
    socket_path: Path
    config_dir: Path
    state_dir: Path
    managed_dir: Path
    pending_timeout: float = 30.0
    max_pending: int = 16_384
    max_pending_per_connection: int = 1_024
    max_line_bytes: int = p.MAX_LINE_BYTES
    hello_timeout: float = 10.0
    audit_max_bytes: int = 16 << 20
    audit_export: str | None = None  # journald[:SOCKET] | syslog[:SOCKET]: a copy of every audit line
    otel_endpoint: str | None = None  # an OTLP/HTTP collector: audit records as logs, decision counts (daemon/otel.py)
    otel_interval: float = 5.0
    decision_memo: int = 4096  # entries of the verified decision memo; 0: every call decided afresh
    watch_policy: bool = True  # reload when a global policy file changes (nexusd.daemon.watch)
    max_ui_output: int = 8 << 20  # unread bytes a subscribed UI may hold before it is dropped
    idle_timeout: float = 600.0  # a connection silent this long, with nothing pending, is closed; 0: never
    line_timeout: float = 30.0  # a line begun and not finished this long closes the connection; 0: never
    log_interval: float = 60.0  # client faults: one line per client per interval (connection.ClientErrorLog)
    log_max_lines: int = 20
    decision_workers: int = 4  # threads of the decision pool (nexusd/decision/pool.py)
    facts_deadline: float = 10.0  # seconds a call's facts (or its sandbox plan) may take: past it, denied


class RequestsPort(Protocol):
    """What other concerns use of the request lifecycle (``requests.RequestLifecycle``)."""

    def shape(
        self,
        verdict: p.Verdict,
        call: p.CallInfo,
        policy: Policy | None,
        on_no_ui: p.NoUi | None,
        conn: Connection | None,
    ) -> tuple[p.Verdict, bool]: ...


class AnswersPort(Protocol):
    """What other concerns use of the answers (``answers.Answers``)."""

    def resolve(
        self,
        entry: PendingEntry,
        decision: p.DecisionKind,
        source: p.Source,
        reason: str,
        *,
        notify_requester: bool = True,
        by: Connection | None = None,
        scope: p.Scope | None = None,
        message: str | None = None,
        abort: bool = False,
        label: str | None = None,
        edited: tuple[p.CallInfo, p.Verdict] | None = None,
        then: Callable[[], object] | None = None,
    ) -> p.Decision | None: ...


class QueriesPort(Protocol):
    """What other concerns use of the queries (``queries.Queries``): the sandbox probe's refresh."""

    probe_lock: anyio.Lock

    async def refresh_probe(self) -> p.SandboxProbe | None: ...


class AlertsPort(Protocol):
    """[notify]: telling a person an ask waits (``notify_person.PersonNotifier``)."""

    @property
    def waits(self) -> bool: ...

    def asked(self, rid: str, call: p.CallInfo, deadline: float) -> None: ...

    def resolved(self, rid: str) -> None: ...


class DaemonState:
    """Everything the daemon's concerns share, built once per daemon by ``Server``."""

    def __init__(
        self,
        config: Config,
        store: PolicyStore,
        *,
        probe_fn: Callable[[], p.SandboxProbe] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.probe_fn = probe_fn
        self.probe: p.SandboxProbe | None = None
        self.own_socket: str | None = None  # set by serve(): what agents' sandbox wrappers check for
        self.network: Any = None  # nexusd.daemon.network.NetworkGate, once serving
        self.stopping_now = False
        self.uid = os.geteuid()
        self.pid = os.getpid()
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.conns: set[Connection] = set()
        self.subscribers: set[Connection] = set()
        self.pending = PendingTable()
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.stats = Stats()
        # Verified verdicts of calls seen before (nexusd/policy/memo.py).
        self.memo = DecisionMemo(config.decision_memo) if config.decision_memo > 0 else None
        # The decision pipeline: facts in the pool (off the loop, with a deadline), the ruling on the loop.
        self.pool = FactPool(config.decision_workers)
        self.pipeline = Pipeline(store, pool=self.pool, memo=self.memo, facts_deadline=config.facts_deadline)
        self.grants = GrantTable(config.state_dir)
        self.overrides = ModeOverrides(config.state_dir / OVERRIDES_NAME)  # a person's modes, kept
        self.audit = AuditLog(
            config.state_dir / locations.AUDIT_NAME,
            max_bytes=config.audit_max_bytes,
            export=_exports(config),
        )
        self.errlog = ClientErrorLog(config.log_interval, config.log_max_lines)
        self.replies = Replies(self.audit, self.stats, self.errlog)
        self.daemon_ancestors = frozenset(ancestors(self.pid) or [self.pid, 0, 1]) | {0, 1}
        # who may not widen the gate (daemon/guard.py), kept across restarts in the state directory
        self.agents = AgentRegistry(self.daemon_ancestors, config.state_dir / AGENTS_NAME)
        self.limiter = RunawayLimiter()  # automatic allows per session and minute (daemon/limits.py)
        self.undo: Any = None  # nexusd.undo.service.UndoService, wired by Server (it spawns on the loop)
        # the concerns, wired by Server once built (each is built from this state)
        self.requests: RequestsPort
        self.answers: AnswersPort
        self.queries: QueriesPort
        self.alerts: AlertsPort

    # ------------------------------------------------------------------ shared services

    def reply_error(self, conn: Connection, code: p.ErrorCode, message: str, ref: str | None) -> None:
        self.replies.error(conn, code, message, ref)

    def client_fault(self, conn: Connection, event: str, **fields: Any) -> None:
        self.replies.client_fault(conn, event, **fields)

    def audit_refuses(self) -> bool:
        """[audit] on_failure = "deny" while the audit log cannot be written: what cannot be recorded is denied."""
        return self.audit.failing is not None and self.store.policy.audit_on_failure == "deny"

    def strict_audit(self) -> bool:
        """[audit] on_failure = "deny": an allow is sent only once its record is on disk (audit.py)."""
        return self.store.policy.audit_on_failure == "deny"

    def audit_refusal(self) -> str:
        return (
            f'the audit log cannot be written ({self.audit.failing}) and [audit] on_failure = "deny": '
            "nothing is allowed until it can"
        )

    def prompt_timeout(self, call: p.CallInfo, policy: Policy | None) -> float:
        """The provider's ``prompt_timeout`` in the policy the call was decided with, else --pending-timeout."""
        try:
            if policy is None:
                policy = self.store.policy_for(gate.workspace_of(call))
            configured = policy.provider(call.provider).prompt_timeout
        except Exception:  # a policy problem costs the setting, never the request
            log.exception("prompt_timeout lookup failed; using the default")
            return self.config.pending_timeout
        if configured is None or not 0 < configured <= MAX_PROMPT_TIMEOUT:
            return self.config.pending_timeout
        return float(configured)

    def from_agent(self, conn: Connection) -> bool:
        try:
            return self.agents.from_agent(conn.peer.pid, conn.peer.start)
        except Exception:  # cannot tell: fail closed
            log.exception("agent ancestry check failed")
            return True

    def session_for(self, call: p.CallInfo) -> Session:
        s = self.sessions.get(call.session)
        if s is None:
            s = Session(id=call.session, provider=call.provider, override_mode=self.overrides.get(call.session))
            self.sessions[call.session] = s
            if len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)  # oldest; its session rules are forgotten (fail closed)
        else:
            self.sessions.move_to_end(call.session)
        s.provider = call.provider
        if call.mode is not None:
            s.agent_mode = call.mode
        s.grant_rules = self.grants.timed_rules(time.time())  # exactly those valid now
        alerts = getattr(self, "alerts", None)
        s.person_reachable = bool(self.subscribers) or bool(alerts is not None and alerts.waits)
        return s

    def session_by_id(self, sid: str) -> Session:
        s = self.sessions.get(sid)
        if s is None:
            s = Session(id=sid, override_mode=self.overrides.get(sid))
            self.sessions[sid] = s
            if len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)
        return s


def _exports(config: Config) -> Any:
    """The audit log's copies: journald/syslog, an OpenTelemetry collector, both, or none."""
    out = [exporter(config.audit_export)] if config.audit_export else []
    if config.otel_endpoint:
        from nexusd.daemon.otel import OtlpExport, combined

        out.append(OtlpExport(config.otel_endpoint, interval=config.otel_interval))
        return combined(out)
    return out[0] if out else None
