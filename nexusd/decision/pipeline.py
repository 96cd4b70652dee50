"""One ruling per call: the decision pipeline's order, owned here and nowhere else.

::

    facts    (pool, deadline)  nexusd.policy.gate.gather: workspace, policy, memo replay, classification
    ruling   (the loop)        nexusd.policy.gate.rule: memo verdict or the engine's first round, sandbox step
    rounds   (tasks)           nexusd.policy.gate.run_rounds: policy hooks, auto mode's reviewer
    shaping  (the loop)        nexusd.policy.shaping steps 2-6 over the daemon's state (``ShapingState``)
    wrap     (pool, deadline)  nexusd.sandbox.plan.prepare_wrap, then the proxy registration on the loop

The daemon (``nexusd.daemon.requests``, ``queries``' check, ``answers``' edited call), ``nexusctl check
--offline`` (``offline_verdict``) and the benchmark (``nexusd.bench.gate``, ``nexusd.bench.scaling``)
all decide through a ``Pipeline``. Without a pool (offline, a benchmark's single thread) the facts are
computed in the caller's thread; with one, every file-system question of a decision runs in a worker
and the loop only rules. Fail closed: a pipeline failure is a deny that names its cause.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from nexusd.core.model import Session
from nexusd.core.policy.policy import Policy
from nexusd.core.tools import SHELL_TOOLS
from nexusd.decision.pool import FactPool, FactsLate, PoolFull
from nexusd.policy import gate, shaping
from nexusd.policy.memo import DecisionMemo, session_state
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, NoUi, SandboxProbe, TraceStep, Verdict
from nexusd.sandbox.plan import PreparedWrap, prepare_wrap, wraps

log = structlog.get_logger("nexusd")

# A sandbox plan made in the pool (``Pipeline.prepare_wrap``: None, a finished input, or a plan to finish),
# or the exception that stopped it.
WrapOutcome = tuple[dict[str, object] | PreparedWrap | None, BaseException | None]

FACTS_DEADLINE = 10.0  # seconds a call's facts may take before it is denied (--facts-deadline)


class ShapingState(Protocol):
    """What the shaping steps read of the daemon, now (the daemon implements it; a check reads it too)."""

    def audit_refusal(self) -> str | None: ...
    def runaway(self, call: CallInfo, policy: Policy | None, *, count: bool) -> str | None: ...
    def stopping(self) -> bool: ...
    def someone_answers(self) -> bool: ...
    def no_ui_setting(self) -> str: ...
    def pending_limit(self, on_connection: int | None) -> str | None: ...


def is_shell(call: CallInfo, verdict: Verdict | None) -> bool:
    """Whether an allow of ``call`` is a shell call's (the sandbox wrap step applies)."""
    if verdict is not None and verdict.details is not None:
        return verdict.details.kind == "shell"
    return call.tool in SHELL_TOOLS


def late(e: Exception) -> Verdict:
    """The deny for a call whose facts (or sandbox plan) missed their deadline, or found the pool full."""
    kind = "late" if isinstance(e, FactsLate) else "full"
    return Verdict(
        "deny",
        f"the call could not be decided in time ({e}); denied",
        "error",
        trace=[TraceStep("facts", kind, str(e))],
    )


