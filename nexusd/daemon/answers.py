"""Answers: a person's word on a pending request, and what it leaves behind.

Theory of operation. polkit splits authority (``check_authorization``: decide) from the agent
(``initiate_authentication``: ask a person); here ``requests.py`` is the authority and this module the
agent's side. ``on_answer`` refuses an answer from the requesting agent's own process tree (self-approval,
``guard.agent_pids`` taken while the requester still waits), checks the answer's shape, records what it teaches
(session rules, timed grants, learned rules: ``learning``), and ``resolve`` settles the entry atomically:
no await between the pending check and the claim, so exactly one resolution wins (an answer, a cancel,
the deadline, a disconnect, shutdown). An edited answer is decided again by the gate and may not widen
what the person saw. What an answer grants beyond its call is recorded by ``grants.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.engine import HUMAN_FLAG
from nexusd.daemon.audit import held_until_recorded
from nexusd.daemon.connection import Connection
from nexusd.daemon.grants import Grants
from nexusd.daemon.guard import answered_by_its_agent
from nexusd.daemon.pending import PendingEntry
from nexusd.daemon.wire import wire_decision
from nexusd.decision.pipeline import WrapOutcome, is_shell
from nexusd.policy import gate, shaping
from nexusd.policy.edits import EDITABLE_PROVIDERS, MERGING_PROVIDERS, widening
from nexusd.policy.grants import MAX_DURATION
from nexusd.sandbox.previewrun import PREVIEW_FLAG

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")


class Answers:
    """Resolve pending requests: answers, self-approval and what they teach."""

    def __init__(self, state: DaemonState, grants: Grants) -> None:
        self.state = state
        self.grants = grants  # what an answer gives beyond its call (session, timed): recorded there

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
        if decision == "allow" and self.state.audit_refuses():
            decision, reason = "deny", f"{reason}; but {self.state.audit_refusal()}"
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
        d = wire_decision(
            self.state,
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
        strict = notify_requester and self.state.strict_audit()
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

    def on_answer(self, conn: Connection, msg: p.Answer) -> Coroutine[Any, Any, None] | None:
        entry = self.state.pending.get(msg.id)
        if entry is None:
            if self.state.pending.decided(msg.id):
                self.state.reply_error(conn, "already_decided", "that request was already decided", msg.ref)
            else:
                self.state.reply_error(conn, "not_found", "no pending request with that id", msg.ref)
            return None
        if answered_by_its_agent(conn, entry.guard) or self.state.from_agent(
            conn
        ):  # its own agent's tree, or any agent's
            self.state.replies.self_approval_refused(conn, msg, entry)
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
        if msg.scope != "once" and not self.grants.learn(conn, msg, entry):
            return None  # refused, said why; the request stays pending
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
