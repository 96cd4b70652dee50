"""Verdict shaping: every step between the engine's verdict and the decision the agent receives.

Theory of operation. The engine (``nexusd.core.engine``) decides from the policy alone. The daemon then
applies these named steps, in this order, each a small function of the verdict and one fact, and each
appends its ``TraceStep`` so that ``nexusctl check`` and the audit trail show the whole chain:

1. ``sandbox`` (the gate, in every decision and check): a mode's ask for a shell call that will run
   sandboxed becomes an allow (``auto_allow_bash_if_sandboxed``); a provider without auto-approval
   keeps the ask (``skipped``).
2. ``audit``: an allow while the audit log cannot be written and ``[audit] on_failure = "deny"`` is denied.
3. ``limits``: an automatic allow over the runaway limits (``[limits]``) becomes an ask.
4. ``stopping``: an ask while the daemon stops is denied.
5. ``no_ui``: an ask nobody can answer is denied, or handed to the agent's own dialog (a check notes it).
6. ``limit``: an ask over the pending limits (per connection, per daemon) is denied.
7. ``wrap`` (audit only: a check runs nothing): an allow whose sandbox wrap failed is denied; an input
   changed for the agent (sandbox wrapping, a person's edit) is ``updated``.

Steps only ever narrow (allow -> ask -> deny), except ``sandbox``, which is the policy's own setting.
Which steps run, and with which facts, is the caller's (the daemon owns state and time); what each step
does to the verdict, and what it says, is stated here once.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from nexusd.core.disposition import command_disposition
from nexusd.core.engine import HUMAN_FLAG, SAFETY_ASK, SAFETY_DENY, SECRET_FLAG
from nexusd.core.escape import escape_request, escape_summary
from nexusd.core.model import NOT_AUTO_ALLOWABLE, Classification, Flag, Session, ToolKind
from nexusd.core.policy.policy import Policy
from nexusd.core.policy.rules import fully_concrete
from nexusd.core.tools import SANDBOXED_SHELL_TOOLS, sandbox_first_applies
from nexusd.policy.sandbox_settings import SandboxSettings, sandbox_settings
from nexusd.protocol import CallInfo, Decision, SandboxProbe, TraceStep, Verdict


def _step(v: Verdict, step: str, outcome: str, detail: str, **changes: object) -> Verdict:
    return msgspec.structs.replace(v, trace=[*v.trace, TraceStep(step, outcome, detail)], **changes)


def sandbox_auto_allow(
    v: Verdict, call: CallInfo, cls: Classification, policy: Policy, probe: SandboxProbe | None
) -> Verdict:
    """A bare ask for a shell call that will run sandboxed is allowed (Claude Code's
    checkSandboxAutoAllow). Only an ask that came from the mode (not from a rule, hook, safety check or
    trust) qualifies; deny and ask rules already ran. Excluded commands that would leave the sandbox keep
    the ask. The command's parse is the classification's: it is not parsed again.

    A mode's ask that only a secret read caused (``SECRET_FLAG``: the mode would allow the call but for a
    read of what the sandbox hides) is allowed when the call runs sandboxed, setting or not: inside, the
    secret is not there. Every other shell ask says where the call will run when that is not the whole
    sandbox (``_disclose``): a person is never shown less than what runs outside.

    A call that asks to run *outside* the sandbox (``nexusd.core.escape``) is never allowed here, nor by
    a mode or a rule: it goes to a person (``sandbox_escape``)."""
    escaped = sandbox_escape(v, call, cls, policy, probe)
    if escaped is not None:
        return escaped
    if v.decision != "ask" or cls.kind != ToolKind.SHELL:
        return v
    command = call.input.get("command")
    if not isinstance(command, str):
        return v
    try:
        settings = sandbox_settings(policy)
        parsed = (tuple(c.argv for c in cls.commands), cls.flags)
        where = _where(command, settings, parsed, probe)
    except Exception:
        return v
    if not sandbox_first_applies(call.provider, settings.enabled_set):
        where = "off"  # an agent whose hook cannot take the rewrite: gate-only unless a person enabled it
    if where in ("sandbox", "mixed") and call.tool not in SANDBOXED_SHELL_TOOLS:
        where = "unwrappable"  # a shell the wrapper cannot rewrite (PowerShell) would run bare: never auto-allowed
    if v.source != "mode" or not cls.auto_allowable or HUMAN_FLAG in v.flags or where not in ("sandbox", "mixed"):
        return _disclose(v, where)
    assert probe is not None  # "sandbox" and "mixed" need an available probe
    secret_only = SECRET_FLAG in v.flags
    if policy.provider(call.provider).auto_approval is False:
        # the stricter setting wins: a provider without auto-approval gets a person even for sandboxed calls
        return _step(
            v, "sandbox", "skipped", f"provider {call.provider} has no auto-approval; sandbox auto-allow does not apply"
        )
    if secret_only:
        return _step(
            v,
            "sandbox",
            "allow",
            f"runs sandboxed ({probe.backend}), where the secrets it names are hidden",
            decision="allow",
            reason=f"{v.reason}; runs in the sandbox, which hides them: allowed",
            suggestions=[],
            flags=[f for f in v.flags if f != SECRET_FLAG],
        )
    if not settings.auto_allow_bash_if_sandboxed or where == "mixed":
        return _disclose(v, where)  # a chain with an excluded command is not allowed unseen
    return _step(
        v,
        "sandbox",
        "allow",
        f"runs sandboxed ({probe.backend}); auto_allow_bash_if_sandboxed",
        decision="allow",
        reason=f"{v.reason}; runs in the sandbox, allowed",
        suggestions=[],
    )


def dynamic_in_sandbox(v: Verdict, call: CallInfo, cls: Classification, policy: Policy, session: Session) -> bool:
    """Whether ``v`` is the safety check's ask for a shell call whose only unknown is what it runs
    (``Flag.DYNAMIC``: ``eval``, ``${F:-x}`` from the environment, a substitution), and every rule that
    hidden part could break is one the sandbox itself enforces. Then what the call runs decides nothing the
    sandbox does not: the gate re-rules it on what it can see (``gate``), and a mode's ask of that is the
    sandbox auto-allow's to allow, as a static command's would be.

    The sandbox enforces deny rules of Read that name one anchored path (masked) and WebFetch domain rules
    (its proxy). It enforces no shell command rule, no ask rule, no glob, and no Edit deny (a read-only bind
    of what exists at the plan: a path that is not there yet could be created): with any of those in force
    (the policy's, or the session's own answers), the ask stands."""
    if v.decision != "ask" or v.source != "safety" or cls.kind != ToolKind.SHELL or HUMAN_FLAG in v.flags:
        return False
    if cls.flags & (NOT_AUTO_ALLOWABLE | SAFETY_ASK | SAFETY_DENY) != {Flag.DYNAMIC}:
        return False
    if asks_to_escape(call) or session.deny_rules or any(k != "allow" for k, _, _ in session.grant_rules):
        return False
    try:
        if not sandbox_settings(policy).auto_allow_bash_if_sandboxed:
            return False
    except Exception:
        return False
    for rule in policy.rules:
        if rule.kind == "allow" or rule.family not in ("shell", "read", "edit"):
            continue
        # an Edit deny is a read-only bind of what exists at the plan: a hidden write could still create it
        if rule.family == "shell" or rule.kind != "deny" or rule.tool != "Read":
            return False
        if rule.path is None or not fully_concrete(rule.path):
            return False
    return True


Where = Literal["sandbox", "mixed", "excluded", "unsandboxed", "refused", "off", "unwrappable"]


def _where(command: str, settings: SandboxSettings, parsed: tuple[Any, Any], probe: SandboxProbe | None) -> Where:
    """Where an allowed shell call would run: in the sandbox; ``mixed`` (some sub-commands are excluded:
    ``wrap_for_agent`` sandboxes the chain whole); outside it because every sub-command is excluded;
    unsandboxed because no sandbox works and the policy lets calls run anyway (else ``refused``); or the
    policy does not sandbox shell calls here (``off``)."""
    if probe is None or not settings.active_on(probe.platform):
        return "off"
    if not probe.available:
        return "refused" if settings.fail_if_unavailable else "unsandboxed"
    disposition = command_disposition(command, settings, parsed=parsed)
    return "excluded" if disposition == "unsandboxed" else disposition


def _disclose(v: Verdict, where: Where) -> Verdict:
    """An ask for a shell call that would not run wholly as the sandbox promises says where it runs."""
    if where == "excluded":
        why = "every sub-command is in [sandbox] excluded_commands: if allowed, it runs OUTSIDE the sandbox"
    elif where == "unsandboxed":
        why = "no sandbox works here and fail_if_unavailable = false: if allowed, it runs UNSANDBOXED"
    elif where == "unwrappable":
        why = "the sandbox cannot wrap this shell tool: if allowed, it runs OUTSIDE the sandbox"
    elif where == "mixed":
        why = (
            "some sub-commands are in [sandbox] excluded_commands: if allowed, the whole chain runs INSIDE the "
            "sandbox (they too); run them on their own to run them outside"
        )
    else:
        return v
    return _step(v, "sandbox", "noted", why, reason=f"{v.reason}; {why}")


def asks_to_escape(call: CallInfo) -> bool:
    """The call asks to run outside the sandbox: never served from the decision memo, whose remembered
    allow would skip the escape's ask (``sandbox_escape`` runs on every such decision)."""
    key = SANDBOXED_SHELL_TOOLS.get(call.tool)
    if key is None:
        return False
    command = call.input.get(key)
    return escape_request(call.input, command if isinstance(command, str) else None) is not None


