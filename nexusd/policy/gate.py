"""The daemon's one entry into policy: classify the call, run the pure engine, and do the I/O the
engine asks for (hooks, auto mode's classifier) before calling it again.

Never allows on error: any exception becomes a deny with source "error".
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import msgspec

from nexusd import locations
from nexusd.core.classify import classify, details
from nexusd.core.engine import ClassifierAnswer, Evaluation, HookAnswer, effective_mode, evaluate
from nexusd.core.model import Classification, Context, Flag, Session
from nexusd.core.policy.policy import HookSpec, Policy
from nexusd.core.workspace import workspace_of as _workspace_of
from nexusd.policy.filesystem import DecisionFileSystem, RealFileSystem
from nexusd.policy.hooks import run_hooks
from nexusd.policy.memo import DecisionMemo, RecordingFileSystem, session_state
from nexusd.policy.reviewer import run_reviewer
from nexusd.policy.shaping import allowed_because_sandboxed, asks_to_escape, dynamic_in_sandbox, sandbox_auto_allow
from nexusd.policy.store import PolicyStore
from nexusd.policy.transcript import TranscriptError, read_context
from nexusd.protocol import CallInfo, SandboxProbe, TraceStep, Verdict

MAX_ROUNDS = 3  # deny rules -> hooks -> classifier: at most two I/O rounds


def workspace_of(call: CallInfo, fs: RealFileSystem | None = None) -> str:
    """``nexusd.core.workspace.workspace_of`` on the real file system; ``fs`` shares the realpath answers
    with the rest of the same decision."""
    return _workspace_of(call, fs or DecisionFileSystem())


def installed_paths() -> tuple[str, ...]:
    """nexusd as installed: its packages, its console scripts and interpreter, and the site-packages they
    load from (a ``.pth`` file there runs code in every start of the hook). An agent that rewrites these
    rewrites the gate itself."""
    import sysconfig

    import nexus_clients

    import nexusd

    found = [
        os.path.dirname(nexusd.__file__),
        os.path.dirname(nexus_clients.__file__),
        sys.executable,
        os.path.realpath(sys.executable),
        os.path.join(sys.prefix, "pyvenv.cfg"),
    ]
    for key in ("purelib", "platlib", "scripts"):
        with contextlib.suppress(KeyError):
            found.append(sysconfig.get_path(key))
    return tuple(dict.fromkeys(os.path.normpath(p) for p in found if p))


_INSTALLED: tuple[str, ...] | None = None


def _protected_dirs(store: PolicyStore) -> tuple[str, ...]:
    global _INSTALLED
    key = (store.protected_dirs, store.config_dir, store.state_dir, store.managed_dir)
    cached = getattr(store, "_gate_protected", None)
    if cached is not None and cached[0] == key:
        return cached[1]  # a pure function of the store's settings
    if _INSTALLED is None:
        _INSTALLED = installed_paths()
    protected = tuple(
        dict.fromkeys(
            (*store.protected_dirs, str(store.config_dir), str(store.state_dir), str(store.managed_dir), *_INSTALLED)
        )
    )
    store._gate_protected = (key, protected)  # type: ignore[attr-defined]
    return protected


def _audit_trail(store: PolicyStore) -> str:
    """The canonical audit file: a symlinked state directory must not hide it from the path checks."""
    cached = getattr(store, "_gate_audit", None)
    if cached is not None and (cached[0] is store.state_dir or cached[0] == store.state_dir):
        return cached[1]  # (the same Path object: no Path.__eq__ on every call)
    trail = os.path.join(os.path.realpath(store.state_dir), locations.AUDIT_NAME)
    store._gate_audit = (store.state_dir, trail)  # type: ignore[attr-defined]
    return trail


def context_for(
    call: CallInfo, store: PolicyStore, policy: Policy, workspace: str, fs: RealFileSystem | None = None
) -> Context:
    fs = fs or DecisionFileSystem()
    if policy.additional_directories:
        roots: tuple[str, ...] = tuple(
            dict.fromkeys([workspace, *(fs.realpath(d) for d in policy.additional_directories)])
        )
    else:
        roots = (workspace,)
    cwd = os.path.normpath(call.cwd) if call.cwd.startswith("/") else workspace  # isabs, for a str
    return Context(
        cwd=cwd,
        workspace_roots=roots,
        home=store.home,
        protected_dirs=_protected_dirs(store),
        audit_trail=_audit_trail(store),
        # what every sandbox hides of the daemon (plan.daemon_dirs): no mode reads it by itself either
        hidden_dirs=tuple(
            dict.fromkeys((*store.protected_dirs, str(store.config_dir), str(store.state_dir), str(store.managed_dir)))
        ),
    )


def classify_call(call: CallInfo, ctx: Context, fs: RealFileSystem | None = None) -> Classification:
    return classify(call, ctx, fs or DecisionFileSystem())


def _payload(call: CallInfo, cls: Classification, session: Session, policy: Policy) -> bytes:
    mode, _ = effective_mode(session, policy, call.provider)
    doc: dict[str, Any] = {
        "call": msgspec.to_builtins(call),
        "details": msgspec.to_builtins(details(cls)),
        "requirement": cls.requirement.label,
        "flags": sorted(str(f) for f in cls.flags),
        "session": session.id,
        "mode": mode.name,
        "workspace": policy.workspace,
    }
    return msgspec.json.encode(doc)


async def _review(policy: Policy, call: CallInfo, cls: Classification, session: Session, home: str) -> ClassifierAnswer:
    """Auto mode's reviewer, with the recent conversation when the agent names its transcript; a transcript
    that is named but unusable fails closed (the reviewer's on_error), never a review without it."""
    assert policy.classifier is not None
    payload = _payload(call, cls, session, policy)
    if call.transcript_path:
        try:
            conversation = await anyio.to_thread.run_sync(read_context, call.transcript_path, home)
        except TranscriptError as e:
            return ClassifierAnswer("error", str(e))
        doc = msgspec.json.decode(payload)
        doc["conversation"] = conversation
        payload = msgspec.json.encode(doc)
    return await run_reviewer(policy.classifier, payload)


def record_classifier(session: Session, ev: Evaluation) -> None:
    """Auto mode's consecutive-denial counter: a classifier deny counts, a classifier allow resets."""
    if ev.classifier_outcome == "deny":
        session.classifier_denials += 1
    elif ev.classifier_outcome == "allow":
        session.classifier_denials = 0


def person_allowed(session: Session) -> None:
    """A person allowed one of the session's calls: the denial streak that sent it to a person is over, and
    the reviewer decides again (seed 002: the fallback to a person breaks a deny loop, it is not for good)."""
    session.classifier_denials = 0


@dataclass(slots=True)
class Begun:
    """The synchronous first round of a decision: a verdict, or the state ``run_rounds`` needs for the
    hook and classifier rounds. It is also what the request carries past the gate, computed once:
    ``workspace`` and ``policy`` (the one it decided with: sandbox wrapping and the prompt timeout use
    the same) and ``cls``, the classification with the shell parse (None for a memo hit)."""

    call: CallInfo
    session: Session
    policy: Policy
    workspace: str
    verdict: Verdict | None = None
    cls: Classification | None = None
    ctx: Context | None = None
    ev: Evaluation | None = None
    dry_run: bool = False
    sandbox: SandboxProbe | None = None


def failed(e: BaseException) -> Verdict:
    """The deny for a decision that raised (fail closed)."""
    return Verdict("deny", f"policy evaluation failed ({type(e).__name__}: {e}); denied", "error")


async def decide(
    call: CallInfo,
    store: PolicyStore,
    session: Session,
    *,
    dry_run: bool = False,
    sandbox: SandboxProbe | None = None,
    memo: DecisionMemo | None = None,
) -> Verdict:
    """Never raises for a bad call: the caller still wraps it and turns any exception into deny."""
    try:
        begun = begin(call, store, session, dry_run=dry_run, sandbox=sandbox, memo=memo)
        return begun.verdict if begun.verdict is not None else await run_rounds(begun)
    except Exception as e:  # fail closed
        return failed(e)


@dataclass(slots=True)
class Facts:
    """What the file system says about one call, gathered once and off the event loop (``gather``, in the
    decision pool): its workspace and that workspace's policy, then either a memo entry whose every
    file-system question was asked again and answered the same, or the context and the classification
    (with the recorder that wrote down the classifier's questions, for the memo). The ruling (``rule``)
    reads nothing else from the file system."""

    call: CallInfo
    workspace: str
    policy: Policy
    key: tuple[Any, ...] | None = None  # the memo key, under the session state taken at submission
    memo_entry: object | None = None  # the entry found under ``key`` (None: a miss)
    memo_held: bool = False  # whether that entry's questions were all answered the same again
    ctx: Context | None = None
    cls: Classification | None = None
    recorder: RecordingFileSystem | None = None


def gather(
    call: CallInfo,
    store: PolicyStore,
    *,
    memo: DecisionMemo | None = None,
    state: tuple[Any, ...] | None = None,
) -> Facts:
    """The facts of ``call``: every file-system question and the classification, no daemon state (``state``
    is the session's ``memo.session_state``, taken on the loop; None: the memo is not used). Safe to run in
    a worker thread. May raise: the caller denies."""
    fs = DecisionFileSystem()  # one snapshot of realpath/lexists answers, for this decision only
    workspace = workspace_of(call, fs)
    policy = store.policy_for(workspace)
    key: tuple[Any, ...] | None = None
    if memo is not None and state is not None and not asks_to_escape(call):  # an escape is asked every time
        key = memo.key_of_state(call, workspace, state, (store.home, _protected_dirs(store)))
        entry = memo.peek(key)
        if entry is not None:
            held = memo.replay(entry, policy, fs)
            if held:
                return Facts(call, workspace, policy, key, entry, True)
            facts = _classified(call, store, policy, workspace, fs, key)
            facts.memo_entry = entry
            return facts
    return _classified(call, store, policy, workspace, fs, key)


def _classified(
    call: CallInfo, store: PolicyStore, policy: Policy, workspace: str, fs: DecisionFileSystem, key: Any
) -> Facts:
    recorder = RecordingFileSystem(fs) if key is not None else None
    cfs: Any = recorder if recorder is not None else fs
    ctx = context_for(call, store, policy, workspace, cfs)
    cls = classify_call(call, ctx, cfs)
    return Facts(call, workspace, policy, key, None, False, ctx, cls, recorder)


def rule(
    facts: Facts,
    session: Session,
    store: PolicyStore,
    *,
    dry_run: bool = False,
    sandbox: SandboxProbe | None = None,
    memo: DecisionMemo | None = None,
) -> Begun | None:
    """The ruling over ``facts``, on the loop: the memo's verdict, or the engine's first round with the
    session as it is now (and the sandbox auto-allow step). Reads no file. None: a memo hit whose session
    state changed since the facts were gathered, and which has no classification to rule on: gather again."""
    call, policy, workspace = facts.call, facts.policy, facts.workspace
    key: tuple[Any, ...] | None = None
    if memo is not None and facts.key is not None and not dry_run:
        key = memo.key(call, workspace, session, (store.home, _protected_dirs(store)))
        if key == facts.key:
            cached = memo.settle(key, facts.memo_entry, facts.memo_held)
            if cached is not None:
                return Begun(call, session, policy, workspace, cached)
        if facts.cls is None:
            return None
    assert facts.cls is not None and facts.ctx is not None
    cls, ctx = facts.cls, facts.ctx
    # Every decision keeps its full explanation: the audit records it (provenance, nexusctl explain).
    ev = evaluate(call, policy, session, cls, ctx, dry_run=dry_run, explain=True)
    begun = Begun(call, session, policy, workspace, None, cls, ctx, ev, dry_run, sandbox)
    if ev.verdict is not None:
        if not dry_run:
            record_classifier(session, ev)
        if memo is not None and facts.recorder is not None and key is not None:
            memo.put(key, policy, facts.recorder, ev.verdict)
        begun.verdict = sandbox_step(ev.verdict, begun)
    return begun


def begin(
    call: CallInfo,
    store: PolicyStore,
    session: Session,
    *,
    dry_run: bool = False,
    sandbox: SandboxProbe | None = None,
    memo: DecisionMemo | None = None,
) -> Begun:
    """``gather`` then ``rule`` in the caller's thread (an offline check, a benchmark, a test): everything
    of a decision that needs no waiting. May raise; ``decide`` and the daemon turn that into deny."""
    use_memo = memo if memo is not None and not dry_run else None
    state = session_state(session) if use_memo is not None else None
    facts = gather(call, store, memo=use_memo, state=state)
    begun = rule(facts, session, store, dry_run=dry_run, sandbox=sandbox, memo=use_memo)
    if begun is None:  # cannot happen in one thread (nothing changes the session between the two)
        raise RuntimeError("the session changed between the facts and the ruling")
    return begun


def sandbox_step(
    v: Verdict, b: Begun, *, hooks: list[HookAnswer] | None = None, classifier: ClassifierAnswer | None = None
) -> Verdict:
    """Shaping's first step (``sandbox_auto_allow``) on the engine's verdict ``v`` for ``b``; and for a call
    whose only unknown is what it runs, once ``dynamic_in_sandbox`` says the sandbox enforces every rule the
    hidden part could break, the engine again on what the call shows (the same session, hooks and reviewer
    answers): when a static command's ask would be auto-allowed sandboxed, so is this one. Anything else,
    a rule, the lock, trust, a hook still to run, keeps the safety check's ask."""
    assert b.cls is not None and b.ctx is not None
    shaped = sandbox_auto_allow(v, b.call, b.cls, b.policy, b.sandbox)
    if not dynamic_in_sandbox(shaped, b.call, b.cls, b.policy, b.session):
        return shaped
    seen = msgspec.structs.replace(b.cls, flags=b.cls.flags - {Flag.DYNAMIC})
    inner = evaluate(
        b.call, b.policy, b.session, seen, b.ctx, hooks=hooks, classifier=classifier, dry_run=b.dry_run, explain=False
    ).verdict
    if inner is None or inner.source != "mode" or inner.decision == "deny":
        return shaped
    then = sandbox_auto_allow(msgspec.structs.replace(inner, decision="ask"), b.call, seen, b.policy, b.sandbox)
    if then.decision != "allow" or not allowed_because_sandboxed(then):
        return shaped
    assert b.sandbox is not None  # the auto-allow above needs an available probe
    why = (
        f"{'; '.join(b.cls.notes) or 'dynamic'}: what it runs is known only when it runs, and it runs in the "
        f"sandbox ({b.sandbox.backend}), which enforces every rule it could break"
    )
    return msgspec.structs.replace(
        shaped,
        decision="allow",
        source="mode",
        reason=f"{why}: allowed",
        suggestions=[],
        trace=[*shaped.trace, TraceStep("sandbox", "allow", f"{why}; {inner.reason}")],
    )


RACED = "running: the person is asked meanwhile; a hook's deny withdraws the prompt, a person's answer settles it"


def if_hooks_pass(b: Begun) -> Verdict | None:
    """The verdict ``b`` gets if every hook it waits for lets it pass (answers allow), before any hook ran: the
    daemon races the hooks against a person when this is an ask (seed 002: Claude Code's interactive handler
    races its permission hooks against the dialog). None when the call does not wait for hooks, or would
    then still wait for a program (auto mode's reviewer). The hooks' steps in its trace say they are running.

    Why a person may be asked at once: a hook can only deny (final), ask (a person) or let the call pass, so
    when passing ends in an ask every outcome but a deny needs that person anyway; a hook's allow never
    allows by itself, so nothing automatic can overtake a hook that would deny."""
    ev = b.ev
    if ev is None or ev.need != "hooks" or b.cls is None or b.ctx is None:
        return None
    passing = [HookAnswer(h, "allow") for h in ev.hooks]
    then = evaluate(b.call, b.policy, b.session, b.cls, b.ctx, hooks=passing, dry_run=b.dry_run, explain=True)
    if then.verdict is None:
        return None
    v = sandbox_step(then.verdict, b, hooks=passing)
    steps = [s for s in v.trace if s.step != "hooks"]
    at = next((i for i, s in enumerate(v.trace) if s.step == "hooks"), len(steps))
    steps.insert(at, TraceStep("hooks", "raced", f"{len(ev.hooks)} hook(s) {RACED}"))
    return msgspec.structs.replace(v, trace=steps)


async def run_rounds(b: Begun) -> Verdict:
    """The rounds that wait for programs: hooks, then auto mode's classifier (at most one each). When the
    call would go to the reviewer once its hooks let it pass, both run at once (``_hooks_and_review``)."""
    assert b.cls is not None and b.ctx is not None and b.ev is not None
    call, policy, session, cls, ctx, ev = b.call, b.policy, b.session, b.cls, b.ctx, b.ev
    hooks: list[HookAnswer] | None = None
    classifier: ClassifierAnswer | None = None
    payload: bytes | None = None
    for _ in range(MAX_ROUNDS):
        if ev.verdict is not None:
            if not b.dry_run:
                record_classifier(session, ev)
            return sandbox_step(ev.verdict, b, hooks=hooks, classifier=classifier)
        payload = payload or _payload(call, cls, session, policy)
        if ev.need == "hooks" and hooks is None:
            if policy.classifier is not None and _reviewed_if_pass(b):
                hooks, classifier = await _hooks_and_review(b, ev.hooks, payload)
            else:
                hooks = await run_hooks(ev.hooks, payload)
        elif ev.need == "classifier" and classifier is None and policy.classifier is not None:
            classifier = await _review(policy, call, cls, session, ctx.home)
        else:
            break
        ev = evaluate(
            call, policy, session, cls, ctx, hooks=hooks, classifier=classifier, dry_run=b.dry_run, explain=True
        )
    return Verdict("deny", "the policy engine did not settle the call; denied", "error")


def _reviewed_if_pass(b: Begun) -> bool:
    """Whether ``b``, once every hook lets it pass, goes to auto mode's reviewer."""
    assert b.cls is not None and b.ctx is not None and b.ev is not None
    passing = [HookAnswer(h, "allow") for h in b.ev.hooks]
    then = evaluate(b.call, b.policy, b.session, b.cls, b.ctx, hooks=passing, dry_run=b.dry_run, explain=False)
    return then.need == "classifier"


async def _hooks_and_review(
    b: Begun, hooks: tuple[HookSpec, ...], payload: bytes
) -> tuple[list[HookAnswer], ClassifierAnswer | None]:
    """The hooks and the reviewer at once, so a slow hook does not add its time to the reviewer's. Exactly as
    strict as one after the other: the engine reads the reviewer's answer only once every hook let the call
    pass, so a hook's deny (or ask) still wins over the reviewer's allow; only the reviewer sees a call a hook
    then denies. Its answer is counted (the denial streak) only when it decided. A hook that does not let
    the call pass stops the reviewer (None): its answer could not matter, and must not keep the deny waiting."""
    assert b.cls is not None and b.ctx is not None and b.policy.classifier is not None
    got: dict[str, Any] = {}

    async with anyio.create_task_group() as tg:

        async def hooks_() -> None:
            got["hooks"] = answers = await run_hooks(hooks, payload)
            if any(a.decision != "allow" for a in answers):
                tg.cancel_scope.cancel()

        async def review() -> None:
            assert b.cls is not None and b.ctx is not None
            got["review"] = await _review(b.policy, b.call, b.cls, b.session, b.ctx.home)

        tg.start_soon(hooks_)
        tg.start_soon(review)
    return got["hooks"], got.get("review")
