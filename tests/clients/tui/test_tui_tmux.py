"""Smoke test: ``nexus-tui`` in a real terminal (tmux), driven by keys, read back with capture-pane."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tui_driver import Agent, call

TMUX = shutil.which("tmux")
NEXUS_TUI = Path(sys.executable).with_name("nexus-tui")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (scripts/bootstrap installs it)")


class Tmux:
    """A private tmux server (own socket, no config) running one command in a 120x40 pane."""

    def __init__(self, root: Path) -> None:
        self.base = [str(TMUX), "-S", str(root / "tmux.sock"), "-f", "/dev/null"]

    def run(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui")

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=10)


def wait_agent(agent: Agent, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not agent.done:
        assert time.monotonic() < deadline, "the agent never got its decision"
        time.sleep(0.05)
    if agent.error:
        raise agent.error
    return agent.decision


def test_a_person_answers_in_a_real_terminal(daemon_factory: Callable[..., Any]) -> None:
    d = daemon_factory()
    tmux = Tmux(d.root)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in d.env.items() if k.startswith("NEXUS_"))
    command = f"env {env} TERM=xterm-256color {shlex.quote(str(NEXUS_TUI))} --no-bell --name tmux-tui"
    try:
        tmux.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "40", command)
        tmux.wait_for("connected to nexusd")

        agent = Agent(d.socket, call("git push origin main"))
        tmux.wait_for("git push origin main")
        time.sleep(1.0)  # the arrival guard refuses answers for a moment after a request appears
        tmux.run("send-keys", "-t", "tui", "y")
        decision = wait_agent(agent)
        assert (decision.decision, decision.source) == ("allow", "user")
        assert decision.answered_by and "tmux-tui" in decision.answered_by
        tmux.wait_for("Sent: allowed once")

        hostile = "echo ok\x1b[2J\x1b]0;owned\x07 \u202edevil"
        agent = Agent(d.socket, call(hostile))
        screen = tmux.wait_for("echo ok")
        assert "\\e[2J" in screen and "\\u202e" in screen and "\\x07" in screen
        assert "connected to nexusd" in screen, "the escape did not clear or repaint the terminal"
        time.sleep(1.0)
        tmux.run("send-keys", "-t", "tui", "N")
        tmux.wait_for("Deny, with a message")
        tmux.run("send-keys", "-t", "tui", "-l", "not this one")
        tmux.run("send-keys", "-t", "tui", "Enter")
        decision = wait_agent(agent)
        assert (decision.decision, decision.message) == ("deny", "not this one")

        tmux.run("send-keys", "-t", "tui", "q")
        deadline = time.monotonic() + 10
        while "tui" in subprocess.run([*tmux.base, "ls"], capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, "q did not quit"
            time.sleep(0.1)
    finally:
        tmux.kill()
