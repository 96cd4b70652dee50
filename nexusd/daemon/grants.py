"""Grants: what a person's answer gives beyond one call (a session's rules, a timed grant, a learned rule).
Each rule is checked (too broad, to be confirmed, refused by the store: also ``nexusctl`` and the UIs'
rule check) and recorded with who gave it; timed grants expire by a timer; a person lists and revokes
what is in force (``nexusctl grants``, the UIs).

An answer is settled by ``answers.py``, which asks ``learn`` first; the table itself, its file and its rules are
``nexusd/policy/grants.py``'s. A timed grant is armed with one timer at its expiry, and re-armed at start
for those the table kept (``Server.serve``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Literal

import structlog

from nexusd import protocol as p
from nexusd.core.policy.suggest import rule_status
from nexusd.daemon.connection import Connection
from nexusd.daemon.pending import PendingEntry
from nexusd.policy.store import check_grantable

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")


def why_refused(e: Exception) -> str:
    """The store's refusal as is; a write that failed (a full disk, a read-only directory) says so, loudly."""
    if isinstance(e, OSError):
        log.error("policy change not saved", error=str(e))
        return f"could not be saved ({e.strerror or e})"
    return str(e)


class Grants:
    """What answers grant: checking and giving rules beyond one call, expiring, listing and revoking them."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def learn(self, conn: Connection, msg: p.Answer, entry: PendingEntry) -> bool:
        """What an answer beyond once teaches (``msg.scope``: session rules, a timed grant, learned rules),
        recorded before the call is settled. False when it cannot be given as it is: the person is told why
        and the request stays pending for another answer."""
        verdict = entry.verdict
        rules = list(msg.rules) if msg.rules else list(verdict.suggestions)
        kind: Literal["allow", "deny"] = "allow" if msg.decision == "allow" else "deny"
        now = time.time()
        problem = self.grant_problem(msg, rules, kind)
        if problem:
            self.state.reply_error(conn, "refused", problem, msg.ref)
            return False
        if msg.scope == "session":
            session = self.state.session_by_id(entry.call.session)
            if msg.decision == "allow":
                session.allow_rules = (*session.allow_rules, *(r for r in rules if r not in session.allow_rules))
            else:
                session.deny_rules = (*session.deny_rules, *(r for r in rules if r not in session.deny_rules))
            self.give(kind, rules, "session", conn, now, session=entry.call.session)
        elif msg.scope == "timed":
            try:  # the same checks as "always": a timed grant is an "always" with an end
                check_grantable(kind, rules, verdict)
            except ValueError as e:
                self.state.reply_error(conn, "refused", f"not granted: {e}; the request is still pending", msg.ref)
                return False
            assert msg.duration is not None
            if not self.give(kind, rules, "timed", conn, now, expires=now + msg.duration):
                self.state.reply_error(
                    conn,
                    "refused",
                    f"not granted: {self.state.grants.path} cannot be written; the request is still pending",
                    msg.ref,
                )
                return False
        else:
            try:
                self.state.store.learn(kind, rules, verdict=verdict)
            except (ValueError, OSError) as e:
                self.state.reply_error(
                    conn, "refused", f"not remembered: {why_refused(e)}; the request is still pending", msg.ref
                )
                return False
            self.give(kind, [r for r in rules if not r.startswith("Trust(")], "learned", conn, now)
        return True

    def on_rule_check(self, conn: Connection, msg: p.RuleCheck) -> None:
        conn.send(p.encode(p.RuleCheckReply(results=[self.check_rule(msg.kind, r) for r in msg.rules], ref=msg.ref)))

    def check_rule(self, kind: Literal["allow", "deny"], rule: str) -> p.RuleVerdict:
        """The one narrowness check (``suggest.rule_status``) plus what the store refuses to grant."""
        status, reason = rule_status(kind, rule.strip())
        if status != "refused" and kind == "allow" and not rule.strip().startswith("Trust("):
            try:
                check_grantable(kind, [rule.strip()], None)
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

    def give(
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
                self.arm(g.id, g.expires)
            log.info("grant given", id=g.id, kind=kind, rule=g.rule, scope=scope, by=conn.label, expires=g.expires)
        return True

    def arm(self, gid: str, expires: float) -> None:
        """One timer per timed grant, at its expiry (the engine already ignores it from that instant)."""
        old = self._timers.pop(gid, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[gid] = loop.call_later(max(0.0, expires - time.time()), self._expired, gid)

    def _expired(self, gid: str) -> None:
        self._timers.pop(gid, None)
        g = self.state.grants.get(gid)
        if g is None:
            return
        if (g.expires or 0.0) > time.time():  # re-granted with a later expiry meanwhile
            self.arm(gid, g.expires or 0.0)
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
        timer = self._timers.pop(g.id, None)
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
