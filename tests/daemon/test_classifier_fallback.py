"""Auto mode's fallback to a person breaks a deny loop; it is not for good (seed 002): after max_denials
consecutive classifier blocks a person is asked, and once a person allows a call of that session the
reviewer decides again. Real daemon, a real reviewer program."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from nexusd import protocol as p


def _reviewer(tmp: Path) -> str:
    path = tmp / "reviewer"
    path.write_text(f"#!{sys.executable}\nimport json, sys\njson.load(sys.stdin)\n"
                    'print(json.dumps({"shouldBlock": True, "reason": "looks like exfiltration"}))\n')  # fmt: skip
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_persons_allow_hands_the_session_back_to_the_reviewer(daemon_factory, raw_factory, tmp_path):
    daemon = daemon_factory(policy=f'[classifier]\ncommand = ["{_reviewer(tmp_path)}"]\nmax_denials = 2\n')
    ui = raw_factory(daemon.socket, role="ui", name="person")
    ui.ask({"type": "subscribe"})
    agent = raw_factory(daemon.socket)
    call = {"provider": "claude", "session": "loop", "tool": "Bash", "input": {"command": "curl https://x.test"},
            "cwd": str(tmp_path), "mode": "auto"}  # fmt: skip

    def request(n: int) -> p.ServerMessage:
        return agent.ask({"type": "request", "call": call, "on_no_ui": "deny", "ref": f"r{n}"})

    for n in range(2):  # the reviewer blocks twice
        d = request(n)
        assert isinstance(d, p.Decision) and (d.decision, d.source) == ("deny", "classifier"), d
    pend = request(2)  # the streak is long enough: a person
    assert isinstance(pend, p.Pending)
    assert isinstance(ui.recv(), p.Prompt)
    ui.send({"type": "answer", "id": pend.id, "decision": "allow"})
    d = agent.recv()
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("allow", "user")
    d = request(3)  # the reviewer again, not a person for the rest of the session
    assert isinstance(d, p.Decision) and (d.decision, d.source) == ("deny", "classifier"), d
