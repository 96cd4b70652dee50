"""Runaway limits: automatic allows per session and minute, beyond which a person decides (issue: the rest
of the permission gate: a runaway agent's many harmless calls). The limiter with an injected clock, the [limits]
table, and the real daemon."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nexusd.client import Client
from nexusd.core.policy.policy import Limits
from nexusd.daemon.limits import RunawayLimiter
from nexusd.policy.loader import merge, parse_policy
from nexusd.protocol import Audit, CallInfo
from tests.conftest import DaemonHandle


def ls(session: str = "s1", path: str = ".", cwd: str = "/w") -> CallInfo:
    return CallInfo("claude", session, "Bash", {"command": f"ls {path}"}, cwd)


def test_the_same_call_past_its_repeat_limit_is_held_back_for_a_minute() -> None:
    lim, limits = RunawayLimiter(), Limits(calls_per_minute=0, repeats_per_minute=3)
    for i in range(3):
        assert lim.check(ls(), limits, 100.0 + i) is None
        lim.count(ls(), limits, 100.0 + i)
    why = lim.check(ls(), limits, 103.0)
    assert why is not None and "same call" in why and "repeats_per_minute = 3" in why
    assert lim.check(ls(path="src"), limits, 103.0) is None  # another call
    assert lim.check(ls(session="s2"), limits, 103.0) is None  # another session
    assert lim.check(CallInfo("claude", "s1", "Bash", {"command": "ls ."}, "/elsewhere"), limits, 103.0) is None
    assert lim.check(ls(), limits, 160.5) is None  # the first stamp left the window


def test_input_key_order_does_not_make_a_new_call() -> None:
    lim, limits = RunawayLimiter(), Limits(calls_per_minute=0, repeats_per_minute=1)
    a = CallInfo("claude", "s", "Edit", {"file_path": "a", "old_string": "x", "new_string": "y"}, "/w")
    b = CallInfo("claude", "s", "Edit", {"new_string": "y", "old_string": "x", "file_path": "a"}, "/w")
    lim.count(a, limits, 0.0)
    assert lim.check(b, limits, 1.0) is not None


def test_all_calls_past_the_rate_are_held_back() -> None:
    lim, limits = RunawayLimiter(), Limits(calls_per_minute=5, repeats_per_minute=0)
    for i in range(5):
        assert lim.check(ls(path=str(i)), limits, float(i)) is None
        lim.count(ls(path=str(i)), limits, float(i))
    why = lim.check(ls(path="new"), limits, 5.0)
    assert why is not None and "5 calls" in why
    assert lim.check(ls(path="new"), limits, 60.5) is None


def test_zero_turns_both_off() -> None:
    lim, limits = RunawayLimiter(), Limits(0, 0)
    for i in range(1000):
        lim.count(ls(), limits, float(i) / 1000)
    assert lim.check(ls(), limits, 1.0) is None


def layer(text: str, *, project: bool = False, managed: bool = False, name: str = "user"):  # type: ignore[no-untyped-def]
    la = parse_policy(text, Path(f"/{name}.toml"), layer=name, project=project, managed=managed)
    assert not la.errors, la.errors
    return la


def test_limits_table_merges_to_the_strictest() -> None:
    assert merge([]).limits == Limits()
    user = layer("[limits]\ncalls_per_minute = 1000\nrepeats_per_minute = 0\n")
    assert merge([user]).limits == Limits(1000, 0)  # the user may loosen or turn off
    managed = layer("[limits]\nrepeats_per_minute = 10\n", managed=True, name="managed")
    assert merge([managed, user]).limits == Limits(1000, 10)  # but not past the managed policy
    project = layer("[limits]\ncalls_per_minute = 50\nrepeats_per_minute = 0\n", project=True, name="project")
    assert merge([managed, user, project]).limits == Limits(50, 10)  # a project only tightens


@pytest.mark.parametrize(
    "text",
    [
        "[limits]\ncalls_per_minute = -1\n",
        "[limits]\ncalls_per_minute = 'many'\n",
        "[limits]\nrepeats_per_minute = true\n",
        "[limits]\nrepeats_per_minute = 1.5\n",
        "[limits]\nburst = 3\n",
        "limits = 3\n",
    ],
)
def test_malformed_limits_are_errors(text: str) -> None:
    la = parse_policy(text, Path("/p.toml"), layer="user")
    assert la.errors and any("limits" in e for e in la.errors), la.errors


def test_the_daemon_asks_past_the_limit_and_says_why(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Path
) -> None:
    ws = str(tmp_path)
    h = daemon_factory(policy="[limits]\nrepeats_per_minute = 3\ncalls_per_minute = 0\n")
    call = CallInfo("claude", "s-lim", "Bash", {"command": "ls"}, ws)
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        for _ in range(3):
            d = c.request(call, timeout=10)
            assert d.decision == "allow", d
        d = c.request(call, timeout=10)  # no UI connected: the ask is denied, and the reason says why
        assert d.decision == "deny" and "runaway limit" in d.reason, d
        other = CallInfo("claude", "s-other", "Bash", {"command": "ls"}, ws)
        assert c.request(other, timeout=10).decision == "allow"  # per session
    with Client(socket_path=str(h.socket), role="admin", name="t") as admin:
        reply = admin.call(Audit(session="s-lim"))
    assert [r.decision for r in reply.records[-4:]] == ["allow", "allow", "allow", "deny"], reply.records
    assert "runaway limit" in reply.records[-1].reason
