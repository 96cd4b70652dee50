"""The request lifecycle: a tool call from an agent, from its arrival to its audit record.

Theory of operation. ``on_request`` runs the gate's synchronous first round inline (rules, mode, safety:
nearly every call is settled there, without a task); a call that needs programs (hooks, auto mode's
reviewer) continues in one task (``gate.run_rounds``). ``settle`` applies the daemon's verdict-shaping
steps (``nexusd.policy.shaping``: audit refusal, runaway limits, stopping, no UI, pending limits) and
then either replies at once (``reply_and_record``: the decision, sandbox-wrapped when it is a shell
allow, and its audit record) or turns the ask into a pending entry (``ask``) that a person's answer
(``answers.py``), a cancel or the deadline resolves. What the gate computed once for the request (its
workspace, policy and shell parse: ``gate.Begun``) is carried to the wrap; nothing is recomputed.
Every path that is not an explicit allow ends in deny.
"""

from __future__ import annotations

import functools
import itertools
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.model import Session
from nexusd.core.policy.policy import Policy
from nexusd.core.tools import SHELL_TOOLS, tool_info
from nexusd.daemon.audit import Confirm, held_until_recorded
from nexusd.daemon.connection import Connection
from nexusd.daemon.peer import PeerCred
from nexusd.daemon.pending import PendingEntry, pack
from nexusd.daemon.uploads import Uploads
from nexusd.policy import gate, shaping
from nexusd.policy.grants import Use

if TYPE_CHECKING:
    from nexusd.daemon.server import Server

log = structlog.get_logger("nexusd")

HOLD_MARGIN = 1.5  # seconds a held deadline stays before the requester's own max_wait: the deny must reach it
MAX_PROMPT_TIMEOUT = 3600.0  # the policy loader's own bound on [providers.<name>] prompt_timeout
_json_encoder = msgspec.json.Encoder()


def _is_shell(call: p.CallInfo, verdict: p.Verdict | None) -> bool:
    if verdict is not None and verdict.details is not None:
        return verdict.details.kind == "shell"
    return call.tool in SHELL_TOOLS


