"""Verdict shaping: every step between the engine's verdict and the agent's decision is named in one module
(nexusd/policy/shaping.py) and appends its trace step, so ``check`` and the audit trail show the whole chain.
The steps as pure functions first, then over the wire with a real daemon."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from nexusd import protocol as p
from nexusd.client import Client
from nexusd.policy import shaping
from tests.conftest import DaemonHandle
from tests.daemon.test_fail_closed import _full_disk, _until_status

ASK = p.Verdict("ask", "the mode asks", "mode", trace=[p.TraceStep("mode", "default")])
ALLOW = p.Verdict("allow", "a rule allows", "rule", rule="Bash(ls)", trace=[p.TraceStep("allow_rules", "matched")])


def last(v: p.Verdict) -> tuple[str, str]:
    return v.trace[-1].step, v.trace[-1].outcome


@pytest.mark.parametrize(
    ("step", "verdict", "expected"),
    [
        (lambda v: shaping.audit_refusal(v, "the audit log cannot be written"), ALLOW, ("deny", ("audit", "deny"))),
        (lambda v: shaping.runaway_limit(v, "runaway limit: 3 repeats"), ALLOW, ("ask", ("limits", "ask"))),
        (shaping.stopping, ASK, ("deny", ("stopping", "deny"))),
        (lambda v: shaping.no_ui(v, "deny", "agent"), ASK, ("deny", ("no_ui", "deny"))),
        (lambda v: shaping.no_ui(v, "ask", "agent"), ASK, ("ask", ("no_ui", "ask"))),
        (lambda v: shaping.no_ui(v, "ask", "deny"), ASK, ("deny", ("no_ui", "deny"))),
        (shaping.no_ui_noted, ASK, ("ask", ("no_ui", "noted"))),
        (lambda v: shaping.pending_limit(v, "too many pending"), ASK, ("deny", ("limit", "deny"))),
    ],
)
def test_each_step_appends_its_trace_step(
    step: Callable[[p.Verdict], p.Verdict], verdict: p.Verdict, expected: tuple[str, tuple[str, str]]
) -> None:
    out = step(verdict)
    assert (out.decision, last(out)) == expected
    assert out.trace[: len(verdict.trace)] == verdict.trace  # the engine's steps stay, in order


def test_a_step_that_does_not_apply_changes_nothing() -> None:
    assert shaping.audit_refusal(ALLOW, None) is ALLOW and shaping.audit_refusal(ASK, "failing") is ASK
    assert shaping.runaway_limit(ALLOW, None) is ALLOW and shaping.runaway_limit(ASK, "over") is ASK


def test_the_wrap_step() -> None:
    denied = p.Decision("deny", "sandbox wrapping failed (OSError); denied", "error")
    assert shaping.wrap_steps("allow", denied) == [p.TraceStep("wrap", "deny", denied.reason)]
    wrapped = p.Decision("allow", "ok", "rule", updated_input={"command": "/bin/sh x"})
    assert [s.outcome for s in shaping.wrap_steps("allow", wrapped)] == ["updated"]
    assert shaping.wrap_steps("deny", p.Decision("deny", "no", "rule")) == []


def test_require_human_is_never_handed_to_the_agent() -> None:
    from nexusd.core.engine import HUMAN_FLAG

    v = msgspec.structs.replace(ASK, flags=[HUMAN_FLAG])
    assert shaping.no_ui(v, "ask", "agent").decision == "deny"


LIMITED = '[permissions]\nallow = ["Bash(ls)"]\n[limits]\nrepeats_per_minute = 2\ncalls_per_minute = 0\n'


def _call(ws: str) -> p.CallInfo:
    return p.CallInfo("claude", "s-shape", "Bash", {"command": "ls"}, ws)


def _audit(h: DaemonHandle, session: str) -> list[p.AuditRecord]:
    with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
        reply = admin.call(p.Audit(session=session))
    assert isinstance(reply, p.AuditReply)
    return reply.records


def steps(trace: list[p.TraceStep]) -> list[tuple[str, str]]:
    return [(s.step, s.outcome) for s in trace]


def test_check_and_audit_show_the_limits_and_no_ui_steps(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Any
) -> None:
    h = daemon_factory(policy=LIMITED)
    call = _call(str(tmp_path))
    with Client(socket_path=str(h.socket), role="agent", name="t") as agent:
        assert [agent.request(call, timeout=10).decision for _ in range(2)] == ["allow", "allow"]
        with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
            checked = admin.check(call)  # the same call, now: over the limit, and nobody to ask
        assert checked.decision == "ask"
        assert steps(checked.trace)[-2:] == [("limits", "ask"), ("no_ui", "noted")]
        assert ("allow_rules", "matched") in steps(checked.trace)  # the engine's chain comes first
        d = agent.request(call, timeout=10)
    assert d.decision == "deny" and "runaway limit" in d.reason
    rec = _audit(h, "s-shape")[-1]
    assert steps(rec.trace)[-2:] == [("limits", "ask"), ("no_ui", "deny")]
    assert ("allow_rules", "matched") in steps(rec.trace)


def test_a_check_counts_nothing(daemon_factory: Callable[..., DaemonHandle], tmp_path: Any) -> None:
    """A check meets the limits as a request would, but is not one of the calls they count."""
    h = daemon_factory(policy=LIMITED)
    call = _call(str(tmp_path))
    with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
        assert [admin.check(call).decision for _ in range(5)] == ["allow"] * 5
    with Client(socket_path=str(h.socket), role="agent", name="t") as agent:
        assert [agent.request(call, timeout=10).decision for _ in range(2)] == ["allow", "allow"]


def test_check_shows_the_audit_refusal(daemon_factory: Callable[..., DaemonHandle], tmp_path: Any) -> None:
    h = daemon_factory(policy='[permissions]\nallow = ["Bash(ls)"]\n[audit]\non_failure = "deny"\n', autostart=False)
    _full_disk(h)
    h.start()
    call = _call(str(tmp_path))
    with Client(socket_path=str(h.socket), role="agent", name="t") as agent:
        agent.request(call, timeout=10)  # the first decision meets the full disk
    _until_status(h, lambda s: s.get("audit_error") is not None, "failing")
    with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
        v = admin.check(call)
    assert v.decision == "deny" and steps(v.trace)[-1] == ("audit", "deny"), v


def test_check_and_audit_show_the_sandbox_and_wrap_steps(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Any
) -> None:
    import time

    h = daemon_factory(policy="[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = true\n")
    call = p.CallInfo("claude", "s-sbx", "Bash", {"command": "make build"}, str(tmp_path))
    with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
        deadline = time.monotonic() + 30
        while (st := admin.call(p.Status())).sandbox is None:  # the probe runs in the background at start
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert st.sandbox.available, st.sandbox
        v = admin.check(call)
    assert v.decision == "allow" and ("sandbox", "allow") in steps(v.trace) and ("mode", "default") in steps(v.trace)
    with Client(socket_path=str(h.socket), role="agent", name="t") as agent:
        d = agent.request(call, timeout=10)
    assert d.decision == "allow" and d.updated_input is not None
    rec = _audit(h, "s-sbx")[-1]
    assert ("sandbox", "allow") in steps(rec.trace) and steps(rec.trace)[-1] == ("wrap", "updated")