class Pipeline:
    """The decision pipeline over one policy store: facts, ruling, rounds, shaping, wrap."""

    def __init__(
        self,
        store: PolicyStore,
        *,
        pool: FactPool | None = None,
        memo: DecisionMemo | None = None,
        facts_deadline: float = FACTS_DEADLINE,
    ) -> None:
        self.store = store
        self.pool = pool
        self.memo = memo
        self.facts_deadline = facts_deadline

    # ------------------------------------------------------------------ facts and ruling

    async def ruling(
        self,
        call: CallInfo,
        session: Session,
        *,
        dry_run: bool = False,
        sandbox: SandboxProbe | None = None,
        memo: bool = True,
        after: Awaitable[Any] | None = None,
    ) -> gate.Begun:
        """The facts of ``call`` (in the pool, within the deadline), then the ruling here, with the session
        as it is once they are in. May raise (``FactsLate``, ``PoolFull``, a bug): ``verdict`` denies.
        ``memo`` False: decided afresh (a person's edited call). ``after``: what the ruling waits for once
        the facts are in (the same connection's previous call: rulings keep their order, facts do not wait)."""
        memo_ = self.memo if memo and not dry_run else None
        for _ in range(3):
            state = session_state(session) if memo_ is not None else None
            facts = await self._run(functools.partial(gate.gather, call, self.store, memo=memo_, state=state), "facts")
            if after is not None:
                await after
                after = None
            begun = gate.rule(facts, session, self.store, dry_run=dry_run, sandbox=sandbox, memo=memo_)
            if begun is not None:
                return begun
            memo_ = None  # the session changed under a memo hit: decide afresh, without it
        raise RuntimeError("the session changed under every attempt to decide")

    def ruling_now(
        self, call: CallInfo, session: Session, *, dry_run: bool = False, sandbox: SandboxProbe | None = None
    ) -> gate.Begun:
        """``ruling`` in the caller's thread, facts included (no pool, no deadline): for offline checks and
        the in-process benchmark."""
        return gate.begin(call, self.store, session, dry_run=dry_run, sandbox=sandbox, memo=self.memo)

    async def verdict(
        self,
        call: CallInfo,
        session: Session,
        *,
        dry_run: bool = False,
        sandbox: SandboxProbe | None = None,
        memo: bool = True,
        after: Awaitable[Any] | None = None,
        race: Callable[[Verdict, gate.Begun], None] | None = None,
    ) -> tuple[Verdict, gate.Begun | None]:
        """Facts, ruling and the rounds (hooks, reviewer): the engine's verdict with the sandbox step, and
        what was computed for the call (None when deciding failed). Never raises for a bad call.

        ``race``: called before the hooks run with the verdict the call gets if they all let it pass
        (``gate.if_hooks_pass``), when that is an ask; the daemon may put it before a person at once. The
        returned verdict is still the one with the hooks' real answers."""
        try:
            begun = await self.ruling(call, session, dry_run=dry_run, sandbox=sandbox, memo=memo, after=after)
        except (FactsLate, PoolFull) as e:
            log.warning("decision late; denying", tool=call.tool, why=str(e))
            if after is not None:
                await after  # (a denied call keeps its place too)
            return late(e), None
        except Exception as e:  # fail closed
            log.exception("decide failed; denying", tool=call.tool)
            if after is not None:
                await after
            return gate.failed(e), None
        if begun.verdict is not None:
            return begun.verdict, begun
        if race is not None:
            try:
                provisional = gate.if_hooks_pass(begun)
            except Exception:  # no race then: the hooks run first, as without one
                log.exception("hook race not started", tool=call.tool)
                provisional = None
            if provisional is not None and provisional.decision == "ask":  # (shaping an allow would count it)
                try:
                    race(provisional, begun)
                except Exception:  # the hooks' real answers still decide the call below
                    log.exception("hook race failed", tool=call.tool)
        try:
            verdict = await gate.run_rounds(begun)
            if not isinstance(verdict, Verdict):
                raise TypeError(f"decide returned {type(verdict).__name__}")
        except Exception as e:
            log.exception("decide failed; denying", tool=call.tool)
            verdict = gate.failed(e)
        return verdict, begun

    async def _run(self, fn: Callable[[], Any], label: str) -> Any:
        if self.pool is None:
            return fn()
        return await self.pool.run(fn, self.facts_deadline, label)

    # ------------------------------------------------------------------ shaping

    @staticmethod
    def shape(
        verdict: Verdict,
        call: CallInfo,
        policy: Policy | None,
        on_no_ui: NoUi | None,
        on_connection: int | None,
        state: ShapingState,
    ) -> tuple[Verdict, bool]:
        """Shaping steps 2-6 (``nexusd.policy.shaping``) over the daemon's state now, in their one order;
        True when the result is an ask that waits for a person. ``on_no_ui`` None is a check: nothing is
        counted, and ``no_ui`` is only noted (a check cannot know what the agent would offer).
        ``on_connection``: asks already pending on the requester's connection (None: not a request)."""
        if verdict.decision == "allow":  # every automatic allow: a person's answers never come this way
            verdict = shaping.audit_refusal(verdict, state.audit_refusal())
        if verdict.decision == "allow":
            verdict = shaping.runaway_limit(verdict, state.runaway(call, policy, count=on_no_ui is not None))
        if verdict.decision != "ask":
            return verdict, False
        if state.stopping():
            return shaping.stopping(verdict), False
        if not state.someone_answers():
            if on_no_ui is None:
                return shaping.no_ui_noted(verdict), False
            return shaping.no_ui(verdict, on_no_ui, state.no_ui_setting()), False
        why = state.pending_limit(on_connection)
        if why is not None:
            return shaping.pending_limit(verdict, why), False
        return verdict, on_no_ui is not None

    # ------------------------------------------------------------------ wrap

    async def prepare_wrap(
        self,
        call: CallInfo,
        verdict: Verdict,
        probe: SandboxProbe | None,
        begun: gate.Begun | None,
        socket: str | None,
        *,
        by_person: bool = False,
    ) -> dict[str, object] | PreparedWrap | None:
        """The allowed shell call's sandbox plan, in the pool within the deadline (a big tree's first scan,
        a stalled mount): ``plan.prepare_wrap``. May raise: the caller denies (the ``wrap`` step).
        ``by_person``: a person allowed the call's ask (an escape may then run outside)."""
        policy = begun.policy if begun is not None else None
        cls = begun.cls if begun is not None else None
        if policy is not None and not wraps(call, policy, probe):
            return None  # the sandbox is off for it: nothing to plan, no trip to the pool
        return await self._run(
            lambda: prepare_wrap(
                call, verdict, self.store, probe, policy=policy, socket=socket, cls=cls, by_person=by_person
            ),
            "sandbox plan",
        )


def offline_verdict(call: CallInfo, store: PolicyStore, session: Session) -> Verdict:
    """``nexusctl check --offline``: the pipeline's facts and ruling in this thread, as a check (no hooks,
    no reviewer run, nothing counted)."""
    import anyio

    async def run() -> Verdict:
        verdict, _ = await Pipeline(store).verdict(call, session, dry_run=True)
        return verdict

    return anyio.run(run)
