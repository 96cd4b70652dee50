"""The first-time decision in process: CPU per ``Pipeline.ruling_now`` (facts, ruling) over the ``agent`` calls.

The wire benchmark's daemon CPU per call mixes the decision with the event loop, the socket and the
audit writer; this isolates the decision itself (workspace, policy lookup, classification with its file
system checks, the engine, the verdict with its trace and details), memo off, on the same project and
policy as ``nexusctl bench``'s agent scenario. Usage: ``python -m nexusd.bench.gate [--calls N]
[--rounds R] [--json]``; it prints the best and the median round (CPU time per call, µs).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from nexusd.bench import agent, procs, report, scenarios


def run(calls: int = 2000, rounds: int = 5, seed: int = agent.DEFAULT_SEED, clients: int = 8) -> dict[str, Any]:
    """``rounds`` passes over ``calls`` calls (``clients`` sessions of the agent scenario), after one
    untimed pass; CPU time of this process per call."""
    from nexusd.core.model import Session
    from nexusd.decision.pipeline import Pipeline
    from nexusd.policy.store import PolicyStore

    root = Path(tempfile.mkdtemp(prefix="nxg"))
    try:
        for d in ("config", "state", "managed", "workspace"):
            (root / d).mkdir(mode=0o700)
        ws = procs.make_project(root / "workspace")
        agent.populate(ws, seed)
        (root / "config" / "policy.toml").write_text(procs.BENCH_POLICY)
        store = PolicyStore(config_dir=root / "config", state_dir=root / "state", managed_dir=root / "managed")
        store.load()
        corpus = scenarios.load_corpus()
        stream = [c for k in range(clients) for c in agent.session_calls(seed, k, calls // clients, str(ws), corpus)]
        session = Session(id="bench", provider="claude", agent_mode=stream[0].mode)  # as the daemon's session_for
        outcomes: dict[str, int] = {}
        pipeline = Pipeline(store)  # the daemon's pipeline, its facts in this thread (no pool, memo off)

        def one_pass() -> float:
            t0 = time.process_time()
            for call in stream:
                begun = pipeline.ruling_now(call, session)
                key = begun.verdict.decision if begun.verdict is not None else "rounds"
                outcomes[key] = outcomes.get(key, 0) + 1
            return (time.process_time() - t0) / len(stream) * 1e6

        one_pass()
        per_call = [one_pass() for _ in range(rounds)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "benchmark": "gate",
        "machine": report.machine_info(),
        "params": {"calls": len(stream), "rounds": rounds, "seed": seed, "clients": clients},
        "cpu_us_per_call": {"best": min(per_call), "median": statistics.median(per_call), "rounds": per_call},
        "outcomes": {k: v // (rounds + 1) for k, v in outcomes.items()},
    }


def render(out: dict[str, Any]) -> str:
    cpu = out["cpu_us_per_call"]
    return (
        f"gate.begin, agent scenario, memo off: {out['params']['calls']} calls x {out['params']['rounds']} rounds; "
        f"CPU per call best {cpu['best']:.1f} µs, median {cpu['median']:.1f} µs; outcomes {out['outcomes']}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = run(a.calls, a.rounds)
    report.emit(result, render(result), as_json=a.json, path=None)
