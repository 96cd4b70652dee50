"""The proxy's connections as calls of the gate: the ``Network`` tool, decided, asked, audited.

Order (``nexusd.core.netpolicy.decide``): denied domains and WebFetch deny rules refuse; allowed domains
and WebFetch allow rules (policy, learned, session) pass on an allowed port; anything else is asked
through the pending table like every ask (``Prompt`` to UIs, first answer wins, the provider's prompt
timeout then deny, no UI connected = deny). An "always" answer learns ``WebFetch(domain:HOST)`` in the
user's policy; "session" keeps it for the agent session. A locked policy allows nothing by a rule.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import TYPE_CHECKING

import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.netpolicy import NetVerdict, Target, decide, patterns, private_refusal, wildcard_suggestion
from nexusd.daemon.peer import PeerCred
from nexusd.daemon.pending import PendingEntry, pack
from nexusd.policy.sandbox_settings import sandbox_settings
from nexusd.policy.shaping import NO_UI_FIX
from nexusd.sandbox.network import net_policy
from nexusd.sandbox.proxy import Context, NetworkProxy, Outcome

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState
    from nexusd.policy.store import PolicyStore

log = structlog.get_logger("nexusd.network")
TOOL = "Network"
_json = msgspec.json.Encoder()
_decision = msgspec.json.Decoder(p.Decision)


class _Requester:
    """Stands where a client connection stands in the pending table: the proxy waits on its answer."""

    def __init__(self, label: str) -> None:
        self.peer = PeerCred(uid=-1, gid=-1, pid=None)
        self.pending: list[str] | None = None
        self.closed = False
        self.role = "agent"
        self.label = label
        self.future: asyncio.Future[p.Decision] = asyncio.get_running_loop().create_future()

    def send(self, data: bytes) -> bool:
        try:
            d = _decision.decode(data)
        except msgspec.DecodeError:
            return True  # the Pending notice; only the Decision matters
        if not self.future.done():
            self.future.set_result(d)
        return True

    post = send


class NetworkGate:
    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.proxy = NetworkProxy(self.decide, self.closed, resolved=self.resolved)

    def call(self, ctx: Context, target: Target, scheme: str) -> p.CallInfo:
        return p.CallInfo(
            provider=ctx.provider,
            session=ctx.session,
            tool=TOOL,
            cwd=ctx.cwd,
            workspace=ctx.workspace,
            # "url" first in what people see (UIs and the audit summarize by it); the command is beside it
            input={
                "url": f"{scheme}://{target.display}",
                "host": target.host,
                "port": target.port,
                "scheme": scheme,
                "sandboxed_command": ctx.command,
                "workspace": ctx.workspace,
            },
        )

    def verdict(self, ctx: Context, target: Target) -> NetVerdict:
        srv = self.state
        policy = srv.store.policy_for(ctx.workspace)
        session = srv.sessions.get(ctx.session)  # looked up, not made: a command's id must not evict agents'
        allow, deny = (session.allow_rules, session.deny_rules) if session is not None else ((), ())
        v = decide(target, net_policy(policy, sandbox_settings(policy), allow, deny))
        if v.decision == "allow" and policy.locked:
            return NetVerdict("ask", f"nexusd is locked, so a person decides: {policy.locked}", None, v.suggestions)
        return v

    async def decide(self, ctx: Context, target: Target, scheme: str) -> Outcome:
        srv = self.state
        started = time.monotonic()
        call = self.call(ctx, target, scheme)
        v = self.verdict(ctx, target)
        decision, reason, source = v.decision, v.reason, "rule" if v.rule else "default"
        if decision == "allow" and srv.audit_refuses():
            decision, reason = "deny", f"{reason}; but {srv.audit_refusal()}"
        if decision == "ask":
            if srv.stopping_now:
                decision, reason, source = "deny", "daemon stopping", "error"
            elif not srv.subscribers:
                decision, reason = (
                    "deny",
                    f"{reason}; a person must approve this and no nexusd UI is connected, {NO_UI_FIX}",
                )
            elif len(srv.pending) >= srv.config.max_pending:
                decision, source = "deny", "error"
                reason = f"too many pending requests (limit {srv.config.max_pending})"
            else:
                return await self._ask(ctx, call, v, started)
        d = p.Decision(decision=decision, reason=reason, source=source, rule=v.rule)  # type: ignore[arg-type]
        rid = srv.replies.record_id()
        srv.replies.record(rid, call, d, started, peer=None)
        return Outcome(decision == "allow", reason, rid)

    async def _ask(self, ctx: Context, call: p.CallInfo, v: NetVerdict, started: float) -> Outcome:
        srv = self.state
        target_host = call.input["host"]
        wild = wildcard_suggestion(Target(target_host, call.input["port"], False)) if "." in target_host else None
        reason = f"{v.reason}; asked by the sandboxed command {call.input['sandboxed_command'][:200]!r}"
        if wild and v.suggestions:
            reason += f" (answer with rule {wild} to allow its siblings too)"
        verdict = p.Verdict(
            "ask", reason, "default", suggestions=list(v.suggestions), requirement="network", flags=["network"]
        )
        rid = secrets.token_hex(16)
        now = time.time()
        timeout = srv.prompt_timeout(call, None)
        req = _Requester("nexusd proxy")
        entry = PendingEntry(
            rid,
            _json.encode(call),
            pack(_json.encode(verdict), len(srv.pending)),
            req,  # type: ignore[arg-type]
            None,
            now,
            now + timeout,
            time.monotonic() + timeout,
            started,
            ctx.guard,
        )
        srv.pending.add(entry)
        prompt = p.encode(p.Prompt(item=entry.item()))
        for ui in list(srv.subscribers):
            ui.post(prompt)
        try:
            d = await req.future
        except BaseException:
            if srv.pending.get(rid) is entry:  # the proxy went away first: the ask is cancelled
                srv.answers.resolve(
                    entry, "deny", "cancelled", "the sandboxed connection went away", notify_requester=False
                )
            raise
        return Outcome(d.decision == "allow", d.reason, rid)

    def resolved(self, ctx: Context, target: Target, scheme: str, addresses: list[str]) -> str | None:
        """After an allow: refuse (and audit) a name that resolved to a private address (DNS rebinding)."""
        try:
            settings = sandbox_settings(self.state.store.policy_for(ctx.workspace))
            why = private_refusal(target, addresses, patterns(settings.allowed_domains))
        except Exception as e:  # fail closed
            why = f"the address check failed ({type(e).__name__})"
        if why is not None:
            d = p.Decision(decision="deny", reason=why, source="safety")
            replies = self.state.replies
            replies.record(replies.record_id(), self.call(ctx, target, scheme), d, time.monotonic(), peer=None)
        return why

    def closed(self, ctx: Context, target: Target, scheme: str, outcome: Outcome, up: int, down: int) -> None:
        """The audit line at close: which allowed connection moved how many bytes."""
        call = self.call(ctx, target, scheme)
        self.state.audit.write(
            p.AuditRecord(
                time=time.time(),
                id=outcome.record or self.state.replies.record_id(),
                provider=call.provider,
                session=call.session,
                tool=TOOL,
                summary="",
                decision="allow",
                source="rule",
                reason=f"closed: {up} bytes up, {down} bytes down",
                cwd=call.cwd,
                event="network_close",
                bytes_up=up,
                bytes_down=down,
            ),
            call.input,
        )

    def register(
        self,
        command: str,
        cwd: str,
        workspace: str,
        session: str | None,
        guard: frozenset[int] = frozenset(),
        store: PolicyStore | None = None,
        provider: str | None = None,
        fifos: tuple[str, str] | None = None,
    ) -> bool:
        """A context for one planned command, served on its FIFOs (info, go: ``wrapper.port_fifos``); False
        when the proxy cannot take them. ``session`` is the agent's for its wrapped call, a plan query's for
        ``nexusctl run``; without one, "session" answers last for this one command."""
        provider = provider or "sandbox"
        sid = session or f"sandbox-{secrets.token_hex(4)}"
        http_port = socks_port = None
        if store is not None:
            settings = sandbox_settings(store.policy_for(workspace))
            http_port, socks_port = settings.http_proxy_port, settings.socks_proxy_port
        ctx = Context(
            command=command,
            cwd=cwd,
            workspace=workspace,
            session=sid,
            guard=guard,
            provider=provider,
            http_upstream=http_port,
            socks_upstream=socks_port,
        )
        return fifos is not None and self.proxy.attach(ctx, *fifos)
