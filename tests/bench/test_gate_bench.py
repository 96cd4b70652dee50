"""``python -m nexusd.bench.gate``: the in-process first-time decision benchmark decides real calls."""

from __future__ import annotations

from nexusd.bench import gate


def test_gate_benchmark_decides_every_call_of_the_agent_stream() -> None:
    out = gate.run(calls=48, rounds=1)
    assert out["params"]["calls"] == 48
    assert sum(out["outcomes"].values()) == 48  # each call once per pass, none lost to an exception
    assert out["outcomes"].get("allow", 0) > 0  # the bench policy allows most of an agent's calls
    assert out["cpu_us_per_call"]["best"] > 0
    assert "gate.begin" in gate.render(out)
