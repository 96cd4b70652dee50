"""Sandbox-first, the default, wraps a shell call by rewriting its input; Cursor's hooks and an ACP permission
round cannot take a rewrite. By default their calls stay gate-only (an allow runs as asked) instead of every
one being denied; a person's explicit ``[sandbox] enabled = true`` keeps the strict answer (what cannot be
wrapped is denied by the adapter). Real daemon, real probe."""

from __future__ import annotations

from typing import Any

import pytest

from nexusd import protocol as p
from nexusd.sandbox.probe import probe
from tests.daemon.conftest import Raw

POLICY = '[permissions]\nallow = ["Bash(echo *)"]\n'


def _decide(daemon: Any, provider: str, tool: str, ws: str) -> p.Decision:
    agent = Raw(daemon.socket)
    agent.hello()
    call = {"provider": provider, "session": f"s-{provider}", "tool": tool, "input": {"command": "echo hi"},
            "cwd": ws, "workspace": ws}  # fmt: skip
    d = agent.ask({"type": "request", "call": call, "ref": "r"})
    assert isinstance(d, p.Decision), d
    return d


@pytest.mark.skipif(not probe().available, reason="needs a working sandbox")
def test_default_leaves_unrewritable_agents_gate_only(daemon_factory: Any, tmp_path: Any) -> None:
    daemon = daemon_factory(policy=POLICY, sandbox=True)  # nexusd's default: sandbox-first
    ws = str(tmp_path)
    wrapped = _decide(daemon, "claude", "Bash", ws)
    assert wrapped.decision == "allow" and wrapped.updated_input is not None  # runs sandboxed
    for provider, tool in (("cursor", "Shell"), ("acp", "Bash")):
        d = _decide(daemon, provider, tool, ws)
        assert d.decision == "allow" and d.updated_input is None, (provider, d)


@pytest.mark.skipif(not probe().available, reason="needs a working sandbox")
def test_an_explicit_enable_still_wraps_them(daemon_factory: Any, tmp_path: Any) -> None:
    daemon = daemon_factory(policy=POLICY + "[sandbox]\nenabled = true\n")
    d = _decide(daemon, "cursor", "Shell", str(tmp_path))
    assert d.decision == "allow" and d.updated_input is not None  # the adapter denies what it cannot rewrite
