"""Queries and controls: what UIs and nexusctl ask about, and the policy changes they make.

Theory of operation. Nothing here decides a tool call. ``status``, ``rules``, ``audit`` and ``probe``
read the daemon's state; ``check`` runs the gate with ``dry_run`` (no side effects) and the verdict-shaping
steps that depend on the daemon's state now, so it shows the same chain a request would meet; ``sandbox_plan``
plans ``nexusctl run``'s command with the same code the agent's wrap uses; rule and trust changes go to the
policy store. A sandbox's violation report only adds an audit record and a notice.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import msgspec
import structlog

from nexusd import __version__
from nexusd import protocol as p
from nexusd.core.model import Session
from nexusd.daemon.audit import read_tail
from nexusd.daemon.connection import Connection
from nexusd.daemon.grants import why_refused
from nexusd.daemon.guard import agent_pids
from nexusd.decision.pool import FactsLate, PoolFull

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")

MAX_VIOLATIONS, MAX_VIOLATION_CHARS = 20, 1000  # per sandbox report
MAX_AUDIT_QUERY = 5_000


class Queries:
    """Answer queries and apply rule/trust changes."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.probe_lock = anyio.Lock()  # the start-up probe holds it until it has an answer

    def _counters(self) -> dict[str, int]:
        counters = dict(self.state.stats.counters)
        if self.state.memo is not None:
            for key, n in (
                ("memo/hit", self.state.memo.hits),
                ("memo/miss", self.state.memo.misses),
                ("memo/stale", self.state.memo.stale),
            ):
                if n:
                    counters[key] = n
        pool = self.state.pool.status()  # the decision pool (nexusd/decision/pool.py): shown once it has a story
        if any(n for key, n in pool.items() if key != "pool/workers"):
            counters.update(pool)
        return counters

    def on_status(self, conn: Connection, msg: p.Status) -> None:
        roles: dict[str, int] = {}
        for c in self.state.conns:
            key = c.role or "handshake"
            roles[key] = roles.get(key, 0) + 1
        sessions = {
            sid: s.override_mode or s.agent_mode or "default" for sid, s in list(self.state.sessions.items())[-1000:]
        }
        errors = list(self.state.store.errors)
        reply = p.StatusReply(
            version=__version__,
            pid=self.state.pid,
            uptime=round(time.monotonic() - self.state.started_mono, 3),
            connections=roles,
            pending=len(self.state.pending),
            counters=self._counters(),
            policy=self.state.store.sources(),
            policy_errors=errors,
            sandbox=self.state.probe,
            sessions=sessions,
            locked=self.state.store.policy.locked,
            audit_error=self.state.audit.failing,
            audit_unrecorded=self.state.audit.unrecorded,
            audit_on_failure=self.state.store.policy.audit_on_failure,
            audit_path=str(self.state.audit.path),
            audit_head=self.state.audit.chain[0],
            audit_lines=self.state.audit.chain[1],
            ref=msg.ref,
        )
        conn.send(p.encode(reply))

    async def on_check(self, conn: Connection, msg: p.Check) -> None:
        call = msg.call
        session = self.state.sessions.get(call.session)
        if session is None:
            session = Session(id=call.session, provider=call.provider, agent_mode=call.mode)
        session.grant_rules = self.state.grants.timed_rules(time.time())
        try:
            # the pipeline as a request meets it (facts in the pool), as a check: no hook runs, nothing counts
            verdict, begun = await self.state.pipeline.verdict(call, session, dry_run=True, sandbox=self.state.probe)
            policy = begun.policy if begun is not None else None
            # the shaping steps a request would meet now (nothing counted, nothing pending)
            verdict, _ = self.state.requests.shape(verdict, call, policy, None, None)
        except Exception as e:
            log.exception("check failed")
            verdict = p.Verdict("deny", f"internal error while deciding ({type(e).__name__}); denied", "error")
        conn.send(p.encode(p.CheckResult(verdict=verdict, ref=msg.ref)))

    def on_rules(self, conn: Connection, msg: p.Rules) -> None:
        rules = list(self.state.store.rules())
        for sid, s in self.state.sessions.items():
            rules += [p.RuleInfo("allow", r, "session", f"session:{sid}") for r in s.allow_rules]
            rules += [p.RuleInfo("deny", r, "session", f"session:{sid}") for r in s.deny_rules]
        conn.send(p.encode(p.RulesReply(rules=rules, trusted=list(self.state.store.trusted()), ref=msg.ref)))

    def on_rule_change(self, conn: Connection, msg: p.RuleChange) -> None:
        try:
            self.state.store.change_rule(msg.action, msg.kind, msg.rule)
        except (ValueError, OSError) as e:
            self.state.reply_error(conn, "refused", why_refused(e), msg.ref)
            return
        log.info("rule changed", action=msg.action, kind=msg.kind, rule=msg.rule, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"{msg.action} {msg.kind} {msg.rule}")))

    def on_trust_change(self, conn: Connection, msg: p.TrustChange) -> None:
        try:
            self.state.store.trust(msg.action, msg.path)
        except (ValueError, OSError) as e:
            self.state.reply_error(conn, "refused", why_refused(e), msg.ref)
            return
        log.info("trust changed", action=msg.action, path=msg.path, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"trust {msg.action} {msg.path}")))

    async def refresh_probe(self) -> p.SandboxProbe | None:
        if self.state.probe_fn is None:
            return None
        async with self.probe_lock:
            try:
                self.state.probe = await anyio.to_thread.run_sync(self.state.probe_fn, abandon_on_cancel=True)
                log.info("sandbox probe", available=self.state.probe.available, backend=self.state.probe.backend)
            except Exception as e:
                log.exception("sandbox probe failed")
                self.state.probe = p.SandboxProbe(platform="other", available=False, reason=f"probe failed: {e}")
        return self.state.probe

    async def on_probe(self, conn: Connection, msg: p.Probe) -> None:
        probe = self.state.probe
        if msg.refresh or probe is None:
            probe = await self.refresh_probe()
        if probe is None:
            probe = p.SandboxProbe(platform="other", available=False, reason="no probe configured")
        conn.send(p.encode(p.ProbeReply(probe=probe, ref=msg.ref)))

    async def on_sandbox_plan(self, conn: Connection, msg: p.SandboxPlan) -> None:
        from nexusd.sandbox.plan import runner_plan

        probe = self.state.probe if self.state.probe is not None else await self.refresh_probe()
        fifos: tuple[str, str] | None = None
        try:
            # the workspace scan asks the file system (a big tree, a stalled mount): in the pool, with a deadline
            plan, fifos = await self.state.pool.run(
                functools.partial(
                    runner_plan, msg.command, msg.cwd, self.state.store, probe, msg.session, msg.workspace
                ),
                self.state.config.facts_deadline,
                "sandbox plan",
            )
            if fifos is not None and self.state.network is not None:
                # who ran the command (the agent behind nexusctl run): it may not answer its own sandbox's asks
                guard = agent_pids(
                    conn,
                    p.CallInfo(provider="sandbox", session="", tool="Network", input={}, cwd=msg.cwd),
                    self.state.daemon_ancestors,
                )
                if self.state.network.register(
                    msg.command,
                    msg.cwd,
                    os.path.realpath(msg.workspace or msg.cwd),
                    msg.session,
                    guard,
                    self.state.store,
                    fifos=fifos,
                ):
                    plan = msgspec.structs.replace(plan, proxy_info=fifos[0], proxy_go=fifos[1])
                    fifos = None  # the proxy's now
            plan = msgspec.structs.replace(plan, ref=msg.ref)
        except (FactsLate, PoolFull) as e:
            plan = p.SandboxPlanReply(allowed=False, reason=f"planning failed: {e}", ref=msg.ref)
        except Exception as e:
            log.exception("sandbox plan failed")
            plan = p.SandboxPlanReply(allowed=False, reason=f"planning failed: {type(e).__name__}", ref=msg.ref)
        finally:
            for path in fifos or ():  # not taken: the runner finds none and runs with no network
                with contextlib.suppress(OSError):
                    os.unlink(path)
        conn.send(p.encode(plan))

    def on_sandbox_report(self, conn: Connection, msg: p.SandboxReport) -> None:
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
        self.state.replies.record(
            self.state.replies.record_id(),
            call,
            p.Decision("deny", reason, "safety"),
            time.monotonic(),
            peer=conn.peer,
            event="sandbox_violation",
        )
        notice = p.encode(
            p.SandboxNotice(
                command=command, cwd=call.cwd, violations=violations, session=session or None, time=time.time()
            )
        )
        for ui in list(self.state.subscribers):
            ui.post(notice)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"{len(violations)} recorded")))

    async def on_audit(self, conn: Connection, msg: p.Audit) -> None:
        limit = max(1, min(msg.limit, MAX_AUDIT_QUERY))
        match = {"session": msg.session, "tool": msg.tool, "decision": msg.decision, "source": msg.source, "id": msg.id}
        await anyio.to_thread.run_sync(self.state.audit.flush)
        records = await anyio.to_thread.run_sync(read_tail, self.state.audit.path, limit, match)
        conn.send(p.encode(p.AuditReply(records=records, ref=msg.ref)))