class RequestLifecycle:
    """Settle, ask, reply and record agents' tool calls (one per daemon; state lives on the ``Server``)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        # Audit ids of calls settled at once: unique, not secret (nobody answers them), so a random prefix
        # per daemon run and a counter, not a getrandom syscall per call. Pending ids stay 128-bit random.
        self._id_prefix = secrets.token_hex(8)
        self._id_counter = itertools.count(1)

    def on_request(self, conn: Connection, msg: p.Request) -> Coroutine[Any, Any, None] | None:
        """Settled inline when no program must run first (rules, mode, safety: nearly every call), so a
        decided request costs no task; hooks and auto mode's classifier continue in one."""
        started = time.monotonic()
        if msg.uploads:  # large input strings came in ``part`` lines: put them back before anything reads the call
            whole, why = (conn.uploads or Uploads()).take(msg.uploads, msg.call.input)
            if why is not None:
                verdict = p.Verdict("deny", f"{why}; denied", "error")
                self.settle(conn, msg, verdict, self.server.session_for(msg.call), started, None)
                return None
            msg = msgspec.structs.replace(
                msg, call=msgspec.structs.replace(msg.call, input={**msg.call.input, **whole})
            )
        call = msg.call
        try:
            seen = conn.seen
            if seen is not None and seen[0] == call.agent_pid:
                self.server.agents.touch(seen[1])
            else:
                found = self.server.agents.saw(conn.peer.ppid, call.agent_pid)
                conn.seen = (call.agent_pid, found) if found else None  # nothing readable: look again next time
        except Exception:  # remembering the agent costs nothing of the request
            log.exception("agent registry failed")
        if (
            self.server.probe is None
            and self.server.probe_fn is not None
            and call.tool in SHELL_TOOLS  # the sandbox wraps a subset of these
        ):
            return self._after_probe(conn, msg)  # a shell call is planned with the probe: wait for it
        session = self.server.session_for(call)
        t0 = time.perf_counter_ns()
        try:
            begun = gate.begin(call, self.server.store, session, sandbox=self.server.probe, memo=self.server.memo)
        except Exception as e:
            log.exception("decide failed; denying", tool=call.tool)
            self.settle(conn, msg, gate.failed(e), session, started, None)
            return None
        self.server.stats.decided(time.perf_counter_ns() - t0)
        if begun.verdict is None:
            return self._request_rounds(conn, msg, begun, started)
        self.settle(conn, msg, begun.verdict, session, started, begun)
        return None

    async def _after_probe(self, conn: Connection, msg: p.Request) -> None:
        """The first shell calls after start (socket activation starts us on the first hook) wait for the
        start-up probe instead of being planned without one (refused)."""
        async with self.server.queries.probe_lock:  # the start-up probe holds it until it has an answer
            pass
        if self.server.probe is None:
            await self.server.queries.refresh_probe()
        if self.server.probe is None:  # no probe function answered: decide without (fails closed)
            self.server.probe = p.SandboxProbe(platform="other", available=False, reason="the sandbox was not probed")
        more = self.on_request(conn, msg)
        if more is not None:
            await more

    async def _request_rounds(self, conn: Connection, msg: p.Request, begun: gate.Begun, started: float) -> None:
        try:
            verdict = await gate.run_rounds(begun)
            if not isinstance(verdict, p.Verdict):
                raise TypeError(f"decide returned {type(verdict).__name__}")
        except Exception as e:
            log.exception("decide failed; denying", tool=msg.call.tool)
            verdict = gate.failed(e)
        self.settle(conn, msg, verdict, begun.session, started, begun)

    def settle(
        self,
        conn: Connection,
        msg: p.Request,
        verdict: p.Verdict,
        session: Session,
        started: float,
        begun: gate.Begun | None,
    ) -> None:
        """Shape the verdict (``nexusd.policy.shaping``, steps 2-6, each traced), then send an allow or deny
        now, or turn the ask into a pending request. ``begun`` carries what the gate computed once for this
        request (workspace, policy, classification): the limits, the prompt timeout and the sandbox wrap use
        the same; None when the gate failed."""
        call = msg.call
        server = self.server
        if verdict.source == "rule" and verdict.rule and verdict.rule_origin:
            try:
                server.grants.count_use(Use(verdict.rule, verdict.rule_origin, call.session))
            except Exception:  # a count must never cost the decision
                log.exception("grant use count failed")
        verdict, wait = self.shape(verdict, call, begun.policy if begun is not None else None, msg.on_no_ui, conn)
        if wait:
            self.ask(conn, msg, verdict, session, started, begun)
            return
        self.reply_and_record(conn, msg.ref, call, verdict, started, begun)

    def shape(
        self,
        verdict: p.Verdict,
        call: p.CallInfo,
        policy: Policy | None,
        on_no_ui: p.NoUi | None,
        conn: Connection | None,
    ) -> tuple[p.Verdict, bool]:
        """Shaping steps 2-6 (``nexusd.policy.shaping``) with the daemon's state now, in their one order;
        True when the result is an ask that waits for a person. ``on_no_ui`` None is a check: nothing is
        counted, and ``no_ui`` is only noted (a check cannot know what the agent would offer)."""
        server = self.server
        if verdict.decision == "allow":  # every automatic allow: a person's answers never come this way
            verdict = shaping.audit_refusal(verdict, self.audit_refusal() if self.audit_refuses() else None)
        if verdict.decision == "allow":
            limits = (policy if policy is not None else server.store.policy).limits
            now = time.monotonic()
            why = server.limiter.check(call, limits, now)
            if why is None and on_no_ui is not None:
                server.limiter.count(call, limits, now)
            verdict = shaping.runaway_limit(verdict, why)
        if verdict.decision != "ask":
            return verdict, False
        cfg = server.config
        if server.stopping_now:
            return shaping.stopping(verdict), False
        if not server.subscribers and not server.alerts.waits:  # [notify] configured: wait for a person
            if on_no_ui is None:
                return shaping.no_ui_noted(verdict), False
            return shaping.no_ui(verdict, on_no_ui, server.store.policy.notify.no_ui), False
        if conn is not None and conn.pending is not None and len(conn.pending) >= cfg.max_pending_per_connection:
            why = f"too many pending requests on this connection (limit {cfg.max_pending_per_connection})"
            return shaping.pending_limit(verdict, why), False
        if len(server.pending) >= cfg.max_pending:
            why = f"too many pending requests in the daemon (limit {cfg.max_pending})"
            return shaping.pending_limit(verdict, why), False
        return verdict, on_no_ui is not None

    def audit_refuses(self) -> bool:
        """[audit] on_failure = "deny" while the audit log cannot be written: what cannot be recorded is denied."""
        return self.server.audit.failing is not None and self.server.store.policy.audit_on_failure == "deny"

    def strict_audit(self) -> bool:
        """[audit] on_failure = "deny": an allow is sent only once its record is on disk (audit.py)."""
        return self.server.store.policy.audit_on_failure == "deny"

    def audit_refusal(self) -> str:
        return (
            f'the audit log cannot be written ({self.server.audit.failing}) and [audit] on_failure = "deny": '
            "nothing is allowed until it can"
        )

    def record_id(self) -> str:
        return f"{self._id_prefix}{next(self._id_counter):016x}"

    def reply_and_record(
        self,
        conn: Connection,
        ref: str | None,
        call: p.CallInfo,
        verdict: p.Verdict,
        started: float,
        begun: gate.Begun | None = None,
    ) -> None:
        """The decision settled without a person: sent (sandbox-wrapped when a shell allow), then audited
        with the whole trace, the wrap's step included."""
        decision = self.decision(call, verdict.decision, verdict.reason, verdict.source, verdict, ref=ref, begun=begun)
        # an allow that can change files goes out after its checkpoint (nexusd/undo) and, under [audit]
        # on_failure = "deny", only once it is recorded
        deliver = functools.partial(self.server.undo.send, conn.send, call, decision, verdict)
        confirm = held_until_recorded(conn.send, decision, self.strict_audit(), deliver)
        if confirm is None:
            deliver()
        self.record(
            self.record_id(),
            call,
            decision,
            started,
            peer=conn.peer,
            trace=[*verdict.trace, *shaping.wrap_steps(verdict.decision, decision)],
            requirement=verdict.requirement,
            confirm=confirm,
        )

    def decision(
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
        begun: gate.Begun | None = None,
    ) -> p.Decision:
        """The wire decision; an allowed shell call is wrapped to run sandboxed (``sandbox/plan.py``) with
        the request's own policy and shell parse when ``begun`` carries them (a person's answer: looked up
        again). A wrap that fails turns the allow into a deny (``shaping.wrap_steps`` traces it)."""
        updated: dict[str, Any] | None = None
        if decision == "allow" and _is_shell(call, verdict):
            try:
                from nexusd.sandbox.plan import wrap_for_agent

                if verdict is None:  # an allow to wrap always carries its verdict; without one, fail closed
                    raise ValueError("an allowed shell call without its verdict")
                updated = wrap_for_agent(
                    call,
                    verdict,
                    self.server.store,
                    self.server.probe,
                    policy=begun.policy if begun is not None else None,
                    socket=self.server.own_socket,
                    network=self._network_for(call),
                    cls=begun.cls if begun is not None else None,
                    by_person=source == "user",
                )
            except Exception as e:  # an allow we cannot wrap as planned is not an allow
                log.exception("sandbox wrapping failed; denying", tool=call.tool)
                decision, source, reason = "deny", "error", f"sandbox wrapping failed ({type(e).__name__}); denied"
            else:
                if updated is None and verdict is not None and shaping.allowed_because_sandboxed(verdict):
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
        self.server.stats.count(decision.decision, decision.source)
        mode = next((s.outcome for s in trace or () if s.step == "mode"), None)  # the engine's first step
        self.server.audit.write(
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

    def ask(
        self,
        conn: Connection,
        msg: p.Request,
        verdict: p.Verdict,
        session: Session,
        started: float,
        begun: gate.Begun | None = None,
    ) -> None:
        """The ask waits for a person: ``pending`` to the agent, a prompt to every UI, an alert if [notify]
        waits; the agent's process ids are taken now, while the requester's parent chain is alive."""
        rid = secrets.token_hex(16)
        now = time.time()
        timeout = self.prompt_timeout(msg.call, begun.policy if begun is not None else None)
        if not conn.send(p.encode(p.Pending(id=rid, deadline=now + timeout, ref=msg.ref))):
            self.record(
                rid,
                msg.call,
                p.Decision("deny", "the requester disconnected", "cancelled"),
                started,
                peer=conn.peer,
            )
            return
        if conn.closed or self.server.stopping_now:
            return
        verdict_json = _json_encoder.encode(verdict)
        entry = PendingEntry(
            rid,
            _json_encoder.encode(msg.call),
            pack(verdict_json, len(self.server.pending)),
            conn,
            msg.ref,
            now,
            now + timeout,
            time.monotonic() + timeout,
            started,
            self.server.answers.agent_pids(conn, msg.call),
            # a person may hold it until shortly before the requester stops waiting (docs/PROTOCOL.md "hold")
            limit=started + msg.max_wait - HOLD_MARGIN if msg.max_wait is not None else None,
        )
        self.server.pending.add(entry)
        self.server.audit.ask_opened(rid, msg.call)  # a crash before its answer still leaves it recorded
        if self.server.alerts.waits:
            self.server.alerts.asked(rid, entry.call, entry.deadline_wall)
        if self.server.subscribers:
            prompt = p.encode(p.Prompt(item=entry.item(verdict_json)))  # not unpacked again
            for ui in list(self.server.subscribers):  # a UI dropped mid-fan-out must not cut it short
                ui.post(prompt)

    def prompt_timeout(self, call: p.CallInfo, policy: Policy | None) -> float:
        """The provider's ``prompt_timeout`` from the policy of the call's workspace (the one the gate decided
        with, not looked up again), else --pending-timeout."""
        try:
            if policy is None:
                policy = self.server.store.policy_for(gate.workspace_of(call))
            configured = policy.provider(call.provider).prompt_timeout
        except Exception:  # a policy problem costs the setting, never the request
            log.exception("prompt_timeout lookup failed; using the default")
            return self.server.config.pending_timeout
        if configured is None or not 0 < configured <= MAX_PROMPT_TIMEOUT:
            return self.server.config.pending_timeout
        return float(configured)

    def expire(self, entry: PendingEntry) -> None:
        self.server.answers.resolve(entry, "deny", "timeout", "nobody answered before the deadline")

    def on_cancel(self, conn: Connection, msg: p.Cancel) -> None:
        entry = self.server.pending.get(msg.id)
        if entry is None or (entry.conn is not conn and conn.role != "admin"):
            if self.server.pending.decided(msg.id) and entry is None:
                self.server.reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self.server.reply_error(conn, "not_found", "no such pending request of yours", msg.ref)
            return
        by = None if entry.conn is conn else conn
        self.server.answers.resolve(
            entry, "deny", "cancelled", "cancelled by the requester" if by is None else "cancelled by admin", by=by
        )
        conn.send(p.encode(p.Ack(ref=msg.ref, detail="cancelled")))

    def _network_for(self, call: p.CallInfo) -> Callable[[str, str, str], tuple[str, str] | None]:
        """For a wrapped call with a filtered network: its proxy context, under the agent's session (so a
        "session" answer lasts for the session and UIs name the agent), guarded against the agent."""

        def register(command: str, cwd: str, workspace: str) -> tuple[str, str] | None:
            if self.server.network is None:
                return None  # the proxy is not serving (yet): the command runs with no network
            guard = frozenset(pid for pid in (call.agent_pid,) if pid is not None)
            context: tuple[str, str] | None = self.server.network.register(
                command, cwd, workspace, call.session, guard, self.server.store, provider=call.provider
            )
            return context

        return register
