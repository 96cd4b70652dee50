"""The wire decision: a verdict as the agent receives it. An allowed shell call is wrapped to run sandboxed
(``sandbox/plan.py``), with a filtered network's proxy context under the agent's session; a wrap that
fails turns the allow into a deny (fail closed). Used for every settled call: at once
(``requests.py``) or after a person's answer (``answers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from nexusd import protocol as p
from nexusd.decision.pipeline import WrapOutcome, is_shell
from nexusd.decision.pool import FactsLate, PoolFull
from nexusd.policy import gate, shaping
from nexusd.sandbox.plan import Network, PreparedWrap, wrap_for_agent
from nexusd.sandbox.walkers import WalkFailed

if TYPE_CHECKING:
    from nexusd.daemon.state import DaemonState

log = structlog.get_logger("nexusd")


def wire_decision(
    state: DaemonState,
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
    wrap: WrapOutcome | None = None,
) -> p.Decision:
    """The wire decision; an allowed shell call is wrapped to run sandboxed (``sandbox/plan.py``) with
    the request's own policy and shell parse when ``begun`` carries them (a person's answer: looked up
    again). ``wrap``: the plan already made in the pool (``Pipeline.prepare_wrap``), or its failure;
    None plans here. A wrap that fails turns the allow into a deny (``shaping.wrap_steps`` traces it)."""
    updated: dict[str, Any] | None = None
    if decision == "allow" and is_shell(call, verdict):
        try:
            if verdict is None:  # an allow to wrap always carries its verdict; without one, fail closed
                raise ValueError("an allowed shell call without its verdict")
            if wrap is None:
                updated = wrap_for_agent(
                    call,
                    verdict,
                    state.store,
                    state.probe,
                    policy=begun.policy if begun is not None else None,
                    socket=state.own_socket,
                    network=network_for(state, call),
                    cls=begun.cls if begun is not None else None,
                    by_person=source == "user",
                )
            else:
                prepared, error = wrap
                if error is not None:
                    raise error
                updated = prepared.finish(network_for(state, call)) if isinstance(prepared, PreparedWrap) else prepared
        except (FactsLate, PoolFull, WalkFailed) as e:  # the plan missed its deadline: a stalled file system
            log.warning("sandbox plan late; denying", tool=call.tool, why=str(e))
            decision, source, reason = "deny", "error", f"sandbox wrapping failed ({e}); denied"
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


def network_for(state: DaemonState, call: p.CallInfo) -> Network:
    """For a wrapped call with a filtered network: its proxy context, under the agent's session (so a
    "session" answer lasts for the session and UIs name the agent), guarded against the agent."""

    def register(command: str, cwd: str, workspace: str, fifos: tuple[str, str]) -> bool:
        if state.network is None:
            return False  # the proxy is not serving (yet): the command runs with no network
        guard = frozenset(pid for pid in (call.agent_pid,) if pid is not None)
        taken: bool = state.network.register(
            command, cwd, workspace, call.session, guard, state.store, provider=call.provider, fifos=fifos
        )
        return taken

    return register
