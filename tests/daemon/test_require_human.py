"""``require_human = true`` on an ask rule: only a person answering that very call may allow it.

Every path that turns an ask into an allow today is tried against it over the wire: a mode (bypass from the
agent, bypass as a person's override, auto's classifier), an allow rule in the policy, a learned rule, a
session grant, a timed grant, a hook answering allow (or ask), the sandbox's auto-allow, the agent's own
dialog (``on_no_ui = "ask"``), and an answer that would widen beyond this one call. Each control case (the
same without ``require_human``) shows the path is real, so each test can fail.
"""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nexusd import protocol as p
from nexusd.policy.loader import parse_policy
from tests.conftest import DaemonHandle

PUSH = "git push origin main"
HUMAN_ASK = '[permissions]\nask = [{rule = "Bash(git push *)", require_human = true}]\n'
PLAIN_ASK = '[permissions]\nask = ["Bash(git push *)"]\n'


def call(cmd: str = PUSH, mode: str | None = None, session: str = "s-h") -> dict[str, Any]:
    c: dict[str, Any] = {
        "provider": "claude",
        "session": session,
        "tool": "Bash",
        "input": {"command": cmd},
        "cwd": "/tmp",
    }
    if mode:
        c["mode"] = mode
    return c


def alone(h: DaemonHandle, raw_factory, on_no_ui: str = "deny", **kw: Any) -> p.Decision:
    agent = raw_factory(h.socket)
    d = agent.ask({"type": "request", "call": call(**kw), "on_no_ui": on_no_ui, "ref": "r"})
    agent.close()
    assert isinstance(d, p.Decision), d
    return d


def with_person(h: DaemonHandle, raw_factory, answer: dict[str, Any] | None = None, **kw: Any) -> tuple[Any, Any]:
    """Submit with a UI watching: returns (what the agent got first, the UI's reply to ``answer``)."""
    ui = raw_factory(h.socket, role="ui")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(h.socket)
    first = agent.ask({"type": "request", "call": call(**kw), "ref": "r"})
    reply = None
    if isinstance(first, p.Pending):
        assert isinstance(ui.recv(), p.Prompt)
        ui.send({"type": "answer", "id": first.id, **(answer or {"decision": "deny"})})
        reply = ui.recv()
        if isinstance(reply, p.Resolved):
            reply = ui.recv()
            first = agent.recv()
        else:
            ui.send({"type": "answer", "id": first.id, "decision": "deny"})
            agent.recv()
    ui.close()
    agent.close()
    return first, reply


def script(tmp: Path, body: str) -> str:
    f = tmp / "hook.py"
    f.write_text(f"#!{sys.executable}\n{body}")
    f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return str(f)


def test_a_person_answering_once_allows_it(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=HUMAN_ASK)
    d, reply = with_person(h, raw_factory, {"decision": "allow"})
    assert isinstance(reply, p.Ack) and (d.decision, d.source) == ("allow", "user")


@pytest.mark.parametrize("scope", ["session", "always", "timed"])
def test_an_answer_reaching_beyond_this_call_is_refused(daemon_factory, raw_factory, scope: str) -> None:
    h = daemon_factory(policy=HUMAN_ASK)
    ans: dict[str, Any] = {"decision": "allow", "scope": scope, "rules": ["Bash(git push origin main)"]}
    if scope == "timed":
        ans["duration"] = 600
    _, reply = with_person(h, raw_factory, ans)
    assert isinstance(reply, p.Error) and reply.code == "refused" and "require_human" in reply.message
    assert alone(h, raw_factory).decision == "deny"  # nothing was remembered
    # control: without require_human the same answer is taken and remembered
    c = daemon_factory(policy='[permissions]\nask = ["Bash(make build)"]\n')
    ans["rules"] = ["Bash(git push origin main)"]
    _, reply = with_person(c, raw_factory, ans)
    assert isinstance(reply, p.Ack)


@pytest.mark.parametrize("human", [True, False])
def test_the_agents_own_dialog_may_not_decide_it(daemon_factory, raw_factory, human: bool) -> None:
    h = daemon_factory(policy=HUMAN_ASK if human else PLAIN_ASK)
    d = alone(h, raw_factory, on_no_ui="ask")
    if human:
        assert d.decision == "deny" and "require_human" in d.reason
    else:
        assert d.decision == "ask"  # the control: handed to the agent's dialog


