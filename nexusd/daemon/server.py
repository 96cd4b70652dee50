"""The daemon's dispatcher and lifecycle: accept, roles, every message handler, sessions, decisions, audit, shutdown.

It drives the policy (``nexusd.policy.gate.decide``) and owns state and time; it never decides itself.
Every path that is not an explicit allow from the policy or a person ends in deny. The wire side of a
client lives in ``connection.py``; requests waiting for a person, and their deadlines, in ``pending.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import signal
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import anyio.to_thread
import msgspec
import structlog

from nexusd import __version__, locations
from nexusd import protocol as p
from nexusd.core.engine import HUMAN_FLAG
from nexusd.core.model import Session
from nexusd.core.policy.modes import MODES, resolve
from nexusd.core.policy.policy import Policy
from nexusd.core.tools import tool_info
from nexusd.daemon.audit import AuditLog, read_tail
from nexusd.daemon.auditexport import exporter
from nexusd.daemon.connection import ClientErrorLog, Connection
from nexusd.daemon.guard import AgentRegistry, widens
from nexusd.daemon.limits import RunawayLimiter
from nexusd.daemon.listener import BoundSocket
from nexusd.daemon.notify import Notifier
from nexusd.daemon.notify_person import PersonNotifier
from nexusd.daemon.peer import PeerCred, ancestors, parent_pid, peer_credentials, resolve_agent
from nexusd.daemon.pending import PendingEntry, PendingTable, pack
from nexusd.policy import gate
from nexusd.policy.edits import EDITABLE_PROVIDERS, MERGING_PROVIDERS, widening
from nexusd.policy.grants import MAX_DURATION, GrantTable, Use
from nexusd.policy.memo import DecisionMemo
from nexusd.policy.store import PolicyStore
from nexusd.sandbox.plan import SHELL_TOOLS as _plan_shell_tools

if TYPE_CHECKING:
    from nexusd.daemon.network import NetworkGate

log = structlog.get_logger("nexusd")

# Which messages each role may send (Hello is always allowed first). Agents only submit and ask about
# their own calls; UIs watch and answer; admin (nexusctl) may do everything but submit tool calls.
MAX_VIOLATIONS, MAX_VIOLATION_CHARS = 20, 1000  # per sandbox report
ROLE_MESSAGES: dict[str, frozenset[type]] = {
    "agent": frozenset({p.Request, p.Cancel, p.Check, p.Status, p.SandboxPlan,  # nexusctl run
                        p.SandboxReport, p.Ping, p.SessionEnd}),  # and the sandbox's scrub reporting what it refused
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
        }
    ),
}
ROLE_MESSAGES["admin"] = ROLE_MESSAGES["ui"] | {p.Cancel}

SHELL_TOOLS = frozenset(
    {"Bash", "run_shell_command", "shell", "execute_command", "execute_bash", "local_shell", "container.exec"}
)
MAX_SESSIONS = 10_000
WRAPPED = frozenset(_plan_shell_tools)  # the shell tools the sandbox wraps (sandbox/plan.py): planned with the probe
MAX_AUDIT_QUERY = 5_000
MAX_PROMPT_TIMEOUT = 3600.0  # the policy loader's own bound on [providers.<name>] prompt_timeout


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
    decision_memo: int = 4096  # entries of the verified decision memo; 0: every call decided afresh
    watch_policy: bool = True  # reload when a global policy file changes (nexusd.daemon.watch)
    max_ui_output: int = 8 << 20  # unread bytes a subscribed UI may hold before it is dropped
    idle_timeout: float = 600.0  # a connection silent this long, with nothing pending, is closed; 0: never
    line_timeout: float = 30.0  # a line begun and not finished this long closes the connection; 0: never
    log_interval: float = 60.0  # client faults: one line per client per interval (connection.ClientErrorLog)
    log_max_lines: int = 20


class _RefOnly(msgspec.Struct):
    """Recovers the ``ref`` of a message that failed validation, so the error can carry it."""

    ref: str | None = None


_ref_decoder = msgspec.json.Decoder(_RefOnly)

_json_encoder = msgspec.json.Encoder()


@dataclass
class Stats:
    counters: dict[str, int] = field(default_factory=dict)

    def count(self, decision: str, source: str) -> None:
        key = f"{decision}/{source}"
        self.counters[key] = self.counters.get(key, 0) + 1


def _allowed_because_sandboxed(verdict: p.Verdict) -> bool:
    """The gate's sandbox auto-allow step turned an ask into this allow (the step is kept in every trace)."""
    return any(t.step == "sandbox" and t.outcome == "allow" for t in verdict.trace)


def _daemon_steps(wanted: str, d: p.Decision) -> list[p.TraceStep]:
    """The daemon's own steps after the verdict: a sandbox wrap that failed, or a changed input sent back."""
    if wanted == "allow" and d.decision == "deny":
        return [p.TraceStep("wrap", "deny", d.reason)]
    if d.decision == "allow" and d.updated_input is not None:
        return [p.TraceStep("wrap", "updated", "the agent runs a changed input (sandbox wrapping or a person's edit)")]
    return []


def _is_shell(call: p.CallInfo, verdict: p.Verdict | None) -> bool:
    if verdict is not None and verdict.details is not None:
        return verdict.details.kind == "shell"
    return call.tool in SHELL_TOOLS


def _clean(text: str, limit: int = 100) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


