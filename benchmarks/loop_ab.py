#!/usr/bin/env python3
"""A/B of the daemon's event loop: default asyncio vs uvloop, interleaved rounds, same load.

Each round starts a fresh daemon per loop (in alternating order) and runs the same scenario at 1 and 32
clients; the medians over rounds are compared. Usage: benchmarks/loop_ab.py [--rounds N] [--requests N]
[--scenario allow] [--json] [--out FILE]"""

from __future__ import annotations

import argparse
from typing import Any

from nexusd.bench import report, stats
from nexusd.bench.runner import run_bench


def ab(rounds: int, requests: int, scenario: str) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {
        k: {"p50_1": [], "p99_1": [], "rps_32": [], "p99_32": []} for k in ("asyncio", "uvloop")
    }
    for r in range(rounds):
        order = ("asyncio", "uvloop") if r % 2 == 0 else ("uvloop", "asyncio")
        for loop in order:
            out = run_bench(scenario_names=(scenario,), clients=(1, 32), requests=requests, uvloop=loop == "uvloop")
            one, many = out["cells"][0]["nexusd"], out["cells"][1]["nexusd"]
            per[loop]["p50_1"].append(one["latency_us"]["p50"])
            per[loop]["p99_1"].append(one["latency_us"]["p99"])
            per[loop]["rps_32"].append(many["throughput_rps"])
            per[loop]["p99_32"].append(many["latency_us"]["p99"])
    med = {loop: {k: stats.median(v) for k, v in d.items()} for loop, d in per.items()}
    return stats.json_safe(
        {
            "benchmark": "loop_ab",
            "machine": report.machine_info(),
            "params": {"rounds": rounds, "requests": requests, "scenario": scenario},
            "raw": per,
            "median": med,
        }
    )


def render(out: dict[str, Any]) -> str:
    m = out["median"]
    rows = [[k, m[k]["p50_1"], m[k]["p99_1"], m[k]["rps_32"], m[k]["p99_32"]] for k in ("asyncio", "uvloop")]
    head = ["loop", "p50 µs (1 client)", "p99 µs (1 client)", "req/s (32 clients)", "p99 µs (32 clients)"]
    return f"median of {out['params']['rounds']} interleaved rounds\n" + report.table(head, rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--scenario", default="allow")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    res = ab(a.rounds, a.requests, a.scenario)
    report.emit(res, render(res), as_json=a.json, path=a.out)
