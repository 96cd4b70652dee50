"""The policy engine through the real daemon: check with trace, learning from an answer, broken reload."""

from __future__ import annotations

import os

from nexusd import protocol as p
from nexusd.client import Client, ClientError

POLICY = """
[permissions]
allow = ["Bash(git status)"]
deny = ["Bash(curl *)"]
"""


def _call(cmd: str, cwd: str) -> p.CallInfo:
    return p.CallInfo(provider="claude", session="w1", tool="Bash", input={"command": cmd}, cwd=cwd)


def test_check_over_the_wire_has_rule_origin_and_trace(daemon_factory, tmp_path):
    d = daemon_factory(policy=POLICY)
    with Client(socket_path=str(d.socket), role="admin", name="t") as c:
        r = c.call(p.Check(call=_call("git status && curl x", str(tmp_path))))
    v = r.verdict
    assert (v.decision, v.source, v.rule) == ("deny", "rule", "Bash(curl *)")
    assert v.rule_origin == f"{d.config_dir / 'policy.toml'}:4"
    assert [s.step for s in v.trace][:2] == ["mode", "deny_rules"]
    assert v.details is not None and v.details.commands == [["git", "status"], ["curl", "x"]]


def test_broken_reload_keeps_the_last_good_policy(daemon_factory, tmp_path):
    d = daemon_factory(policy=POLICY)
    with Client(socket_path=str(d.socket), role="admin", name="t") as c:  # the first load has happened
        assert c.call(p.Check(call=_call("curl x", str(tmp_path)))).verdict.decision == "deny"
    d.write_policy("[permissions]\ndeny = ['Bash(curl *']\n")
    os.utime(d.config_dir / "policy.toml", ns=(10**18, 10**18))
    with Client(socket_path=str(d.socket), role="admin", name="t") as c:
        try:
            c.call(p.Reload())
        except ClientError as e:
            assert "policy.toml:2" in str(e)
        st = c.call(p.Status())
        assert any("policy.toml:2" in e for e in st.policy_errors)
        v = c.call(p.Check(call=_call("curl x", str(tmp_path)))).verdict
    assert v.decision == "deny" and v.rule == "Bash(curl *)", v  # the last good rule is still in force