def sandbox_escape(
    v: Verdict, call: CallInfo, cls: Classification, policy: Policy, probe: SandboxProbe | None
) -> Verdict | None:
    """An escape request of a call the sandbox would wrap: a deny stays a deny, anything else is asked,
    with what the sandbox would have contained. None: not an escape (or nothing would be wrapped)."""
    key = SANDBOXED_SHELL_TOOLS.get(call.tool)
    if key is None or probe is None or not probe.available:
        return None
    command = call.input.get(key)
    why = escape_request(call.input, command if isinstance(command, str) else None)
    if why is None:
        return None
    try:
        if not sandbox_settings(policy).active_on(probe.platform):
            return None  # not sandboxed here anyway: an ordinary call
    except Exception:
        pass  # broken settings wrap with defaults (fail closed): the escape is asked
    if v.decision == "deny":
        return v
    said = f" (the agent says: {why})" if why else ""
    contained = escape_summary(cls, call.workspace or call.cwd)
    reason = f"asks to run OUTSIDE the sandbox{said}; the sandbox would contain: {contained}"
    return _step(
        v,
        "escape",
        "ask",
        f"escape requested; was {v.decision} ({v.source}): an escape is only a person's to allow",
        decision="ask",
        source="safety",
        reason=reason if v.decision == "allow" else f"{v.reason}; {reason}",
        suggestions=[],
    )


