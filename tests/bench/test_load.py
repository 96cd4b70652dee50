"""The load generator against the real daemon: decisions counted right, the auto UI answers only its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from nexusd import protocol
from nexusd.bench import procs, scenarios
from nexusd.bench.load import auto_ui, run_load
from nexusd.bench.wire import Conn
from tests.bench.sanity import assert_summary
from tests.conftest import DaemonHandle


@pytest.fixture
def bench_daemon(daemon_factory: Callable[..., DaemonHandle]) -> DaemonHandle:
    return daemon_factory(policy=procs.BENCH_POLICY)


def _per_client(name: str, n: int, ws: str) -> list[list[tuple[bytes, scenarios.Expect]]]:
    cycle = scenarios.calls(name, ws)
    return [scenarios.encode_for_client(cycle, c) for c in range(n)]


def test_rule_scenarios_get_rule_decisions(bench_daemon: DaemonHandle) -> None:
    ws = str(bench_daemon.root)
    for name, outcome in (("allow", "allow/rule"), ("deny", "deny/rule")):
        res = asyncio.run(run_load(bench_daemon.socket, name, _per_client(name, 2, ws), requests=12, warmup=1))
        s = res.summary()
        assert s["errors"] == 0, s["samples"]
        assert s["unexpected"] == 0, s["samples"]
        assert s["outcomes"] == {outcome: 12}
        assert_summary(s["latency_us"], 12)


def test_prompt_scenario_is_answered_by_the_auto_ui(bench_daemon: DaemonHandle) -> None:
    res = asyncio.run(
        run_load(
            bench_daemon.socket,
            "prompt",
            _per_client("prompt", 2, str(bench_daemon.root)),
            requests=6,
            warmup=1,
            with_ui=True,
        )
    )
    s = res.summary()
    assert s["errors"] == 0 and s["unexpected"] == 0, s["samples"]
    assert s["outcomes"] == {"allow/user": 6}
    assert s["ui_answers"] == 6 + 2  # timed requests plus one warm-up per client
    assert_summary(s["latency_us"], 6)


def test_auto_ui_never_answers_a_session_that_is_not_the_benchmarks(bench_daemon: DaemonHandle) -> None:
    """Against a person's running daemon the benchmark must not approve a real agent's request."""

    async def scenario() -> None:
        stop = asyncio.Event()
        answered = [0]
        ui = asyncio.ensure_future(auto_ui(bench_daemon.socket, stop, answered))
        await asyncio.sleep(0.2)
        agent = await Conn.open(bench_daemon.socket, role="agent", name="real-agent")
        call = protocol.CallInfo("claude", "real-session", "Bash", {"command": "git push origin main"}, "/tmp")
        agent.send(protocol.encode(protocol.Request(call=call, on_no_ui="deny", ref="r1")))
        first = protocol.decode_server(await agent.recv_line())
        assert isinstance(first, protocol.Pending), first
        await asyncio.sleep(0.5)  # the UI has seen the prompt by now
        assert answered[0] == 0
        agent.send(protocol.encode(protocol.Cancel(id=first.id)))
        stop.set()
        await ui
        await agent.close()

    asyncio.run(scenario())
