"""Answers: a person's word on a pending request, and what it leaves behind.

Theory of operation. polkit splits authority (``check_authorization``: decide) from the agent
(``initiate_authentication``: ask a person); here ``requests.py`` is the authority and this module the
agent's side. ``on_answer`` refuses an answer from the requesting agent's own process tree (self-approval,
``agent_pids`` taken while the requester still waits), checks the answer's shape, records what it teaches
(session rules, timed grants, learned rules: ``learning``), and ``resolve`` settles the entry atomically:
no await between the pending check and the claim, so exactly one resolution wins (an answer, a cancel,
the deadline, a disconnect, shutdown). An edited answer is decided again by the gate and may not widen
what the person saw. Grants (who gave what, until when) are listed and revoked here too.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.engine import HUMAN_FLAG
from nexusd.core.policy.suggest import rule_status
from nexusd.daemon.audit import held_until_recorded
from nexusd.daemon.connection import Connection
from nexusd.daemon.peer import ancestors, resolve_agent
from nexusd.daemon.pending import PendingEntry
from nexusd.decision.pipeline import WrapOutcome, is_shell
from nexusd.policy import gate, shaping
from nexusd.policy.edits import EDITABLE_PROVIDERS, MERGING_PROVIDERS, widening
from nexusd.policy.grants import MAX_DURATION
from nexusd.sandbox.previewrun import PREVIEW_FLAG

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")

HOLD_STEP = 60.0  # seconds a notification's Hold asks for (capped at what the agent can wait)


def why_refused(e: Exception) -> str:
    """The store's refusal as is; a write that failed (a full disk, a read-only directory) says so, loudly."""
    if isinstance(e, OSError):
        log.error("policy change not saved", error=str(e))
        return f"could not be saved ({e.strerror or e})"
    return str(e)


