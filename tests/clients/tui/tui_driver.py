"""Driving nexus-tui in tests: an agent that waits for its decision in a thread, and polling helpers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from nexusd import protocol
from nexusd.client import Client


def call(command: str = "git push origin main", session: str = "sess-1", cwd: str = "/tmp", **kw: Any):
    tool = kw.pop("tool", "Bash")
    tool_input = kw.pop("tool_input", {"command": command})
    return protocol.CallInfo(provider="claude", session=session, tool=tool, input=tool_input, cwd=cwd, **kw)


class Agent:
    """One tool call submitted the way nexus-hook does, waiting in a thread for its Decision."""

    def __init__(self, socket: Path, info: protocol.CallInfo, timeout: float = 30.0) -> None:
        self.decision: protocol.Decision | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(socket, info, timeout), daemon=True)
        self._thread.start()

    def _run(self, socket: Path, info: protocol.CallInfo, timeout: float) -> None:
        try:
            with Client(socket, role="agent", name="test-agent", timeout=5.0) as c:
                self.decision = c.request(info, on_no_ui="deny", timeout=timeout)
        except BaseException as e:
            self.error = e

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    async def result(self, pilot: Pilot[Any], timeout: float = 20.0) -> protocol.Decision:
        await until(pilot, lambda: self.done, timeout, "the agent never got its decision")
        if self.error is not None:
            raise self.error
        assert self.decision is not None
        return self.decision


async def until(pilot: Pilot[Any], cond: Callable[[], object], timeout: float = 15.0, what: str = "") -> None:
    """Let the app run until ``cond()`` holds; fail (not hang) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting: {what or cond}")
        await pilot.pause(0.05)