def allowed_because_sandboxed(v: Verdict) -> bool:
    """Step 1 turned an ask into this allow: an allow that must never run unwrapped."""
    return any(t.step == "sandbox" and t.outcome == "allow" for t in v.trace)


def audit_refusal(v: Verdict, refusal: str | None) -> Verdict:
    """Step 2. ``refusal``: why nothing may be allowed now (the audit log fails), or None."""
    if v.decision != "allow" or refusal is None:
        return v
    return _step(v, "audit", "deny", refusal, decision="deny", reason=f"{v.reason}; but {refusal}")


def runaway_limit(v: Verdict, why: str | None) -> Verdict:
    """Step 3. ``why``: the runaway limit this automatic allow is over (``daemon/limits.py``), or None."""
    if v.decision != "allow" or why is None:
        return v
    return _step(v, "limits", "ask", why, decision="ask", source="safety", reason=why)


def stopping(v: Verdict) -> Verdict:
    """Step 4: the daemon is stopping; nobody will answer an ask."""
    return Verdict(
        "deny", "daemon stopping", "error", trace=[*v.trace, TraceStep("stopping", "deny", "daemon stopping")]
    )


# What the agent (and the person reading its transcript) is told when an ask meets no UI: that nothing waited,
# and the command that fixes it (issue 38: `nexusctl pending` stayed empty and nobody knew why).
NO_UI_FIX = "so it was denied at once without waiting: start nexus-tui (or nexus-web) to answer, then retry"


def no_ui(v: Verdict, on_no_ui: Literal["deny", "ask"], no_ui_setting: str) -> Verdict:
    """Step 5: no UI is connected and no ``[notify]`` channel waits for a person. The agent may ask
    itself only if it offered (``on_no_ui = "ask"``), the policy lets it (``[notify] no_ui = "agent"``),
    and the call does not require a person (require_human)."""
    if on_no_ui == "ask" and HUMAN_FLAG in v.flags:
        return _step(
            v,
            "no_ui",
            "deny",
            "require_human: not handed to the agent",
            decision="deny",
            reason=f"{v.reason}; no nexusd UI is connected, and the agent's own dialog may not "
            "decide this (require_human)",
        )
    if on_no_ui == "ask" and no_ui_setting == "agent":
        return _step(
            v,
            "no_ui",
            "ask",
            "handed to the agent's own dialog",
            reason=f"{v.reason}; no nexusd UI is connected, so the agent asks itself",
        )
    return _step(
        v,
        "no_ui",
        "deny",
        "no nexusd UI is connected",
        decision="deny",
        reason=f"{v.reason}; a person must approve this and no nexusd UI is connected, {NO_UI_FIX}",
    )


def no_ui_noted(v: Verdict) -> Verdict:
    """Step 5 in a check: the ask stays (what the agent offers is not known), the trace says what a request
    would meet now."""
    return _step(
        v,
        "no_ui",
        "noted",
        "no nexusd UI is connected now: a request would be denied, or handed to the "
        "agent's own dialog if it offers one and the policy lets it",
    )


def pending_limit(v: Verdict, why: str) -> Verdict:
    """Step 6: too many requests already wait (``why`` names the limit)."""
    return Verdict("deny", why, "error", trace=[*v.trace, TraceStep("limit", "deny", why)])


def wrap_steps(wanted: str, d: Decision) -> list[TraceStep]:
    """Step 7, after the decision was built: a sandbox wrap that failed, or a changed input sent back."""
    if wanted == "allow" and d.decision == "deny":
        return [TraceStep("wrap", "deny", d.reason)]
    if d.decision == "allow" and d.updated_input is not None:
        return [TraceStep("wrap", "updated", "the agent runs a changed input (sandbox wrapping or a person's edit)")]
    return []