class Answers:
    """Resolve pending requests: answers, self-approval, learning and grants."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self._grant_timers: dict[str, asyncio.TimerHandle] = {}

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
    ) -> p.Decision | None:
        """Atomic: no await between the pending check and the claim, so exactly one resolution wins.
        ``edited``: the person's edited call and its own verdict, which replace the agent's (allow only).
        The decision sent, or None when it is sent later: an allowed shell call is planned for the sandbox
        in the decision pool first (a big tree's scan, a stalled mount), never on the loop. ``then``: run
        once it is sent (the answering UI's ack, which keeps coming after every UI's ``resolved``)."""
        if decision == "allow" and self.state.requests.audit_refuses():
            decision, reason = "deny", f"{reason}; but {self.state.requests.audit_refusal()}"
        self.state.pending.claim(entry)
        call, verdict = edited if edited is not None and decision == "allow" else (entry.call, entry.verdict)
        answered_by = by.label if by is not None else label
        self.state.alerts.resolved(entry.id)
        settle = functools.partial(
            self._settle,
            entry,
            call,
            verdict,
            decision,
            source,
            reason,
            answered_by=answered_by,
            notify_requester=notify_requester,
            by=by,
            scope=scope,
            message=message,
            abort=abort,
            edited=edited,
            then=then,
        )
        if decision == "allow" and is_shell(call, verdict) and self.state.pipeline.pool is not None:

            async def planned() -> None:
                try:
                    prepared = await self.state.pipeline.prepare_wrap(
                        call, verdict, self.state.probe, None, self.state.own_socket, by_person=source == "user"
                    )
                except Exception as e:  # denied in ``decision``, which says why
                    settle(wrap=(None, e))
                except BaseException:  # the daemon stops: the claimed answer is still sent and recorded, as a deny
                    settle(wrap=(None, RuntimeError("the daemon stopped before the sandbox plan was made")))
                    raise
                else:
                    settle(wrap=(prepared, None))

            entry.conn.server.spawn(planned)
            return None
        return settle(wrap=None)

    def _settle(
        self,
        entry: PendingEntry,
        call: p.CallInfo,
        verdict: p.Verdict,
        decision: p.DecisionKind,
        source: p.Source,
        reason: str,
        *,
        answered_by: str | None,
        notify_requester: bool,
        by: Connection | None,
        scope: p.Scope | None,
        message: str | None,
        abort: bool,
        edited: tuple[p.CallInfo, p.Verdict] | None,
        then: Callable[[], object] | None,
        wrap: WrapOutcome | None,
    ) -> p.Decision:
        """The rest of ``resolve``, once the claimed entry's sandbox plan (if any) is made: send, tell every
        UI, record."""
        rid = entry.id
        d = self.state.requests.decision(
            call,
            decision,
            reason,
            source,
            verdict if decision == "allow" else None,  # only an allow needs it (sandbox wrapping)
            ref=entry.ref,
            pending_id=rid,
            message=message,
            answered_by=answered_by,
            wrap=wrap,
        )
        if source == "user" and d.decision == "allow" and (s := self.state.sessions.get(entry.call.session)):
            gate.person_allowed(s)
        if abort:
            d = msgspec.structs.replace(d, abort=True)
        if edited is not None and d.decision == "allow" and d.updated_input is None:
            d.updated_input = call.input  # the agent runs the edited call (wrapped above when sandboxed)
        strict = notify_requester and self.state.requests.strict_audit()
        # an allow that can change files goes out after its checkpoint (nexusd/undo); under on_failure = "deny"
        # only once it is recorded
        deliver = functools.partial(
            self.state.undo.send, entry.conn.post, call, d, verdict if decision == "allow" else None
        )
        confirm = held_until_recorded(entry.conn.post, d, strict, deliver)
        if notify_requester and confirm is None:
            deliver()
        resolved = p.encode(
            p.Resolved(
                id=rid, decision=d.decision, source=d.source, reason=d.reason, answered_by=answered_by, scope=scope
            )
        )
        for ui in list(self.state.subscribers):  # a UI dropped mid-fan-out must not cut it short
            ui.post(resolved)
        how = f"{answered_by} ({scope or 'once'})" if source == "user" else reason
        trace = [
            *entry.verdict.trace,
            p.TraceStep("pending", "ask", "waited for a person"),
            *entry.steps,
            p.TraceStep(source if source != "user" else "answer", decision, how),
        ]
        if edited is not None and decision == "allow":
            trace += [
                p.TraceStep("edit", "decided again", f"edited input: {msgspec.json.encode(call.input)[:300]!r}"),
                *(msgspec.structs.replace(s, step=f"edit.{s.step}") for s in edited[1].trace),
            ]
        self.state.replies.record(
            rid,
            call,
            d,
            entry.started,
            peer=entry.conn.peer,
            answer_pid=by.peer.pid if by is not None else None,
            scope=scope,
            trace=[*trace, *shaping.wrap_steps(decision, d)],
            requirement=entry.verdict.requirement,
            confirm=confirm,
        )
        if then is not None:
            then()
        return d

    def deny_from_notification(self, rid: str) -> None:
        """A desktop notification's Deny (the only answer a notification gives: see notify_person.py)."""
        entry = self.state.pending.get(rid)
        if entry is not None:
            self.resolve(entry, "deny", "user", "denied from a desktop notification", label="desktop notification")

    def hold_from_notification(self, rid: str) -> None:
        """A desktop notification's Hold: the same as a UI's (it only delays a deny)."""
        entry = self.state.pending.get(rid)
        if entry is not None:
            self.hold(entry, HOLD_STEP, "desktop notification")

    def hold(self, entry: PendingEntry, seconds: float, by: str) -> bool:
        """Push ``entry``'s deadline (at most to its limit) and tell every UI; False when it cannot move."""
        if not self.state.pending.extend(entry, seconds):
            return False
        held = p.encode(
            p.Held(
                id=entry.id,
                deadline=entry.deadline_wall,
                limit=entry.deadline_wall + (entry.limit - entry.deadline),
                by=by,
            )
        )
        for ui in list(self.state.subscribers):
            ui.post(held)
        log.info("ask held", id=entry.id, by=by, left=round(entry.deadline - time.monotonic(), 1))
        return True

    def on_hold(self, conn: Connection, msg: p.Hold) -> None:
        entry = self.state.pending.get(msg.id)
        if entry is None:
            code: p.ErrorCode = "already_decided" if self.state.pending.decided(msg.id) else "not_found"
            self.state.reply_error(conn, code, "no pending request with that id", msg.ref)
            return
        if not self.hold(entry, msg.seconds, conn.label):
            if entry.limit <= entry.deadline + 0.001:
                why = (
                    "cannot be held longer: its agent stops waiting then (its hook's timeout, or it did not "
                    "say how long it waits); answer now"
                )
            else:
                why = "already held that long"
            self.state.reply_error(conn, "refused", why, msg.ref)
            return
        left = entry.deadline - time.monotonic()
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"held: {left:.0f} s left")))

    def on_rule_check(self, conn: Connection, msg: p.RuleCheck) -> None:
        conn.send(p.encode(p.RuleCheckReply(results=[self.check_rule(msg.kind, r) for r in msg.rules], ref=msg.ref)))

    def check_rule(self, kind: Literal["allow", "deny"], rule: str) -> p.RuleVerdict:
        """The one narrowness check (``suggest.rule_status``) plus what the store refuses to grant."""
        status, reason = rule_status(kind, rule.strip())
        if status != "refused" and kind == "allow" and not rule.strip().startswith("Trust("):
            try:
                self.state.store.check_grantable(kind, [rule.strip()], None)
            except ValueError as e:
                status, reason = "refused", str(e)
        return p.RuleVerdict(rule=rule, status=status, reason=reason)  # type: ignore[arg-type]

    def grant_problem(self, msg: p.Answer, rules: list[str], kind: Literal["allow", "deny"]) -> str | None:
        """Why an answer beyond once cannot be given as it is (the request stays pending), or None."""
        if not rules:
            return f"no rule to remember for scope {msg.scope}: send rules, or answer once"
        why = self.unconfirmed(rules, msg.confirm_broad, session=msg.scope == "session") if kind == "allow" else None
        return f"{why}; the request is still pending" if why else None

    def unconfirmed(self, rules: list[str], confirmed: bool, *, session: bool = False) -> str | None:
        """Why allow rules may not be given as they are: a refused rule for a session (the store refuses the
        others in its own words), or a rule marked ``confirm`` the person did not confirm."""
        for r in rules:
            v = self.check_rule("allow", r)
            if v.status == "refused" and session:
                return f"{r} is too broad: {v.reason}"
            if v.status == "confirm" and not confirmed:
                return f"{r} needs a person's explicit confirmation ({v.reason}): show it and send confirm_broad"
        return None

    def agent_pids(self, conn: Connection, call: p.CallInfo) -> frozenset[int]:
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
        agents = frozenset(pids - self.state.daemon_ancestors)
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

    def on_answer(self, conn: Connection, msg: p.Answer) -> Coroutine[Any, Any, None] | None:
        entry = self.state.pending.get(msg.id)
        if entry is None:
            if self.state.pending.decided(msg.id):
                self.state.reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self.state.reply_error(conn, "not_found", "no pending request with that id", msg.ref)
            return None
        if self._self_approval(conn, entry) or self.state.from_agent(conn):  # its own agent's tree, or any agent's
            self.state.client_fault(conn, "self-approval refused", request=msg.id)
            self.state.replies.record(
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
            self.state.reply_error(
                conn,
                "self_approval",
                "refused: the answering process descends from an agent (the one that made the request, or "
                "another); a person answers from a terminal or UI outside the agents",
                msg.ref,
            )
            return None
        malformed = _malformed_answer(msg)
        if malformed is not None:
            self.state.reply_error(conn, "invalid_message", malformed, msg.ref)
            return None
        verdict = entry.verdict
        if PREVIEW_FLAG in verdict.flags and (
            msg.scope != "once" or msg.updated_input is not None or msg.rules or msg.duration is not None
        ):
            self.state.reply_error(
                conn,
                "invalid_message",
                "a preview is answered allow (apply its changes) or deny (discard them), once; it is still pending",
                msg.ref,
            )
            return None
        if msg.updated_input is not None:
            return self._edited_answer(conn, msg, msg.updated_input, entry)
        if HUMAN_FLAG in verdict.flags and msg.decision == "allow" and msg.scope != "once":
            self.state.reply_error(
                conn,
                "refused",
                "a person must approve each such call (require_human): answer allow "
                "once, or deny; the request is still pending",
                msg.ref,
            )
            return None
        rules = list(msg.rules) if msg.rules else list(verdict.suggestions)
        kind: Literal["allow", "deny"] = "allow" if msg.decision == "allow" else "deny"
        now = time.time()
        if msg.scope != "once":
            problem = self.grant_problem(msg, rules, kind)
            if problem:
                self.state.reply_error(conn, "refused", problem, msg.ref)
                return None
            if msg.scope == "session":
                session = self.state.session_by_id(entry.call.session)
                if msg.decision == "allow":
                    session.allow_rules = (*session.allow_rules, *(r for r in rules if r not in session.allow_rules))
                else:
                    session.deny_rules = (*session.deny_rules, *(r for r in rules if r not in session.deny_rules))
                self._grant(kind, rules, "session", conn, now, session=entry.call.session)
            elif msg.scope == "timed":
                try:  # the same checks as "always": a timed grant is an "always" with an end
                    self.state.store.check_grantable(kind, rules, verdict)
                except ValueError as e:
                    self.state.reply_error(conn, "refused", f"not granted: {e}; the request is still pending", msg.ref)
                    return None
                assert msg.duration is not None
                if not self._grant(kind, rules, "timed", conn, now, expires=now + msg.duration):
                    self.state.reply_error(
                        conn,
                        "refused",
                        f"not granted: {self.state.grants.path} cannot be written; the request is still pending",
                        msg.ref,
                    )
                    return None
            else:
                try:
                    self.state.store.learn(kind, rules, verdict=verdict)
                except (ValueError, OSError) as e:
                    self.state.reply_error(
                        conn, "refused", f"not remembered: {why_refused(e)}; the request is still pending", msg.ref
                    )
                    return None
                self._grant(kind, [r for r in rules if not r.startswith("Trust(")], "learned", conn, now)
        if self.state.pending.get(msg.id) is not entry:  # store.learn is synchronous, but be certain
            self.state.reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            return None
        reason = f"{'allowed' if msg.decision == 'allow' else 'denied'} by {conn.label}"
        if msg.scope == "timed":
            reason += f" (for {msg.duration:g} s)"
        elif msg.scope != "once":
            reason += f" ({msg.scope})"
        if msg.abort:
            reason += ", who also stopped the agent"
        ack = p.encode(p.Ack(ref=msg.ref, detail=f"{msg.decision} ({msg.scope}){' + abort' if msg.abort else ''}"))
        self.resolve(
            entry,
            msg.decision,
            "user",
            reason,
            by=conn,
            scope=msg.scope,
            message=msg.message,
            abort=msg.abort,
            then=lambda: conn.send(ack),
        )
        return None

    async def _edited_answer(
        self, conn: Connection, msg: p.Answer, updated: dict[str, Any], entry: PendingEntry
    ) -> None:
        """Allow once with the person's edit: the edited call is decided again by the gate as if the agent had
        sent it (hooks included); it must not be denied on its own nor widen what the person saw
        (nexusd/policy/edits.py). Refused: the request stays pending, for another answer."""
        call = entry.call
        if msg.decision != "allow" or msg.scope != "once" or msg.rules or msg.duration is not None:
            self.state.reply_error(
                conn, "invalid_message", "an edited input goes with allow, scope once, no rules", msg.ref
            )
            return
        if call.provider not in EDITABLE_PROVIDERS:
            self.state.reply_error(
                conn,
                "refused",
                f"{call.provider} cannot take a changed input back (edits work for "
                f"{', '.join(sorted(EDITABLE_PROVIDERS))}); answer the call as it is",
                msg.ref,
            )
            return
        dropped = sorted(set(call.input) - set(updated)) if call.provider in MERGING_PROVIDERS else []
        if dropped:
            self.state.reply_error(
                conn,
                "refused",
                f"{call.provider} merges an edited input into the original, so "
                f"removing {', '.join(dropped)} would not take: keep those keys",
                msg.ref,
            )
            return
        if msgspec.json.encode(updated) == msgspec.json.encode(call.input):
            self.state.reply_error(
                conn, "invalid_message", "the edited input is the original: answer without it", msg.ref
            )
            return
        edited_call = msgspec.structs.replace(call, input=updated)
        session = self.state.session_for(edited_call)
        try:
            edited, _ = await self.state.pipeline.verdict(edited_call, session, sandbox=self.state.probe, memo=False)
        except Exception as e:  # decide never raises; if it did, the edit is not taken
            log.exception("deciding an edited call failed")
            self.state.reply_error(
                conn, "refused", f"the edited call could not be decided ({type(e).__name__})", msg.ref
            )
            return
        why = widening(entry.verdict, edited)
        if why is not None:
            self.state.reply_error(conn, "refused", f"edit refused, {why}; the request is still pending", msg.ref)
            return
        if self.state.pending.get(msg.id) is not entry:  # answered, timed out or cancelled while the edit was decided
            self.state.reply_error(
                conn, "already_decided", "that request was decided while the edit was checked", msg.ref
            )
            return
        reason = f"allowed by {conn.label}, edited"
        ack = p.encode(p.Ack(ref=msg.ref, detail="allow (once), edited"))
        self.resolve(
            entry,
            "allow",
            "user",
            reason,
            by=conn,
            scope="once",
            message=msg.message,
            edited=(edited_call, edited),
            then=lambda: conn.send(ack),
        )

    def _grant(
        self,
        kind: Literal["allow", "deny"],
        rules: list[str],
        scope: Literal["session", "timed", "learned"],
        conn: Connection,
        now: float,
        *,
        session: str | None = None,
        expires: float | None = None,
    ) -> bool:
        """Record who gave what. A failure to record never undoes a grant already in force (session rules,
        learned.toml); a timed one only exists in the table, so it is not given at all (False)."""
        try:
            given = self.state.grants.add(
                kind, rules, scope, now=now, session=session, given_by=conn.label, ui=conn.name or None, expires=expires
            )
        except OSError as e:
            log.error("grants file cannot be written", error=str(e))
            return scope != "timed"
        for g in given:
            if g.expires is not None:
                self.arm_grant(g.id, g.expires)
            log.info("grant given", id=g.id, kind=kind, rule=g.rule, scope=scope, by=conn.label, expires=g.expires)
        return True

    def arm_grant(self, gid: str, expires: float) -> None:
        """One timer per timed grant, at its expiry (the engine already ignores it from that instant)."""
        old = self._grant_timers.pop(gid, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._grant_timers[gid] = loop.call_later(max(0.0, expires - time.time()), self._grant_expired, gid)

    def _grant_expired(self, gid: str) -> None:
        self._grant_timers.pop(gid, None)
        g = self.state.grants.get(gid)
        if g is None:
            return
        if (g.expires or 0.0) > time.time():  # re-granted with a later expiry meanwhile
            self.arm_grant(gid, g.expires or 0.0)
            return
        try:
            self.state.grants.remove(gid)
        except OSError as e:  # it no longer applies either way (timed_rules checks the clock)
            log.error("grants file cannot be written", error=str(e))
        log.info("grant expired", id=gid, rule=g.rule)

    def on_grants(self, conn: Connection, msg: p.Grants) -> None:
        live = {sid: (set(s.allow_rules), set(s.deny_rules)) for sid, s in self.state.sessions.items()}
        learned = [r for r in self.state.store.rules() if r.layer == "learned"]
        grants = self.state.grants.listing(learned, live, time.time())
        conn.send(p.encode(p.GrantsReply(grants=grants, ref=msg.ref)))

    def on_revoke_grant(self, conn: Connection, msg: p.RevokeGrant) -> None:
        live = {sid: (set(s.allow_rules), set(s.deny_rules)) for sid, s in self.state.sessions.items()}
        learned = [r for r in self.state.store.rules() if r.layer == "learned"]
        g = next((x for x in self.state.grants.listing(learned, live, time.time()) if x.id == msg.id), None)
        if g is None:
            self.state.reply_error(conn, "not_found", f"no grant {msg.id!r} in force", msg.ref)
            return
        if g.scope == "learned":
            try:
                self.state.store.change_rule("remove", g.kind, g.rule)
            except ValueError as e:
                self.state.reply_error(conn, "refused", str(e), msg.ref)
                return
        elif g.scope == "session" and g.session is not None:
            s = self.state.sessions.get(g.session)
            if s is not None:
                if g.kind == "allow":
                    s.allow_rules = tuple(r for r in s.allow_rules if r != g.rule)
                else:
                    s.deny_rules = tuple(r for r in s.deny_rules if r != g.rule)
        timer = self._grant_timers.pop(g.id, None)
        if timer is not None:
            timer.cancel()
        try:
            self.state.grants.remove(g.id)
        except OSError as e:
            # a timed grant that cannot be forgotten on disk would come back at restart: say so, but it is
            # already out of the table, so it no longer applies now
            self.state.reply_error(
                conn, "internal", f"revoked now, but {self.state.grants.path} cannot be written: {e}", msg.ref
            )
            return
        log.info("grant revoked", id=g.id, rule=g.rule, scope=g.scope, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"revoked {g.id}: {g.kind} {g.rule} ({g.scope})")))


def _malformed_answer(msg: p.Answer) -> str | None:
    """Why an answer's fields contradict each other (the request stays pending), or None."""
    if msg.scope == "never" and msg.decision != "deny":
        return "scope never goes with decision deny"
    if msg.abort and msg.decision != "deny":
        return "abort goes with decision deny"
    if (msg.scope == "timed") != (msg.duration is not None):
        return "duration goes with scope timed, and only with it"
    if msg.duration is not None and not 0 < msg.duration <= MAX_DURATION:
        return f"duration must be more than 0 and at most {MAX_DURATION:.0f} seconds"
    return None
