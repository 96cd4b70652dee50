"""Holding an ask (a person needs longer than the default deadline) and the one narrowness check, over the
wire of a real daemon: a hold moves the deadline at most to what the requester waits, every UI hears of it,
the deny comes at the held deadline; ``rule_check`` says refused / confirm / ok, and an allow beyond once with
a rule marked confirm is refused unless the person confirmed it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from nexusd import protocol as p
from nexusd.client import Client, NexusClientError
from nexusd.core.policy.suggest import rule_status
from tests.conftest import DaemonHandle


def call(command: str, session: str = "sess-h") -> p.CallInfo:
    return p.CallInfo(provider="claude", session=session, tool="Bash", input={"command": command}, cwd="/tmp")


class Asker:
    """An agent that waits ``wait`` seconds for its decision, in a thread."""

    def __init__(self, daemon: DaemonHandle, command: str, wait: float, session: str = "sess-h") -> None:
        self.result: Any = None
        self.waited = 0.0

        def run() -> None:
            with Client(socket_path=str(daemon.socket), role="agent", name="agent") as c:
                t0 = time.monotonic()
                try:
                    self.result = c.request(call(command, session), on_no_ui="ask", timeout=wait)
                except Exception as e:
                    self.result = e
                self.waited = time.monotonic() - t0

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


def test_hold_moves_the_deadline_up_to_the_agents_wait_and_no_further(daemon_factory: Any) -> None:
    daemon = daemon_factory(pending_timeout=3)
    with Client(socket_path=str(daemon.socket), role="ui", name="holder") as ui:
        ui.subscribe()
        asker = Asker(daemon, "make dist", wait=10)
        prompt = ui.next_event(timeout=10)
        assert isinstance(prompt, p.Prompt)
        item = prompt.item
        ack = ui.call(p.Hold(id=item.id, seconds=60))
        assert isinstance(ack, p.Ack) and "left" in ack.detail
        held = ui.next_event(timeout=5)
        assert isinstance(held, p.Held) and held.id == item.id and held.by.startswith("holder")
        assert item.deadline + 3 < held.deadline <= item.created + 10, "capped at the agent's own wait"
        assert held.limit == pytest.approx(held.deadline, abs=0.01)
        with pytest.raises(NexusClientError) as e:  # at the limit: a second hold says so
            ui.call(p.Hold(id=item.id, seconds=60))
        assert e.value.code == "refused" and "answer now" in str(e.value)  # type: ignore[attr-defined]
        asker.thread.join(20)
    assert isinstance(asker.result, p.Decision) and asker.result.source == "timeout"
    assert 6 < asker.waited < 10, f"denied at the held deadline, before the agent gave up ({asker.waited:.1f} s)"


def test_a_request_that_does_not_say_its_wait_cannot_be_held(daemon_factory: Any, raw_factory: Any) -> None:
    daemon = daemon_factory(pending_timeout=3)
    agent = raw_factory(daemon.socket)
    with Client(socket_path=str(daemon.socket), role="ui", name="holder") as ui:
        ui.subscribe()
        agent.send({"type": "request", "call": {**p_call_dict("make dist")}, "ref": "r"})  # no max_wait
        prompt = ui.next_event(timeout=10)
        assert isinstance(prompt, p.Prompt)
        with pytest.raises(NexusClientError) as e:
            ui.call(p.Hold(id=prompt.item.id, seconds=30))
        assert e.value.code == "refused"  # type: ignore[attr-defined]
    agent.close()


def p_call_dict(command: str) -> dict[str, Any]:
    return {"provider": "claude", "session": "s", "tool": "Bash", "input": {"command": command}, "cwd": "/tmp"}


def test_hold_is_bounded_on_the_wire(daemon: DaemonHandle, raw_factory: Any) -> None:
    ui = raw_factory(daemon.socket, role="ui")
    for bad in (0, -5, 3601, "x"):
        reply = ui.ask({"type": "hold", "id": "0" * 32, "seconds": bad, "ref": "h"})
        assert isinstance(reply, p.Error) and reply.code == "invalid_message", (bad, reply)
    reply = ui.ask({"type": "hold", "id": "0" * 32, "ref": "h"})
    assert isinstance(reply, p.Error) and reply.code == "not_found"
    agent = raw_factory(daemon.socket)
    for bad in (0, -1, 86_401):
        reply = agent.ask({"type": "request", "call": p_call_dict("ls"), "max_wait": bad, "ref": "q"})
        assert isinstance(reply, p.Error) and reply.code == "invalid_message", (bad, reply)


@pytest.mark.parametrize(
    ("rule", "status"),
    [
        ("Bash(rm *)", "confirm"),
        ("Bash(rm -rf *)", "confirm"),
        ("Bash(/bin/rm:*)", "confirm"),
        ("Bash(git commit *)", "confirm"),
        ("Bash(git push:*)", "confirm"),
        ("Bash(npm test *)", "confirm"),
        ("Bash(make *)", "confirm"),
        ("Bash(curl -F *)", "confirm"),
        ("Bash(sed -i *)", "confirm"),
        ("Bash(python3 *)", "refused"),
        ("Bash(sh -c *)", "refused"),
        ("Bash(find *)", "refused"),
        ("Bash(xargs *)", "refused"),
        ("Bash(*)", "refused"),
        ("Bash", "refused"),
        ("Bash(rm -rf src)", "ok"),
        ("Bash(npm test -- --watch=false)", "ok"),
        ("Bash(git log *)", "ok"),
        ("Bash(ls *)", "ok"),
        ("Read(/src/**)", "ok"),
    ],
)
def test_the_one_narrowness_check(rule: str, status: str) -> None:
    assert rule_status("allow", rule)[0] == status, rule_status("allow", rule)


def test_rule_check_over_the_wire_and_always_needs_the_confirmation(daemon_factory: Any) -> None:
    daemon = daemon_factory(pending_timeout=30)
    with Client(socket_path=str(daemon.socket), role="ui", name="ui") as ui:
        reply = ui.call(p.RuleCheck(kind="allow", rules=["Bash(rm *)", "Bash(bash *)", "Bash(rm -rf build)"]))
        assert isinstance(reply, p.RuleCheckReply)
        assert [r.status for r in reply.results] == ["confirm", "refused", "ok"]
        assert "delete" in reply.results[0].reason
        deny = ui.call(p.RuleCheck(kind="deny", rules=["Bash(rm *)"]))
        assert deny.results[0].status == "ok"

        ui.subscribe()
        asker = Asker(daemon, "rm -rf build", wait=30)
        prompt = ui.next_event(timeout=10)
        assert isinstance(prompt, p.Prompt)
        time.sleep(0.1)
        for scope in ("always", "session"):
            with pytest.raises(NexusClientError) as e:  # Bash(rm *) unconfirmed: refused, still pending
                ui.call(p.Answer(id=prompt.item.id, decision="allow", scope=scope, rules=["Bash(rm *)"]))
            assert e.value.code == "refused" and "confirm" in str(e.value)  # type: ignore[attr-defined]
        with pytest.raises(NexusClientError):
            ui.call(p.Answer(id=prompt.item.id, decision="allow", scope="timed", duration=60, rules=["Bash(rm *)"]))
        ack = ui.call(
            p.Answer(id=prompt.item.id, decision="allow", scope="session", rules=["Bash(rm *)"], confirm_broad=True)
        )
        assert isinstance(ack, p.Ack)
        asker.thread.join(20)
    assert isinstance(asker.result, p.Decision) and asker.result.decision == "allow"


def test_nexusctl_answer_needs_confirm_wide_for_a_wide_rule(daemon_factory: Any) -> None:
    import subprocess
    import sys

    daemon = daemon_factory(pending_timeout=30)
    ctl = [sys.executable, "-c", "from nexusd.cli.ctl import main; main()"]
    with Client(socket_path=str(daemon.socket), role="ui", name="watcher") as ui:
        ui.subscribe()
        asker = Asker(daemon, "rm -r build/x", wait=30)
        prompt = ui.next_event(timeout=10)
        assert isinstance(prompt, p.Prompt)
        rid = prompt.item.id
        args = ["answer", rid, "allow", "--session", "--rule", "Bash(rm *)"]
        r = subprocess.run([*ctl, *args], env=daemon.env, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "confirm" in (r.stdout + r.stderr), r
        r = subprocess.run([*ctl, *args, "--confirm-wide"], env=daemon.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r
        asker.thread.join(20)
    assert isinstance(asker.result, p.Decision) and asker.result.decision == "allow"
