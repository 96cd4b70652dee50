"""Daemon start-to-ready (spawn until the first hello is welcomed) and idle RSS, over several starts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from nexusd.bench import procs, report, stats


def run(runs: int = 10, settle: float = 0.5, *, uvloop: bool = False, args: Sequence[str] = ()) -> dict[str, Any]:
    """Start the daemon ``runs`` times with the benchmark policy; RSS is read ``settle`` s after ready."""
    ready_ms: list[float] = []
    cpu_ms: list[float] = []
    rss_mb: list[float] = []
    for _ in range(runs):
        d = procs.start_daemon(procs.BENCH_POLICY, args, uvloop=uvloop)
        try:
            ready_ms.append(d.ready_s * 1000.0)
            if d.ready_cpu_s is not None:
                cpu_ms.append(d.ready_cpu_s * 1000.0)
            time.sleep(settle)
            rss_b = procs.rss_bytes(d.pid)
            if rss_b is not None:
                rss_mb.append(rss_b / (1024 * 1024))
        finally:
            d.cleanup()
    ready = stats.summarize(ready_ms)
    rss = stats.summarize(rss_mb)
    t = report.TARGETS
    out = {
        "benchmark": "startup",
        "machine": report.machine_info(),
        "params": {"runs": runs, "settle_s": settle, "uvloop": uvloop},
        "start_to_ready_ms": ready | {"median": stats.median(ready_ms)},
        # the daemon's own CPU (user + system) from spawn to ready: what start-up costs, load or not
        "cpu_to_ready_ms": stats.summarize(cpu_ms) | {"median": stats.median(cpu_ms)},
        "idle_rss_mb": rss | {"median": stats.median(rss_mb)},
        "checks": [
            {
                "metric": "start to ready, median",
                "value": stats.median(ready_ms),
                "target": f"≤ {t['start_to_ready_ms']:g} ms",
                "result": report.check(stats.median(ready_ms), t["start_to_ready_ms"]),
            },
            {
                "metric": "idle RSS, median",
                "value": stats.median(rss_mb),
                "target": "≤ 40 MB",
                "result": report.check(stats.median(rss_mb), t["idle_rss_mb"]),
            },
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    r, m, c = out["start_to_ready_ms"], out["idle_rss_mb"], out["cpu_to_ready_ms"]
    rows = [
        ["start to ready (ms)", r["count"], r["median"], r["p90"], r["max"]],
        ["CPU to ready (ms)", c["count"], c["median"], c["p90"], c["max"]],
        ["idle RSS (MB)", m["count"], m["median"], m["p90"], m["max"]],
    ]
    return report.table(["metric", "runs", "median", "p90", "max"], rows) + "\n\n" + render_checks(out)


def render_checks(out: dict[str, Any]) -> str:
    rows = [[c["metric"], c["value"], c["target"], c["result"]] for c in out.get("checks", [])]
    return report.table(["target", "value", "goal", "result"], rows)
