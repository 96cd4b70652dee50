"""The request lifecycle: a tool call from an agent, from its arrival to its audit record.

Theory of operation. ``on_request`` hands the call to the decision pipeline (``nexusd.decision.pipeline``):
its facts (workspace, policy, memo replay, classification) are computed in the decision pool, off the
event loop and within a deadline, and the ruling (the engine over those facts) runs here; a call that
needs programs (hooks, auto mode's reviewer) goes on to ``gate.run_rounds``. ``settle`` applies the
daemon's verdict-shaping steps (``Pipeline.shape`` over ``DaemonShaping``: audit refusal, runaway limits,
stopping, no UI, pending limits) and then either replies (``reply_and_record``: the decision, sandbox-wrapped
when it is a shell allow, its plan made in the pool, and its audit record) or turns the ask into a pending
entry (``ask``) that a person's answer (``answers.py``), a cancel or the deadline resolves. What was
computed once for the request (its workspace, policy and shell parse: ``gate.Begun``) is carried to the
wrap; nothing is recomputed. Every path that is not an explicit allow ends in deny.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.engine import HUMAN_FLAG, UNTRUSTED_FLAG
from nexusd.core.model import Session
from nexusd.core.policy.policy import Policy
from nexusd.core.tools import SHELL_TOOLS
from nexusd.daemon.audit import held_until_recorded
from nexusd.daemon.connection import Connection
from nexusd.daemon.guard import agent_pids, remember_requester
from nexusd.daemon.pending import PendingEntry, pack
from nexusd.daemon.uploads import Uploads
from nexusd.daemon.wire import wire_decision
from nexusd.decision.pipeline import WrapOutcome, is_shell
from nexusd.policy import gate, shaping
from nexusd.policy.grants import Use
from nexusd.sandbox.previewrun import PREVIEW_FLAG, PREVIEW_TOOL

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")

HOLD_MARGIN = 1.5  # seconds a held deadline stays before the requester's own max_wait: the deny must reach it
_json_encoder = msgspec.json.Encoder()


class RequestLifecycle:
    """Settle, ask, reply and record agents' tool calls (one per daemon; state lives in ``DaemonState``)."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.shaping = DaemonShaping(state, self)

    def on_request(self, conn: Connection, msg: p.Request) -> Coroutine[Any, Any, None] | None:
        """Start the call's decision (``_decide``): its facts at once, its ruling in the connection's order."""
        started = time.monotonic()
        if msg.uploads:  # large input strings came in ``part`` lines: put them back before anything reads the call
            whole, why = (conn.uploads or Uploads()).take(msg.uploads, msg.call.input)
            if why is not None:
                verdict = p.Verdict("deny", f"{why}; denied", "error")
                return self.settle(conn, msg, verdict, self.state.session_for(msg.call), started, None)
            msg = msgspec.structs.replace(
                msg, call=msgspec.structs.replace(msg.call, input={**msg.call.input, **whole})
            )
        call = msg.call
        if call.tool == PREVIEW_TOOL:
            self.preview(conn, msg, started)
            return None
        remember_requester(self.state.agents, conn, call)
        if (
            self.state.probe is None
            and self.state.probe_fn is not None
            and call.tool in SHELL_TOOLS  # the sandbox wraps a subset of these
        ):
            return self._after_probe(conn, msg)  # a shell call is planned with the probe: wait for it
        session = self.state.session_for(call)
        # Its facts start now, beside the connection's earlier calls still in the pool; its ruling and reply
        # wait for theirs (``ruled``), so a connection's calls are ruled and answered in the order they came.
        prev = conn.ruled
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.ruled = done
        conn.deciding += 1
        work = self._decide(conn, msg, session, started, prev, done)
        if conn.deciding > self.state.config.max_pending_per_connection:
            return work  # that many under way: the connection reads no more until this one is settled
        conn.server.spawn(lambda: work)
        return None

    async def _after_probe(self, conn: Connection, msg: p.Request) -> None:
        """The first shell calls after start (socket activation starts us on the first hook) wait for the
        start-up probe instead of being planned without one (refused)."""
        async with self.state.queries.probe_lock:  # the start-up probe holds it until it has an answer
            pass
        if self.state.probe is None:
            await self.state.queries.refresh_probe()
        if self.state.probe is None:  # no probe function answered: decide without (fails closed)
            self.state.probe = p.SandboxProbe(platform="other", available=False, reason="the sandbox was not probed")
        more = self.on_request(conn, msg)
        if more is not None:
            await more

    async def _decide(
        self,
        conn: Connection,
        msg: p.Request,
        session: Session,
        started: float,
        prev: asyncio.Future[None] | None,
        done: asyncio.Future[None],
    ) -> None:
        """The pipeline (``nexusd.decision.pipeline``): facts in the pool, the ruling here (after ``prev``,
        the connection's previous call), the rounds if any; then shaping and the reply; then ``done``."""
        asked: list[PendingEntry | None] = []  # a person was asked while the hooks run: the entry (None: ask ended it)
        broke: list[BaseException] = []

        def race(provisional: p.Verdict, begun: gate.Begun) -> None:
            """Every hook passing would still leave the call to a person: ask that person now, while the
            hooks run (``hooks_answered`` settles the race); the connection's next call need not wait."""
            if provisional.decision != "ask":
                return  # passing would settle it without a person: the hooks speak first
            shaped, wait = self.shape(provisional, msg.call, begun.policy, msg.on_no_ui, conn)
            if not wait:
                return  # no UI, a limit, stopping: decided once the hooks have answered, as without a race
            try:
                entry = self.ask(conn, msg, shaped, session, started, begun)
            except Exception as e:  # half an ask: the call is denied below, never left without an answer
                broke.append(e)
                raise
            asked.append(entry)
            if not done.done():
                done.set_result(None)

        try:
            t0 = time.perf_counter_ns()
            verdict, begun = await self.state.pipeline.verdict(
                msg.call, session, sandbox=self.state.probe, after=prev, race=race
            )
            self.state.stats.decided(time.perf_counter_ns() - t0)
            if asked:
                if asked[0] is not None:
                    self.hooks_answered(asked[0], verdict)
            elif broke:
                self.reply_and_record(conn, msg.ref, msg.call, gate.failed(broke[0]), started, begun)
            else:
                await self.settle(conn, msg, verdict, session, started, begun)
        finally:
            conn.deciding -= 1
            if not done.done():
                done.set_result(None)
            if conn.ruled is done:
                conn.ruled = None  # nothing after it: the connection keeps no future

    async def settle(
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
        the same; None when the gate failed. An allowed shell call's sandbox plan is made in the pool."""
        call = msg.call
        state = self.state
        if UNTRUSTED_FLAG in verdict.flags and begun is not None and begun.policy is not None:
            ws = begun.policy.workspace
            if begun.policy.trust == "new" and ws and ws not in session.trust_asked:
                session.trust_asked = (*session.trust_asked[-15:], ws)  # asked once per session and workspace
        if verdict.source == "rule" and verdict.rule and verdict.rule_origin:
            try:
                state.grants.count_use(Use(verdict.rule, verdict.rule_origin, call.session))
            except Exception:  # a count must never cost the decision
                log.exception("grant use count failed")
        verdict, wait = self.shape(verdict, call, begun.policy if begun is not None else None, msg.on_no_ui, conn)
        if wait:
            self.ask(conn, msg, verdict, session, started, begun)
            return
        wrap: WrapOutcome | None = None
        if verdict.decision == "allow" and is_shell(call, verdict):
            try:
                prepared = await self.state.pipeline.prepare_wrap(call, verdict, state.probe, begun, state.own_socket)
                wrap = (prepared, None)
            except Exception as e:  # denied in ``decision``, which says why
                wrap = (None, e)
        self.reply_and_record(conn, msg.ref, call, verdict, started, begun, wrap=wrap)

    def shape(
        self,
        verdict: p.Verdict,
        call: p.CallInfo,
        policy: Policy | None,
        on_no_ui: p.NoUi | None,
        conn: Connection | None,
    ) -> tuple[p.Verdict, bool]:
        """``Pipeline.shape`` over this daemon's state now (``conn`` None: a check)."""
        on_connection = len(conn.pending) if conn is not None and conn.pending is not None else None
        return self.state.pipeline.shape(verdict, call, policy, on_no_ui, on_connection, self.shaping)

    def reply_and_record(
        self,
        conn: Connection,
        ref: str | None,
        call: p.CallInfo,
        verdict: p.Verdict,
        started: float,
        begun: gate.Begun | None = None,
        *,
        wrap: WrapOutcome | None = None,
    ) -> None:
        """The decision settled without a person: sent (sandbox-wrapped when a shell allow), then audited
        with the whole trace, the wrap's step included."""
        decision = wire_decision(
            self.state, call, verdict.decision, verdict.reason, verdict.source, verdict, ref=ref, begun=begun, wrap=wrap
        )
        # an allow that can change files goes out after its checkpoint (nexusd/undo) and, under [audit]
        # on_failure = "deny", only once it is recorded
        deliver = functools.partial(self.state.undo.send, conn.send, call, decision, verdict)
        confirm = held_until_recorded(conn.send, decision, self.state.strict_audit(), deliver)
        if confirm is None:
            deliver()
        self.state.replies.record(
            self.state.replies.record_id(),
            call,
            decision,
            started,
            peer=conn.peer,
            trace=[*verdict.trace, *shaping.wrap_steps(verdict.decision, decision)],
            requirement=verdict.requirement,
            confirm=confirm,
        )

    def ask(
        self,
        conn: Connection,
        msg: p.Request,
        verdict: p.Verdict,
        session: Session,
        started: float,
        begun: gate.Begun | None = None,
    ) -> PendingEntry | None:
        """The ask waits for a person: ``pending`` to the agent, a prompt to every UI, an alert if [notify]
        waits; the agent's process ids are taken now, while the requester's parent chain is alive. Returns
        the pending entry (None: the requester went away first, or the daemon is stopping)."""
        rid = secrets.token_hex(16)
        now = time.time()
        timeout = self.state.prompt_timeout(msg.call, begun.policy if begun is not None else None)
        if not conn.send(p.encode(p.Pending(id=rid, deadline=now + timeout, ref=msg.ref))):
            self.state.replies.record(
                rid,
                msg.call,
                p.Decision("deny", "the requester disconnected", "cancelled"),
                started,
                peer=conn.peer,
            )
            return None
        if conn.closed or self.state.stopping_now:
            return None
        verdict_json = _json_encoder.encode(verdict)
        entry = PendingEntry(
            rid,
            _json_encoder.encode(msg.call),
            pack(verdict_json, len(self.state.pending)),
            conn,
            msg.ref,
            now,
            now + timeout,
            time.monotonic() + timeout,
            started,
            agent_pids(conn, msg.call, self.state.daemon_ancestors),
            # a person may hold it until shortly before the requester stops waiting (docs/PROTOCOL.md "hold")
            limit=started + msg.max_wait - HOLD_MARGIN if msg.max_wait is not None else None,
        )
        self.state.pending.add(entry)
        self.state.audit.ask_opened(rid, msg.call)  # a crash before its answer still leaves it recorded
        if self.state.alerts.waits:
            self.state.alerts.asked(rid, entry.call, entry.deadline_wall)
        if self.state.subscribers:
            prompt = p.encode(p.Prompt(item=entry.item(verdict_json)))  # not unpacked again
            for ui in list(self.state.subscribers):  # a UI dropped mid-fan-out must not cut it short
                ui.post(prompt)
        return entry

    def preview(self, conn: Connection, msg: p.Request, started: float) -> None:
        """A sandboxed command's changes held in an overlay (docs/UNDO.md, preview before effect): always put
        to a person, never to the engine, a rule, a mode or a hook. allow = apply, deny = discard, and the
        deadline discards. The answer must be ``once`` (``PREVIEW_FLAG``: ``answers.py``)."""
        verdict = preview_verdict(msg.call)
        if verdict.decision == "deny":
            self.reply_and_record(conn, msg.ref, msg.call, verdict, started)
            return
        self.ask(conn, msg, verdict, self.state.session_for(msg.call), started)

    def hooks_answered(self, entry: PendingEntry, verdict: p.Verdict) -> None:
        """The hooks of a call put to a person while they ran (``_decide``'s race) have answered; ``verdict``
        is the call's verdict with their answers. The first decisive answer wins. Still pending: a deny (a
        hook's, or a failure's: fail closed) settles it, and the prompt is withdrawn from every UI (``resolved``);
        a hook's ask, or every hook letting it pass, leaves it to the person (an allow cannot come of it: the
        race starts only when passing ends in an ask; were one to, the person still decides, the stricter).
        Already settled (a person, a cancel, the deadline): the hooks' word is only audited (``hook_late``)."""
        steps = tuple(s for s in verdict.trace if s.step == "hooks") or (p.TraceStep("hooks", verdict.decision),)
        if self.state.pending.get(entry.id) is entry:  # no await from here to the claim: one resolution
            entry.steps = steps
            if verdict.decision == "deny":
                self.state.answers.resolve(entry, "deny", verdict.source, verdict.reason)
            elif verdict.decision == "allow":
                log.warning("the hooks' answers allow what a person was asked; the person decides", id=entry.id)
            return
        self.state.replies.record(
            self.state.replies.record_id(),
            entry.call,
            p.Decision(
                verdict.decision,
                f"the hooks answered after ask {entry.id} was settled (only recorded): {verdict.reason}",
                verdict.source,
            ),
            entry.started,
            peer=entry.conn.peer,
            event="hook_late",
            trace=[p.TraceStep("pending", "settled", f"ask {entry.id} was settled before its hooks answered"), *steps],
            requirement=verdict.requirement,
        )

    def expire(self, entry: PendingEntry) -> None:
        self.state.answers.resolve(entry, "deny", "timeout", "nobody answered before the deadline")

    def on_cancel(self, conn: Connection, msg: p.Cancel) -> None:
        entry = self.state.pending.get(msg.id)
        if entry is None or (entry.conn is not conn and conn.role != "admin"):
            if self.state.pending.decided(msg.id) and entry is None:
                self.state.reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self.state.reply_error(conn, "not_found", "no such pending request of yours", msg.ref)
            return
        by = None if entry.conn is conn else conn
        self.state.answers.resolve(
            entry, "deny", "cancelled", "cancelled by the requester" if by is None else "cancelled by admin", by=by
        )
        conn.send(p.encode(p.Ack(ref=msg.ref, detail="cancelled")))


def preview_verdict(call: p.CallInfo) -> p.Verdict:
    """A preview's ask (allow applies the overlay's changes, deny discards them), or a deny when its input
    is malformed: a pure function of the call."""
    keys = {"command": str, "exit_code": int, "summary": str, "changes": list, "diff": str}
    bad = [k for k, t in keys.items() if not isinstance(call.input.get(k), t)]
    if not isinstance(call.input.get("conflicts", []), list):
        bad.append("conflicts")
    if bad or set(call.input) - {*keys, "conflicts"}:
        return p.Verdict("deny", f"a malformed preview ({', '.join(bad) or 'unknown keys'}); discarded", "error")
    inp = call.input
    reason = (
        f"preview: apply what `{str(inp['command'])[:300]}` changed in {call.workspace or call.cwd}? "
        f"{inp['summary']} (exit {inp['exit_code']}); allow applies it, deny discards it"
    )
    conflicts = [str(c) for c in inp.get("conflicts", [])]
    if conflicts:
        reason += (
            f"; {len(conflicts)} path(s) changed in the workspace since the command started, and allow "
            f"overwrites them: {', '.join(conflicts[:10])}"
        )
    return p.Verdict("ask", reason, "safety", flags=[HUMAN_FLAG, PREVIEW_FLAG])


class DaemonShaping:
    """The daemon's state as the shaping steps read it (``nexusd.decision.pipeline.ShapingState``)."""

    def __init__(self, state: DaemonState, requests: RequestLifecycle) -> None:
        self.state, self.requests = state, requests

    def audit_refusal(self) -> str | None:
        return self.state.audit_refusal() if self.state.audit_refuses() else None

    def runaway(self, call: p.CallInfo, policy: Policy | None, *, count: bool) -> str | None:
        state = self.state
        limits = (policy if policy is not None else state.store.policy).limits
        now = time.monotonic()
        why = state.limiter.check(call, limits, now)
        if why is None and count:
            state.limiter.count(call, limits, now)
        return why

    def stopping(self) -> bool:
        return self.state.stopping_now

    def someone_answers(self) -> bool:
        return bool(self.state.subscribers) or bool(self.state.alerts.waits)  # [notify]: wait for a person

    def no_ui_setting(self) -> str:
        return self.state.store.policy.notify.no_ui

    def pending_limit(self, on_connection: int | None) -> str | None:
        cfg = self.state.config
        if on_connection is not None and on_connection >= cfg.max_pending_per_connection:
            return f"too many pending requests on this connection (limit {cfg.max_pending_per_connection})"
        if len(self.state.pending) >= cfg.max_pending:
            return f"too many pending requests in the daemon (limit {cfg.max_pending})"
        return None