@pytest.mark.parametrize("human", [True, False])
def test_modes_bypass_and_a_persons_override(daemon_factory, raw_factory, human: bool) -> None:
    h = daemon_factory(policy=(HUMAN_ASK if human else PLAIN_ASK) + 'allow = ["Bash(git push *)"]\n')
    for mode in ("bypassPermissions", "acceptEdits", "auto", None):
        first, _ = with_person(h, raw_factory, mode=mode)
        assert isinstance(first, p.Decision) and first.decision == "deny" and first.source == "user", (mode, first)
    ui = raw_factory(h.socket, role="ui")
    assert isinstance(ui.ask({"type": "set_mode", "session": "s-h", "mode": "bypassPermissions"}), p.Ack)
    first, _ = with_person(h, raw_factory)
    assert first.source == "user"  # still a person's
    # plain ask rules hold against modes too (the engine's order); only the daemon-level paths differ


def test_learned_session_and_timed_grants_do_not_reach_it(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=HUMAN_ASK + 'allow = ["Bash(make build)"]\n', autostart=False)
    h.state_dir.mkdir(parents=True, exist_ok=True)
    (h.state_dir / "learned.toml").write_text('[permissions]\nallow = ["Bash(git push origin main)"]\n')
    h.start()
    # a session grant and a timed grant for the very command, given while answering another call
    for ans in (
        {"decision": "allow", "scope": "session", "rules": ["Bash(git push origin main)"]},
        {"decision": "allow", "scope": "timed", "duration": 600, "rules": ["Bash(git push origin main)"]},
    ):
        ui = raw_factory(h.socket, role="ui")
        ui.ask({"type": "subscribe"})
        agent = raw_factory(h.socket)
        pend = agent.ask({"type": "request", "call": call("git fetch --all"), "ref": "r"})
        assert isinstance(pend, p.Pending), pend
        ui.recv()
        ui.send({"type": "answer", "id": pend.id, **ans})
        assert isinstance(ui.recv(), p.Resolved) and isinstance(ui.recv(), p.Ack)
        assert agent.recv().decision == "allow"
        ui.close()
    ui = raw_factory(h.socket, role="ui")
    g = ui.ask({"type": "grants"})
    assert isinstance(g, p.GrantsReply) and {x.scope for x in g.grants} == {"learned", "session", "timed"}
    d = alone(h, raw_factory)
    assert d.decision == "deny" and d.source == "rule" and "require_human" in d.reason
    first, _ = with_person(h, raw_factory)
    assert first.source == "user"


@pytest.mark.parametrize("hook_answer", ["allow", "ask"])
def test_a_hook_cannot_turn_it_into_an_allow(daemon_factory, raw_factory, tmp_path: Path, hook_answer: str) -> None:
    hook = script(tmp_path, f'import sys, json; sys.stdin.read(); print(json.dumps({{"decision": "{hook_answer}"}}))')
    h = daemon_factory(policy=HUMAN_ASK + f'\n[[hooks]]\ncommand = ["{hook}"]\n')
    d = alone(h, raw_factory, on_no_ui="ask")
    assert d.decision == "deny" and "require_human" in d.reason, d
    first, _ = with_person(h, raw_factory, mode="bypassPermissions")
    assert first.source == "user"


def test_auto_modes_classifier_cannot_allow_it(daemon_factory, raw_factory, tmp_path: Path) -> None:
    clf = script(tmp_path, 'import sys, json; sys.stdin.read(); print(json.dumps({"decision": "allow"}))')
    h = daemon_factory(policy=HUMAN_ASK + f'\n[classifier]\ncommand = ["{clf}"]\n')
    assert alone(h, raw_factory, mode="auto").decision == "deny"
    # control: the same classifier allows a call no ask rule covers
    assert alone(h, raw_factory, cmd="git fetch --all", mode="auto").decision == "allow"


def test_sandbox_auto_allow_cannot_allow_it(daemon_factory, raw_factory) -> None:
    h = daemon_factory(policy=HUMAN_ASK + "[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = true\n")
    ui = raw_factory(h.socket, role="ui")
    deadline = time.monotonic() + 30
    while True:  # the probe runs in the background at start
        st = ui.ask({"type": "status"})
        if isinstance(st, p.StatusReply) and st.sandbox is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    d = alone(h, raw_factory, on_no_ui="ask")
    assert d.decision == "deny" and "require_human" in d.reason


@pytest.mark.parametrize(
    "text, error",
    [
        ('allow = [{rule = "Bash(ls)", require_human = true}]', "ask rules only"),
        ('deny = [{rule = "Bash(ls)", require_human = true}]', "ask rules only"),
        ('ask = [{rule = "Bash(ls)", require_human = "yes"}]', "a boolean"),
        ('ask = [{rule = "Bash(ls)", require_humans = true}]', "unknown key"),
    ],
)
def test_malformed_require_human(tmp_path: Path, text: str, error: str) -> None:
    layer = parse_policy(f"[permissions]\n{text}\n", tmp_path / "policy.toml", layer="user")
    assert any(error in e for e in layer.errors), layer.errors
    assert not layer.rules