class Server:
    def __init__(
        self,
        config: Config,
        store: PolicyStore,
        *,
        notifier: Notifier | None = None,
        probe_fn: Callable[[], p.SandboxProbe] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.notifier = notifier or Notifier(None)
        # [notify]: desktop notifications and webhooks for asks nobody is looking at (notify_person.py)
        self.alerts = PersonNotifier(lambda: self.store.policy.notify, self._deny_from_notification)
        self.probe_fn = probe_fn
        self.probe: p.SandboxProbe | None = None
        self._probe_lock = anyio.Lock()
        self._own_socket: str | None = None  # set by serve(): what agents' sandbox wrappers check for
        self.uid = os.geteuid()
        self.pid = os.getpid()
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.conns: set[Connection] = set()
        self.subscribers: set[Connection] = set()
        self.pending = PendingTable()
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.stats = Stats()
        # Audit ids of calls settled at once: unique, not secret (nobody answers them), so a random prefix
        # per daemon run and a counter, not a getrandom syscall per call. Pending ids stay 128-bit random.
        self._id_prefix = secrets.token_hex(8)
        self._id_counter = itertools.count(1)
        # Verified verdicts of calls seen before (nexusd/policy/memo.py).
        self.memo = DecisionMemo(config.decision_memo) if config.decision_memo > 0 else None
        self.grants = GrantTable(config.state_dir)
        self._grant_timers: dict[str, asyncio.TimerHandle] = {}
        self.audit = AuditLog(config.state_dir / locations.AUDIT_NAME, max_bytes=config.audit_max_bytes,
                              export=exporter(config.audit_export) if config.audit_export else None)
        self.errlog = ClientErrorLog(config.log_interval, config.log_max_lines)
        self._tg: anyio.abc.TaskGroup | None = None
        self.network: NetworkGate | None = None  # once serving
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_cid = 0
        self._stopping = False
        self._status_dirty = False
        self._daemon_ancestors = frozenset(ancestors(self.pid) or [self.pid, 0, 1]) | {0, 1}
        self.agents = AgentRegistry(self._daemon_ancestors)  # who may not widen the gate (daemon/guard.py)
        self.limiter = RunawayLimiter()  # automatic allows per session and minute (daemon/limits.py)
        # Plain functions answer inline; coroutine functions (policy, threads) get a task.
        self._handlers: dict[type, Callable[[Connection, Any], Coroutine[Any, Any, None] | None]] = {
            p.Request: self._on_request,
            p.Cancel: self._on_cancel,
            p.Subscribe: self._on_subscribe,
            p.Answer: self._on_answer,
            p.Status: self._on_status,
            p.Check: self._on_check,
            p.SetMode: self._on_set_mode,
            p.Reload: self._on_reload,
            p.Rules: self._on_rules,
            p.RuleChange: self._on_rule_change,
            p.TrustChange: self._on_trust_change,
            p.Probe: self._on_probe,
            p.SandboxPlan: self._on_sandbox_plan,
            p.SandboxReport: self._on_sandbox_report,
            p.Audit: self._on_audit,
            p.Ping: self._on_ping,
            p.Grants: self._on_grants,
            p.RevokeGrant: self._on_revoke_grant,
            p.SessionEnd: self._on_session_end,
        }

    # ------------------------------------------------------------------ lifecycle

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """A short task outside the task group (cheaper to start); ``serve`` cancels leftovers at the end."""
        task = asyncio.get_running_loop().create_task(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self, bound: BoundSocket) -> None:
        """Run until SIGTERM/SIGINT (or ``stop()``); the caller has already bound the socket."""
        self.audit.start()
        # the socket an agent's sandbox wrapper checks for (None when inherited: its path is not ours)
        self._own_socket = str(bound.path.absolute()) if bound.path is not None else None
        errors = self.store.load()
        for err in errors:
            log.error("policy error", error=err)
        loop = asyncio.get_running_loop()
        for err in self.grants.load(time.time()):
            log.error("grants error", error=err)
        for g in self.grants.timed():
            self._arm_grant(g.id, g.expires or 0.0)
        listener: asyncio.AbstractServer | None = None
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self.pending.run_timer, self._expire)
                tg.start_soon(self._sweep)
                # Handlers in place before READY=1: systemd may send SIGHUP (reload) the moment it
                # sees READY, and SIGHUP's default action would kill the daemon.
                await tg.start(self._signal_loop, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
                # A plain asyncio server: one Protocol object per connection, no task per idle connection.
                listener = await loop.create_unix_server(lambda: Connection(self), sock=bound.sock, backlog=4096)
                if self.probe_fn is not None:
                    tg.start_soon(self._refresh_probe)
                if self.notifier.enabled:
                    tg.start_soon(self._notify_loop)
                tg.start_soon(self.alerts.run)
                if self.config.watch_policy:
                    from nexusd.daemon.watch import watch_policy

                    tg.start_soon(watch_policy, lambda: [f for _, f in self.store.layer_files()], self.reload)
                tg.start_soon(self._run_network)
                self.notifier.ready(self._status_text())
                log.info(
                    "listening",
                    socket=str(bound.path) if bound.path else "<inherited>",
                    pid=self.pid,
                    version=__version__,
                    pending_timeout=self.config.pending_timeout,
                )
        finally:
            if listener is not None:
                listener.close()
            for task in list(self._tasks):
                task.cancel()
            for conn in list(self.conns):
                conn.kill()
            self.audit.close()
            log.info("stopped")

    async def _run_network(self) -> None:
        """The egress proxy of filtered sandboxes (nexusd/daemon/network.py), started without holding up the
        daemon's start and retried if it cannot start (out of descriptors): until it runs, filtered
        sandboxes get no network."""
        delay = 0.5
        while not self._stopping:
            try:
                from nexusd.daemon.network import NetworkGate  # an import needs a descriptor too

                gate_ = NetworkGate(self)
                async with anyio.create_task_group() as tg:
                    await tg.start(gate_.proxy.serve)
                    self.network = gate_
                return
            except Exception:
                self.network = None
                log.exception("the network proxy stopped or did not start: filtered sandboxes get no network")
            await anyio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _signal_loop(self, signals: set[signal.Signals], *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(*signals) as received:
            task_status.started()
            async for signum in received:
                if signum == signal.SIGHUP:
                    await self.reload()
                    continue
                log.info("signal received; stopping", signal=signal.Signals(signum).name)
                await self.stop("daemon stopping")
                return

    async def stop(self, reason: str) -> None:
        """Deny every pending request, say Bye to everyone, and end the task group."""
        if self._stopping:
            return
        self._stopping = True
        self.notifier.stopping()
        for entry in list(self.pending.values()):
            self._resolve(entry, "deny", "error", reason)
        bye = p.encode(p.Bye(reason=reason))
        for conn in list(self.conns):
            conn.post(bye)
        with anyio.move_on_after(2.0):
            while any(c.transport is not None and c.transport.get_write_buffer_size() for c in self.conns):
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(self.audit.flush)
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def accepted(self, conn: Connection) -> None:
        """At accept: the kernel's word on who connected; a stranger gets one error line and is closed."""
        assert conn.transport is not None
        try:
            cred = peer_credentials(conn.transport.get_extra_info("socket"))
        except OSError as e:
            self.errlog.note("unknown peer", "peer credentials unavailable; refusing", {"error": str(e)},
                             time.monotonic())
            self._refuse(conn, "peer credentials unavailable")
            return
        if cred.uid != self.uid:
            self.errlog.note(f"uid {cred.uid} (pid {cred.pid})", "refused a peer of another uid", {},
                             time.monotonic())
            self._refuse(conn, "only processes of the daemon's user are served")
            return
        conn.peer = PeerCred(cred.uid, cred.gid, cred.pid, parent_pid(cred.pid))
        self._next_cid += 1
        conn.cid = self._next_cid
        self.conns.add(conn)
        conn.timer = asyncio.get_running_loop().call_later(self.config.hello_timeout, conn.hello_expired)

    def _refuse(self, conn: Connection, message: str) -> None:
        assert conn.transport is not None
        conn.transport.write(p.encode(p.Error(code="forbidden", message=message)))
        conn.close_politely()  # never entered self.conns: nothing to undo

    def detached(self, conn: Connection) -> None:
        self.conns.discard(conn)
        self.subscribers.discard(conn)
        if conn.pending:
            for rid in list(conn.pending):
                entry = self.pending.get(rid)
                if entry is not None:
                    self._resolve(entry, "deny", "cancelled", "the requester disconnected", notify_requester=False)
        conn.pending = None

    def framing_error(self, conn: Connection, code: p.ErrorCode, message: str) -> None:
        self.client_fault(conn, "framing error; closing", code=code, message=message)
        conn.send(p.encode(p.Error(code=code, message=message)))

    def client_fault(self, conn: Connection, event: str, **fields: Any) -> None:
        """Anything a client can make the daemon log goes through the rate-limited ClientErrorLog."""
        self.errlog.note(conn.label, event, fields, time.monotonic())

    async def _sweep(self) -> None:
        """Close stalled connections (idle, a line never finished, a UI that stopped reading) and end the error
        log's windows."""
        cfg = self.config
        limits = [t for t in (cfg.idle_timeout, cfg.line_timeout) if t > 0]
        tick = min(1.0, max(0.02, min(limits) / 4)) if limits else 1.0
        while True:
            await anyio.sleep(tick)
            now = time.monotonic()
            try:
                for conn in list(self.conns):  # also: a UI over --max-ui-output that stopped reading is dropped
                    conn.check_timeouts(now, cfg.idle_timeout, cfg.line_timeout)
                self.errlog.flush(now)
            except Exception:  # a bug here must cost one sweep, never the daemon
                log.exception("connection sweep failed")

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
            self._reply_error(conn, code, text, _ref_of(line))
            return True
        except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as e:
            if conn.role is None:
                return self._bad_hello(conn, str(e), line)
            self._reply_error(conn, "bad_json", str(e), _ref_of(line))
            return True
        kind = type(msg)
        if conn.role is None:
            if not isinstance(msg, p.Hello):
                self._reply_error(conn, "protocol_version", "the first message must be hello", msg.ref)
                return False
            return self._on_hello(conn, msg)
        if kind is p.Hello:
            self._reply_error(conn, "invalid_message", "already said hello", msg.ref)
            return True
        if kind not in ROLE_MESSAGES[conn.role]:
            self._reply_error(
                conn, "wrong_role", f"role {conn.role} may not send {msg.__struct_config__.tag}", msg.ref
            )
            return True
        # an Answer is checked in _on_answer, where the refusal is audited against its request
        if kind is not p.Request and kind is not p.Answer and widens(msg) and self._from_agent(conn):
            self._refuse_from_agent(conn, msg)
            return True
        try:
            outcome = self._handlers[kind](conn, msg)
        except Exception as e:  # a bug must cost one reply, not the daemon
            log.exception("handler failed", type=kind.__name__)
            self._reply_error(conn, "internal", f"internal error: {type(e).__name__}", msg.ref)
            return True
        if outcome is None:
            return True
        return self._guarded(conn, kind, msg.ref, outcome)

    def _from_agent(self, conn: Connection) -> bool:
        try:
            return self.agents.from_agent(conn.peer.pid)
        except Exception:  # cannot tell: fail closed
            log.exception("agent ancestry check failed")
            return True

    def _refuse_from_agent(self, conn: Connection, msg: Any) -> None:
        """A message that widens the gate, from inside an agent's process tree: refused, logged, audited."""
        tag = msg.__struct_config__.tag
        self.client_fault(conn, "gate change from an agent refused", message=tag)
        body = msgspec.to_builtins(msg)
        call = p.CallInfo(provider="nexusd", session=str(body.get("session") or "-"), tool=f"nexusd.{tag}",
                          input=body, cwd="/")
        self._record(self._record_id(), call,
                     p.Decision("deny", f"{tag} refused: it came from an agent's process tree", "user"),
                     time.monotonic(), peer=conn.peer, event="gate_control_refused")
        self._reply_error(
            conn, "self_approval",
            f"refused: {tag} widens what agents may do, and this process descends from an agent; a person must "
            "do it from a terminal or UI outside the agents",
            msg.ref,
        )

    async def _guarded(self, conn: Connection, kind: type, ref: str | None, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception as e:  # a bug must cost one reply, not the daemon
            log.exception("handler failed", type=kind.__name__)
            self._reply_error(conn, "internal", f"internal error: {type(e).__name__}", ref)

    def _reply_error(self, conn: Connection, code: p.ErrorCode, message: str, ref: str | None) -> None:
        if code in _CLIENT_FAULTS:
            self.client_fault(conn, "protocol error", code=code, message=message)
        conn.send(p.encode(p.Error(code=code, message=message, ref=ref)))

    def _bad_hello(self, conn: Connection, why: str, line: bytes) -> bool:
        """A first line that is not a valid hello (wrong types, missing fields, unknown role, not JSON):
        ``protocol_version``, and the connection is closed, as for any other first message."""
        self._reply_error(conn, "protocol_version", f"the first message must be a valid hello: {why}", _ref_of(line))
        return False

    def _on_ping(self, conn: Connection, msg: p.Ping) -> None:
        conn.send(p.encode(p.Pong(ref=msg.ref)))

    def _on_hello(self, conn: Connection, msg: p.Hello) -> bool:
        if msg.proto != p.PROTOCOL_VERSION:
            self._reply_error(
                conn, "protocol_version", f"daemon speaks protocol {p.PROTOCOL_VERSION}, not {msg.proto}", msg.ref
            )
            return False
        conn.role = msg.role
        conn.name = _clean(msg.name)
        conn.send(
            p.encode(
                p.Welcome(proto=p.PROTOCOL_VERSION, version=__version__, role=msg.role, sandbox=self.probe,
                          idle_timeout=(self.config.idle_timeout or None) if msg.role != "agent" else None,
                          ref=msg.ref)
            )
        )
        return True

    # ------------------------------------------------------------------ sessions

    def _session(self, call: p.CallInfo) -> Session:
        s = self.sessions.get(call.session)
        if s is None:
            s = Session(id=call.session, provider=call.provider)
            self.sessions[call.session] = s
            if len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)  # oldest; its session rules are forgotten (fail closed)
        else:
            self.sessions.move_to_end(call.session)
        s.provider = call.provider
        if call.mode is not None:
            s.agent_mode = call.mode
        s.grant_rules = self.grants.timed_rules(time.time())  # exactly those valid now
        return s

    def _session_by_id(self, sid: str) -> Session:
        s = self.sessions.get(sid)
        if s is None:
            s = Session(id=sid)
            self.sessions[sid] = s
            if len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)
        return s

    # ------------------------------------------------------------------ requests

    def _on_request(self, conn: Connection, msg: p.Request) -> Coroutine[Any, Any, None] | None:
        """Settled inline when no program must run first (rules, mode, safety: nearly every call), so a
        decided request costs no task; hooks and auto mode's classifier continue in one."""
        started = time.monotonic()
        call = msg.call
        try:
            self.agents.saw(conn.peer.ppid, call.agent_pid)
        except Exception:  # remembering the agent costs nothing of the request
            log.exception("agent registry failed")
        if self.probe is None and self.probe_fn is not None and (call.tool in SHELL_TOOLS or call.tool in WRAPPED):
            return self._after_probe(conn, msg)  # a shell call is planned with the probe: wait for it
        session = self._session(call)
        try:
            begun = gate.begin(call, self.store, session, sandbox=self.probe, memo=self.memo)
        except Exception as e:
            log.exception("decide failed; denying", tool=call.tool)
            self._settle(conn, msg, gate.failed(e), session, started, None)
            return None
        if begun.verdict is None:
            return self._request_rounds(conn, msg, begun, started)
        self._settle(conn, msg, begun.verdict, session, started, begun.policy)
        return None

    async def _after_probe(self, conn: Connection, msg: p.Request) -> None:
        """The first shell calls after start (socket activation starts us on the first hook) wait for the
        start-up probe instead of being planned without one (refused)."""
        async with self._probe_lock:  # the start-up probe holds it until it has an answer
            pass
        if self.probe is None:
            await self._refresh_probe()
        if self.probe is None:  # no probe function answered: decide without (fails closed)
            self.probe = p.SandboxProbe(platform="other", available=False, reason="the sandbox was not probed")
        more = self._on_request(conn, msg)
        if more is not None:
            await more

    async def _request_rounds(self, conn: Connection, msg: p.Request, begun: gate.Begun, started: float) -> None:
        try:
            verdict = await gate.finish(begun)
            if not isinstance(verdict, p.Verdict):
                raise TypeError(f"decide returned {type(verdict).__name__}")
        except Exception as e:
            log.exception("decide failed; denying", tool=msg.call.tool)
            verdict = gate.failed(e)
        self._settle(conn, msg, verdict, begun.session, started, begun.policy)

    def _settle(self, conn: Connection, msg: p.Request, verdict: p.Verdict, session: Session, started: float,
                policy: Policy | None) -> None:
        """Send an allow or deny now, or turn an ask into a pending request (or a deny when nobody can
        answer); ``policy`` is the one the gate decided with, for sandbox wrapping."""
        call = msg.call
        if verdict.source == "rule" and verdict.rule and verdict.rule_origin:
            try:
                self.grants.count_use(Use(verdict.rule, verdict.rule_origin, call.session))
            except Exception:  # a count must never cost the decision
                log.exception("grant use count failed")
        if verdict.decision == "allow" and self._audit_refuses():
            verdict = msgspec.structs.replace(
                verdict, decision="deny", reason=f"{verdict.reason}; but {self._audit_refusal()}",
                trace=[*verdict.trace, p.TraceStep("audit", "deny", self._audit_refusal())],
            )
        if verdict.decision == "allow":  # every automatic allow: a person's answers never come this way
            limits = (policy or self.store.policy).limits
            now = time.monotonic()
            why = self.limiter.check(call, limits, now)
            if why is None:
                self.limiter.count(call, limits, now)
            else:
                verdict = msgspec.structs.replace(verdict, decision="ask", source="safety", reason=why,
                                                  trace=[*verdict.trace, p.TraceStep("limits", "ask", why)])
        if verdict.decision == "ask":
            if self._stopping:
                verdict = p.Verdict("deny", "daemon stopping", "error",
                                    trace=[*verdict.trace, p.TraceStep("stopping", "deny", "daemon stopping")])
            elif not self.subscribers and not self.alerts.waits:  # [notify] configured: wait for a person
                if msg.on_no_ui == "ask" and HUMAN_FLAG in verdict.flags:
                    verdict = msgspec.structs.replace(
                        verdict, decision="deny",
                        reason=f"{verdict.reason}; no nexusd UI is connected, and the agent's own dialog may not "
                               "decide this (require_human)",
                        trace=[*verdict.trace, p.TraceStep("no_ui", "deny", "require_human: not handed to the agent")],
                    )
                elif msg.on_no_ui == "ask" and self.store.policy.notify.no_ui == "agent":
                    verdict = msgspec.structs.replace(
                        verdict, reason=f"{verdict.reason}; no nexusd UI is connected, so the agent asks itself",
                        trace=[*verdict.trace, p.TraceStep("no_ui", "ask", "handed to the agent's own dialog")],
                    )
                else:
                    verdict = msgspec.structs.replace(
                        verdict,
                        decision="deny",
                        reason=f"{verdict.reason}; a person must approve this and no nexusd UI is connected",
                        trace=[*verdict.trace, p.TraceStep("no_ui", "deny", "no nexusd UI is connected")],
                    )
            elif conn.pending is not None and len(conn.pending) >= self.config.max_pending_per_connection:
                why = f"too many pending requests on this connection (limit {self.config.max_pending_per_connection})"
                verdict = p.Verdict("deny", why, "error", trace=[*verdict.trace, p.TraceStep("limit", "deny", why)])
            elif len(self.pending) >= self.config.max_pending:
                why = f"too many pending requests in the daemon (limit {self.config.max_pending})"
                verdict = p.Verdict("deny", why, "error", trace=[*verdict.trace, p.TraceStep("limit", "deny", why)])
            else:
                self._ask(conn, msg, verdict, session, started)
                return
        self._finish(conn, msg.ref, call, verdict, session, started, pending_id=None, policy=policy)

    def _audit_refuses(self) -> bool:
        """[audit] on_failure = "deny" while the audit log cannot be written: what cannot be recorded is denied."""
        return self.audit.failing is not None and self.store.policy.audit_on_failure == "deny"

    def _audit_refusal(self) -> str:
        return (f"the audit log cannot be written ({self.audit.failing}) and [audit] on_failure = \"deny\": "
                "nothing is allowed until it can")

    def _record_id(self) -> str:
        return f"{self._id_prefix}{next(self._id_counter):016x}"

    def _finish(
        self,
        conn: Connection,
        ref: str | None,
        call: p.CallInfo,
        verdict: p.Verdict,
        session: Session,
        started: float,
        pending_id: str | None,
        policy: Policy | None = None,
    ) -> None:
        decision = self._decision(call, verdict.decision, verdict.reason, verdict.source, verdict, ref=ref,
                                  policy=policy)
        conn.send(p.encode(decision))
        self._record(pending_id or self._record_id(), call, decision, started, peer=conn.peer,
                     trace=[*verdict.trace, *_daemon_steps(verdict.decision, decision)])

    def _decision(
        self,
        call: p.CallInfo,
        decision: p.DecisionKind,
        reason: str,
        source: p.Source,
        verdict: p.Verdict | None,
        *,
        ref: str | None,
        pending_id: str | None = None,
        message: str | None = None,
        answered_by: str | None = None,
        policy: Policy | None = None,
    ) -> p.Decision:
        updated: dict[str, Any] | None = None
        if decision == "allow" and _is_shell(call, verdict):
            try:
                from nexusd.sandbox.plan import wrap_for_agent

                if verdict is None:
                    raise ValueError("an allow without a verdict cannot be planned")
                updated = wrap_for_agent(call, verdict, self.store, self.probe, policy=policy,
                                         socket=self._own_socket, network=self._network_for(call))
            except Exception as e:  # an allow we cannot wrap as planned is not an allow
                log.exception("sandbox wrapping failed; denying", tool=call.tool)
                decision, source, reason = "deny", "error", f"sandbox wrapping failed ({type(e).__name__}); denied"
            else:
                if updated is None and verdict is not None and _allowed_because_sandboxed(verdict):
                    log.error("allowed only to run sandboxed, but not wrapped; denying", tool=call.tool)
                    decision, source, reason = "deny", "error", "allowed only to run sandboxed, which failed; denied"
        rule = None
        if verdict is not None and source in ("rule", "mode", "safety", "hook", "classifier", "default"):
            rule = verdict.rule
        return p.Decision(
            decision=decision,
            reason=reason,
            source=source,
            id=pending_id,
            rule=rule,
            rule_origin=verdict.rule_origin if rule and verdict is not None else None,
            updated_input=updated,
            message=message,
            answered_by=answered_by,
            ref=ref,
        )

    def _record(
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
    ) -> None:
        self.stats.count(decision.decision, decision.source)
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
        )
        log.debug(
            "decision", tool=call.tool, decision=decision.decision, source=decision.source, reason=decision.reason
        )

    def _ask(
        self, conn: Connection, msg: p.Request, verdict: p.Verdict, session: Session, started: float
    ) -> None:
        rid = secrets.token_hex(16)
        now = time.time()
        timeout = self._prompt_timeout(msg.call)
        if not conn.send(p.encode(p.Pending(id=rid, deadline=now + timeout, ref=msg.ref))):
            self._record(
                rid,
                msg.call,
                p.Decision("deny", "the requester disconnected", "cancelled"),
                started,
                peer=conn.peer,
            )
            return
        if conn.closed or self._stopping:
            return
        entry = PendingEntry(
            rid,
            _json_encoder.encode(msg.call),
            pack(_json_encoder.encode(verdict)),
            conn,
            msg.ref,
            now,
            now + timeout,
            time.monotonic() + timeout,
            started,
            self._agent_pids(conn, msg.call),
        )
        self.pending.add(entry)
        if self.alerts.waits:
            self.alerts.asked(rid, entry.call, entry.deadline_wall)
        if self.subscribers:
            prompt = p.encode(p.Prompt(item=entry.item()))
            for ui in list(self.subscribers):  # a UI dropped mid-fan-out must not cut it short
                ui.post(prompt)
        self._status_dirty = True

    def _prompt_timeout(self, call: p.CallInfo) -> float:
        """The provider's ``prompt_timeout`` from the policy of the call's workspace, else --pending-timeout."""
        try:
            policy = self.store.policy_for(gate.workspace_of(call))
            configured = policy.provider(call.provider).prompt_timeout
        except Exception:  # a policy problem costs the setting, never the request
            log.exception("prompt_timeout lookup failed; using the default")
            return self.config.pending_timeout
        if configured is None or not 0 < configured <= MAX_PROMPT_TIMEOUT:
            return self.config.pending_timeout
        return float(configured)

    def _resolve(
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
    ) -> p.Decision:
        """Atomic: no await between the pending check and here, so exactly one resolution wins.
        ``edited``: the person's edited call and its own verdict, which replace the agent's (allow only)."""
        if decision == "allow" and self._audit_refuses():
            decision, reason = "deny", f"{reason}; but {self._audit_refusal()}"
        rid = entry.id
        self.pending.claim(entry)
        call, verdict = edited if edited is not None and decision == "allow" else (entry.call, entry.verdict)
        answered_by = by.label if by is not None else label
        self.alerts.resolved(rid)
        d = self._decision(
            call,
            decision,
            reason,
            source,
            verdict if decision == "allow" else None,  # only an allow needs it (sandbox wrapping)
            ref=entry.ref,
            pending_id=rid,
            message=message,
            answered_by=answered_by,
        )
        if abort:
            d = msgspec.structs.replace(d, abort=True)
        if edited is not None and d.decision == "allow" and d.updated_input is None:
            d.updated_input = call.input  # the agent runs the edited call (wrapped above when sandboxed)
        if notify_requester:
            entry.conn.post(p.encode(d))
        resolved = p.encode(
            p.Resolved(
                id=rid, decision=d.decision, source=d.source, reason=d.reason, answered_by=answered_by, scope=scope
            )
        )
        for ui in list(self.subscribers):  # a UI dropped mid-fan-out must not cut it short
            ui.post(resolved)
        how = f"{answered_by} ({scope or 'once'})" if source == "user" else reason
        trace = [*entry.verdict.trace, p.TraceStep("pending", "ask", "waited for a person"),
                 p.TraceStep(source if source != "user" else "answer", decision, how)]
        if edited is not None and decision == "allow":
            trace += [p.TraceStep("edit", "decided again", f"edited input: {msgspec.json.encode(call.input)[:300]!r}"),
                      *(msgspec.structs.replace(s, step=f"edit.{s.step}") for s in edited[1].trace)]
        self._record(
            rid,
            call,
            d,
            entry.started,
            peer=entry.conn.peer,
            answer_pid=by.peer.pid if by is not None else None,
            scope=scope,
            trace=[*trace, *_daemon_steps(decision, d)],
        )
        self._status_dirty = True
        return d

    def _deny_from_notification(self, rid: str) -> None:
        """A desktop notification's Deny (the only answer a notification gives: see notify_person.py)."""
        entry = self.pending.get(rid)
        if entry is not None:
            self._resolve(entry, "deny", "user", "denied from a desktop notification", label="desktop notification")

    def _expire(self, entry: PendingEntry) -> None:
        self._resolve(entry, "deny", "timeout", "nobody answered before the deadline")

    def _on_cancel(self, conn: Connection, msg: p.Cancel) -> None:
        entry = self.pending.get(msg.id)
        if entry is None or (entry.conn is not conn and conn.role != "admin"):
            if self.pending.decided(msg.id) and entry is None:
                self._reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self._reply_error(conn, "not_found", "no such pending request of yours", msg.ref)
            return
        by = None if entry.conn is conn else conn
        self._resolve(
            entry, "deny", "cancelled", "cancelled by the requester" if by is None else "cancelled by admin", by=by
        )
        conn.send(p.encode(p.Ack(ref=msg.ref, detail="cancelled")))

    # ------------------------------------------------------------------ UIs

    def _on_subscribe(self, conn: Connection, msg: p.Subscribe) -> None:
        items = [e.item() for e in self.pending.values()]
        conn.subscribed = True
        self.subscribers.add(conn)
        conn.send(p.encode(p.Snapshot(items=items, ref=msg.ref)))

    def _agent_pids(self, conn: Connection, call: p.CallInfo) -> frozenset[int]:
        """Who the requesting agent is, taken while the requester still waits (its parent chain is alive).

        The requester's parent (at accept) and the call's declared ``agent_pid``, each also resolved up
        through transient shells and wrappers (``sh -c "nexus-hook claude"``): the agent's own Bash tool
        descends from the agent, not from that shell. Ancestors of the daemon itself (a login shell, a
        terminal, init) are never "the agent", or no UI started beside the daemon could answer.

        Resolved at a connection's first ask and kept for its later ones with the same declared pid (an MCP
        bridge asks many times; the walk was a third of an ask's CPU): the chain seen while the first ask
        waited, not a later one whose shells have exited, and a process that rewrites itself between asks
        could as well have looked that way at the first.
        """
        if conn.agents is not None and conn.agents[0] == call.agent_pid:
            return conn.agents[1]
        direct = {pid for pid in (conn.peer.ppid, call.agent_pid) if pid is not None}
        pids = set(direct)
        for pid in direct:
            try:
                resolved = resolve_agent(pid)
            except Exception:  # psutil trouble costs the resolution, never the request
                log.exception("agent resolution failed", pid=pid)
                continue
            if resolved is not None:
                pids.add(resolved)
        agents = frozenset(pids - self._daemon_ancestors)
        conn.agents = (call.agent_pid, agents)
        return agents

    def _self_approval(self, answerer: Connection, entry: PendingEntry) -> bool:
        """True if the answering process descends from the agent that made the request."""
        agents = entry.guard
        if not agents:
            return False
        if answerer.peer.pid is None:
            return True  # cannot tell: fail closed
        chain = ancestors(answerer.peer.pid)
        if chain is None:
            return True
        return bool(agents.intersection(chain))

    def _on_answer(self, conn: Connection, msg: p.Answer) -> Coroutine[Any, Any, None] | None:
        entry = self.pending.get(msg.id)
        if entry is None:
            if self.pending.decided(msg.id):
                self._reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self._reply_error(conn, "not_found", "no pending request with that id", msg.ref)
            return None
        if self._self_approval(conn, entry) or self._from_agent(conn):  # its own agent's tree, or any agent's
            self.client_fault(conn, "self-approval refused", request=msg.id)
            self._record(
                msg.id,
                entry.call,
                p.Decision(
                    msg.decision, "answer refused: it came from the requesting agent's own process tree", "user"
                ),
                entry.started,
                peer=entry.conn.peer,
                answer_pid=conn.peer.pid,
                scope=msg.scope,
                event="self_approval_refused",
            )
            self._reply_error(
                conn,
                "self_approval",
                "refused: the answering process descends from an agent (the one that made the request, or "
                "another); a person answers from a terminal or UI outside the agents",
                msg.ref,
            )
            return None
        if msg.scope == "never" and msg.decision != "deny":
            self._reply_error(conn, "invalid_message", "scope never goes with decision deny", msg.ref)
            return None
        if msg.abort and msg.decision != "deny":
            self._reply_error(conn, "invalid_message", "abort goes with decision deny", msg.ref)
            return None
        if (msg.scope == "timed") != (msg.duration is not None):
            self._reply_error(conn, "invalid_message", "duration goes with scope timed, and only with it", msg.ref)
            return None
        if msg.duration is not None and not 0 < msg.duration <= MAX_DURATION:
            self._reply_error(conn, "invalid_message",
                              f"duration must be more than 0 and at most {MAX_DURATION:.0f} seconds", msg.ref)
            return None
        verdict = entry.verdict
        if msg.updated_input is not None:
            return self._edited_answer(conn, msg, entry)
        if HUMAN_FLAG in verdict.flags and msg.decision == "allow" and msg.scope != "once":
            self._reply_error(conn, "refused", "a person must approve each such call (require_human): answer allow "
                              "once, or deny; the request is still pending", msg.ref)
            return None
        rules = list(msg.rules) if msg.rules else list(verdict.suggestions)
        kind: Literal["allow", "deny"] = "allow" if msg.decision == "allow" else "deny"
        now = time.time()
        if msg.scope != "once":
            if not rules:
                self._reply_error(
                    conn, "refused", f"no rule to remember for scope {msg.scope}: send rules, or answer once", msg.ref
                )
                return None
            if msg.scope == "session":
                session = self._session_by_id(entry.call.session)
                if msg.decision == "allow":
                    session.allow_rules = (*session.allow_rules, *(r for r in rules if r not in session.allow_rules))
                else:
                    session.deny_rules = (*session.deny_rules, *(r for r in rules if r not in session.deny_rules))
                self._grant(kind, rules, "session", conn, now, session=entry.call.session)
            elif msg.scope == "timed":
                try:  # the same checks as "always": a timed grant is an "always" with an end
                    self.store.check_grantable(kind, rules, verdict)
                except ValueError as e:
                    self._reply_error(conn, "refused", f"not granted: {e}; the request is still pending", msg.ref)
                    return None
                assert msg.duration is not None
                if not self._grant(kind, rules, "timed", conn, now, expires=now + msg.duration):
                    self._reply_error(conn, "refused", f"not granted: {self.grants.path} cannot be written; the "
                                      "request is still pending", msg.ref)
                    return None
            else:
                try:
                    self.store.learn(kind, rules, verdict=verdict)
                except (ValueError, OSError) as e:
                    self._reply_error(
                        conn, "refused", f"not remembered: {_why_refused(e)}; the request is still pending", msg.ref
                    )
                    return None
                self._grant(kind, [r for r in rules if not r.startswith("Trust(")], "learned", conn, now)
        if self.pending.get(msg.id) is not entry:  # store.learn is synchronous, but be certain
            self._reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            return None
        reason = f"{'allowed' if msg.decision == 'allow' else 'denied'} by {conn.label}"
        if msg.scope == "timed":
            reason += f" (for {msg.duration:g} s)"
        elif msg.scope != "once":
            reason += f" ({msg.scope})"
        if msg.abort:
            reason += ", who also stopped the agent"
        self._resolve(entry, msg.decision, "user", reason, by=conn, scope=msg.scope, message=msg.message,
                      abort=msg.abort)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"{msg.decision} ({msg.scope}){' + abort' if msg.abort else ''}")))
        return None

    async def _edited_answer(self, conn: Connection, msg: p.Answer, entry: PendingEntry) -> None:
        """Allow once with the person's edit: the edited call is decided again by the gate as if the agent had
        sent it (hooks included); it must not be denied on its own nor widen what the person saw
        (nexusd/policy/edits.py). Refused: the request stays pending, for another answer."""
        call = entry.call
        if msg.updated_input is None or msg.decision != "allow" or msg.scope != "once" or msg.rules or (
                msg.duration is not None):
            self._reply_error(conn, "invalid_message", "an edited input goes with allow, scope once, no rules",
                              msg.ref)
            return
        if call.provider not in EDITABLE_PROVIDERS:
            self._reply_error(conn, "refused", f"{call.provider} cannot take a changed input back (edits work for "
                              f"{', '.join(sorted(EDITABLE_PROVIDERS))}); answer the call as it is", msg.ref)
            return
        dropped = sorted(set(call.input) - set(msg.updated_input)) if call.provider in MERGING_PROVIDERS else []
        if dropped:
            self._reply_error(conn, "refused", f"{call.provider} merges an edited input into the original, so "
                              f"removing {', '.join(dropped)} would not take: keep those keys", msg.ref)
            return
        if msgspec.json.encode(msg.updated_input) == msgspec.json.encode(call.input):
            self._reply_error(conn, "invalid_message", "the edited input is the original: answer without it",
                              msg.ref)
            return
        edited_call = msgspec.structs.replace(call, input=msg.updated_input)
        session = self._session(edited_call)
        try:
            edited = await gate.decide(edited_call, self.store, session, sandbox=self.probe)
        except Exception as e:  # decide never raises; if it did, the edit is not taken
            log.exception("deciding an edited call failed")
            self._reply_error(conn, "refused", f"the edited call could not be decided ({type(e).__name__})", msg.ref)
            return
        why = widening(entry.verdict, edited)
        if why is not None:
            self._reply_error(conn, "refused", f"edit refused, {why}; the request is still pending", msg.ref)
            return
        if self.pending.get(msg.id) is not entry:  # answered, timed out or cancelled while the edit was decided
            self._reply_error(conn, "already_decided", "that request was decided while the edit was checked",
                              msg.ref)
            return
        reason = f"allowed by {conn.label}, edited"
        self._resolve(entry, "allow", "user", reason, by=conn, scope="once", message=msg.message,
                      edited=(edited_call, edited))
        conn.send(p.encode(p.Ack(ref=msg.ref, detail="allow (once), edited")))

    # ------------------------------------------------------------------ grants

    def _grant(self, kind: Literal["allow", "deny"], rules: list[str], scope: Literal["session", "timed", "learned"],
               conn: Connection, now: float, *, session: str | None = None, expires: float | None = None) -> bool:
        """Record who gave what. A failure to record never undoes a grant already in force (session rules,
        learned.toml); a timed one only exists in the table, so it is not given at all (False)."""
        try:
            given = self.grants.add(kind, rules, scope, now=now, session=session, given_by=conn.label,
                                    ui=conn.name or None, expires=expires)
        except OSError as e:
            log.error("grants file cannot be written", error=str(e))
            return scope != "timed"
        for g in given:
            if g.expires is not None:
                self._arm_grant(g.id, g.expires)
            log.info("grant given", id=g.id, kind=kind, rule=g.rule, scope=scope, by=conn.label, expires=g.expires)
        return True

    def _arm_grant(self, gid: str, expires: float) -> None:
        """One timer per timed grant, at its expiry (the engine already ignores it from that instant)."""
        old = self._grant_timers.pop(gid, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._grant_timers[gid] = loop.call_later(max(0.0, expires - time.time()), self._grant_expired, gid)

    def _grant_expired(self, gid: str) -> None:
        self._grant_timers.pop(gid, None)
        g = self.grants.get(gid)
        if g is None:
            return
        if (g.expires or 0.0) > time.time():  # re-granted with a later expiry meanwhile
            self._arm_grant(gid, g.expires or 0.0)
            return
        try:
            self.grants.remove(gid)
        except OSError as e:  # it no longer applies either way (timed_rules checks the clock)
            log.error("grants file cannot be written", error=str(e))
        log.info("grant expired", id=gid, rule=g.rule)

    def _on_grants(self, conn: Connection, msg: p.Grants) -> None:
        live = {sid: (set(s.allow_rules), set(s.deny_rules)) for sid, s in self.sessions.items()}
        learned = [r for r in self.store.rules() if r.layer == "learned"]
        grants = self.grants.listing(learned, live, time.time())
        conn.send(p.encode(p.GrantsReply(grants=grants, ref=msg.ref)))

    def _on_revoke_grant(self, conn: Connection, msg: p.RevokeGrant) -> None:
        live = {sid: (set(s.allow_rules), set(s.deny_rules)) for sid, s in self.sessions.items()}
        learned = [r for r in self.store.rules() if r.layer == "learned"]
        g = next((x for x in self.grants.listing(learned, live, time.time()) if x.id == msg.id), None)
        if g is None:
            self._reply_error(conn, "not_found", f"no grant {msg.id!r} in force", msg.ref)
            return
        if g.scope == "learned":
            try:
                self.store.change_rule("remove", g.kind, g.rule)
            except ValueError as e:
                self._reply_error(conn, "refused", str(e), msg.ref)
                return
        elif g.scope == "session" and g.session is not None:
            s = self.sessions.get(g.session)
            if s is not None:
                if g.kind == "allow":
                    s.allow_rules = tuple(r for r in s.allow_rules if r != g.rule)
                else:
                    s.deny_rules = tuple(r for r in s.deny_rules if r != g.rule)
        timer = self._grant_timers.pop(g.id, None)
        if timer is not None:
            timer.cancel()
        try:
            self.grants.remove(g.id)
        except OSError as e:
            # a timed grant that cannot be forgotten on disk would come back at restart: say so, but it is
            # already out of the table, so it no longer applies now
            self._reply_error(conn, "internal", f"revoked now, but {self.grants.path} cannot be written: {e}",
                              msg.ref)
            return
        log.info("grant revoked", id=g.id, rule=g.rule, scope=g.scope, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"revoked {g.id}: {g.kind} {g.rule} ({g.scope})")))

    def _on_session_end(self, conn: Connection, msg: p.SessionEnd) -> None:
        """The session's allow grants end now; what narrows it (deny answers, a person's mode) stays."""
        s = self.sessions.get(msg.session)
        if s is not None:
            s.allow_rules = ()
        for g in self.grants.end_session(msg.session, "allow"):
            log.info("grant ended with its session", id=g.id, rule=g.rule, session=msg.session)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"session {msg.session} ended")))

    def _on_set_mode(self, conn: Connection, msg: p.SetMode) -> None:
        if msg.mode is not None and (not msg.mode or len(msg.mode) > 64):
            self._reply_error(conn, "invalid_message", "mode must be a short non-empty name", msg.ref)
            return
        if msg.mode is not None and resolve(msg.mode) is None:
            # an unknown name would show in status and silently act as default: refuse it, with the list
            names = ", ".join(dict.fromkeys(spelling for spelling, _, _ in MODES))
            self._reply_error(conn, "invalid_message", f"unknown mode {msg.mode!r}; valid modes: {names}", msg.ref)
            return
        self._session_by_id(msg.session).override_mode = msg.mode
        log.info("session mode set", session=msg.session, mode=msg.mode, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"mode {msg.mode or '(agent)'}")))

    # ------------------------------------------------------------------ queries

    def _status_text(self) -> str:
        return f"{len(self.pending)} pending"

    def _counters(self) -> dict[str, int]:
        counters = dict(self.stats.counters)
        if self.memo is not None:
            for key, n in (("memo/hit", self.memo.hits), ("memo/miss", self.memo.misses),
                           ("memo/stale", self.memo.stale)):
                if n:
                    counters[key] = n
        return counters

    def _on_status(self, conn: Connection, msg: p.Status) -> None:
        roles: dict[str, int] = {}
        for c in self.conns:
            key = c.role or "handshake"
            roles[key] = roles.get(key, 0) + 1
        sessions = {sid: s.override_mode or s.agent_mode or "default" for sid, s in list(self.sessions.items())[-1000:]}
        errors = list(self.store.errors)
        reply = p.StatusReply(
            version=__version__,
            pid=self.pid,
            uptime=round(time.monotonic() - self.started_mono, 3),
            connections=roles,
            pending=len(self.pending),
            counters=self._counters(),
            policy=self.store.sources(),
            policy_errors=errors,
            sandbox=self.probe,
            sessions=sessions,
            locked=self.store.policy.locked,
            audit_error=self.audit.failing,
            audit_unrecorded=self.audit.unrecorded,
            audit_on_failure=self.store.policy.audit_on_failure,
            audit_path=str(self.audit.path),
            audit_head=self.audit.chain[0],
            audit_lines=self.audit.chain[1],
            ref=msg.ref,
        )
        conn.send(p.encode(reply))

    async def _on_check(self, conn: Connection, msg: p.Check) -> None:
        call = msg.call
        session = self.sessions.get(call.session)
        if session is None:
            session = Session(id=call.session, provider=call.provider, agent_mode=call.mode)
        session.grant_rules = self.grants.timed_rules(time.time())
        try:
            verdict = await gate.decide(call, self.store, session, dry_run=True, sandbox=self.probe)
            if not isinstance(verdict, p.Verdict):
                raise TypeError(f"decide returned {type(verdict).__name__}")
        except Exception as e:
            log.exception("check failed")
            verdict = p.Verdict("deny", f"internal error while deciding ({type(e).__name__}); denied", "error")
        conn.send(p.encode(p.CheckResult(verdict=verdict, ref=msg.ref)))

    async def reload(self) -> list[str]:
        self.notifier.reloading()
        try:
            errors = list(self.store.load())
            if self.memo is not None:
                self.memo.clear()  # entries of the old policy could never hit again; free them
        except Exception as e:  # the store promises not to raise; fail safe if it does
            log.exception("policy reload failed")
            errors = [f"reload failed: {type(e).__name__}: {e}"]
        self.notifier.ready(self._status_text())
        if errors:
            for err in errors:
                log.error("policy error; keeping the last good policy", error=err)
        else:
            log.info("policy reloaded")
        notice = p.encode(p.PolicyNotice(ok=not errors, errors=errors))
        for ui in list(self.subscribers):  # a UI dropped mid-fan-out must not cut it short
            ui.post(notice)
        return errors

    async def _on_reload(self, conn: Connection, msg: p.Reload) -> None:
        errors = await self.reload()
        if errors:
            self._reply_error(
                conn, "policy_error", "policy not reloaded, the last good one stays: " + "; ".join(errors), msg.ref
            )
        else:
            conn.send(p.encode(p.Ack(ref=msg.ref, detail="policy reloaded")))

    def _on_rules(self, conn: Connection, msg: p.Rules) -> None:
        rules = list(self.store.rules())
        for sid, s in self.sessions.items():
            rules += [p.RuleInfo("allow", r, "session", f"session:{sid}") for r in s.allow_rules]
            rules += [p.RuleInfo("deny", r, "session", f"session:{sid}") for r in s.deny_rules]
        conn.send(p.encode(p.RulesReply(rules=rules, trusted=list(self.store.trusted()), ref=msg.ref)))

    def _on_rule_change(self, conn: Connection, msg: p.RuleChange) -> None:
        try:
            self.store.change_rule(msg.action, msg.kind, msg.rule)
        except (ValueError, OSError) as e:
            self._reply_error(conn, "refused", _why_refused(e), msg.ref)
            return
        log.info("rule changed", action=msg.action, kind=msg.kind, rule=msg.rule, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"{msg.action} {msg.kind} {msg.rule}")))

    def _on_trust_change(self, conn: Connection, msg: p.TrustChange) -> None:
        try:
            self.store.trust(msg.action, msg.path)
        except (ValueError, OSError) as e:
            self._reply_error(conn, "refused", _why_refused(e), msg.ref)
            return
        log.info("trust changed", action=msg.action, path=msg.path, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"trust {msg.action} {msg.path}")))

    async def _refresh_probe(self) -> p.SandboxProbe | None:
        if self.probe_fn is None:
            return None
        async with self._probe_lock:
            try:
                self.probe = await anyio.to_thread.run_sync(self.probe_fn, abandon_on_cancel=True)
                log.info("sandbox probe", available=self.probe.available, backend=self.probe.backend)
            except Exception as e:
                log.exception("sandbox probe failed")
                self.probe = p.SandboxProbe(platform="other", available=False, reason=f"probe failed: {e}")
        return self.probe

    async def _on_probe(self, conn: Connection, msg: p.Probe) -> None:
        probe = self.probe
        if msg.refresh or probe is None:
            probe = await self._refresh_probe()
        if probe is None:
            probe = p.SandboxProbe(platform="other", available=False, reason="no probe configured")
        conn.send(p.encode(p.ProbeReply(probe=probe, ref=msg.ref)))

    async def _on_sandbox_plan(self, conn: Connection, msg: p.SandboxPlan) -> None:
        from nexusd.sandbox.plan import plan_command

        probe = self.probe if self.probe is not None else await self._refresh_probe()
        try:
            plan = plan_command(msg.command, msg.cwd, self.store, probe, msg.session, workspace=msg.workspace)
            if plan.proxy_fd_arg is not None and self.network is not None:
                # who ran the command (the agent behind nexusctl run): it may not answer its own sandbox's asks
                guard = self._agent_pids(conn, p.CallInfo(provider="sandbox", session="", tool="Network", input={},
                                                          cwd=msg.cwd))
                path, token = self.network.register(msg.command, msg.cwd, os.path.realpath(msg.workspace or msg.cwd),
                                                    msg.session, guard, self.store)
                plan = msgspec.structs.replace(plan, proxy_socket=path, proxy_token=token)
            plan = msgspec.structs.replace(plan, ref=msg.ref)
        except Exception as e:
            log.exception("sandbox plan failed")
            plan = p.SandboxPlanReply(allowed=False, reason=f"planning failed: {type(e).__name__}", ref=msg.ref)
        conn.send(p.encode(plan))

    def _network_for(self, call: p.CallInfo) -> Callable[[str, str, str], tuple[str, str] | None]:
        """For a wrapped call with a filtered network: its proxy context, under the agent's session (so a
        "session" answer lasts for the session and UIs name the agent), guarded against the agent."""
        def register(command: str, cwd: str, workspace: str) -> tuple[str, str] | None:
            if self.network is None:
                return None  # the proxy is not serving (yet): the command runs with no network
            guard = frozenset(pid for pid in (call.agent_pid,) if pid is not None)
            return self.network.register(command, cwd, workspace, call.session, guard, self.store,
                                         provider=call.provider)
        return register

    def _on_sandbox_report(self, conn: Connection, msg: p.SandboxReport) -> None:
        """Violations a runner saw: one audit record (event ``sandbox_violation``) and a notice to every UI.
        Any same-user process can send one, so it only adds a record: bounded, and it decides nothing."""
        violations = [v[:MAX_VIOLATION_CHARS] for v in msg.violations[:MAX_VIOLATIONS]]
        if not violations:
            conn.send(p.encode(p.Ack(ref=msg.ref, detail="nothing to record")))
            return
        command = msg.command[:MAX_VIOLATION_CHARS]
        session = (msg.session or "")[:200]
        call = p.CallInfo("sandbox", session, "Bash", {"command": command}, msg.cwd[:4096])
        reason = f"the sandbox refused {len(violations)} operation(s): " + "; ".join(violations)
        if msg.exit_code is not None:
            reason += f" (exit {msg.exit_code})"
        self._record(self._record_id(), call, p.Decision("deny", reason, "safety"), time.monotonic(),
                     peer=conn.peer, event="sandbox_violation")
        notice = p.encode(p.SandboxNotice(command=command, cwd=call.cwd, violations=violations,
                                          session=session or None, time=time.time()))
        for ui in list(self.subscribers):
            ui.post(notice)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"{len(violations)} recorded")))

    async def _on_audit(self, conn: Connection, msg: p.Audit) -> None:
        limit = max(1, min(msg.limit, MAX_AUDIT_QUERY))
        match = {"session": msg.session, "tool": msg.tool, "decision": msg.decision, "source": msg.source,
                 "id": msg.id}
        await anyio.to_thread.run_sync(self.audit.flush)
        records = await anyio.to_thread.run_sync(read_tail, self.audit.path, limit, match)
        conn.send(p.encode(p.AuditReply(records=records, ref=msg.ref)))

    # ------------------------------------------------------------------ service manager

    async def _notify_loop(self) -> None:
        interval = Notifier.watchdog_interval()
        last = ""
        next_ping = time.monotonic()
        while True:
            text = self._status_text()
            if text != last:
                self.notifier.status(text)
                last = text
            if interval and time.monotonic() >= next_ping:
                self.notifier.watchdog()
                next_ping = time.monotonic() + interval
            await anyio.sleep(min(1.0, interval) if interval else 1.0)


def _why_refused(e: Exception) -> str:
    """The store's refusal as is; a write that failed (a full disk, a read-only directory) says so, loudly."""
    if isinstance(e, OSError):
        log.error("policy change not saved", error=str(e))
        return f"could not be saved ({e.strerror or e})"
    return str(e)


_CLIENT_FAULTS = frozenset({"bad_json", "line_too_long", "invalid_message", "unknown_type", "wrong_role",
                            "protocol_version"})


def _ref_of(line: bytes) -> str | None:
    try:
        return _ref_decoder.decode(line).ref
    except Exception:
        return None
