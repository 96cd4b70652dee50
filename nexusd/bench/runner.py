"""``nexusctl bench``: the wire scenarios against a daemon, optionally beside the echo floor.

With ``--baseline`` the echo server gets exactly the same client load (same clients, same pre-encoded
request lines, same counts), right before the daemon in each cell, so every ratio compares two numbers
taken on the same machine at the same moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nexusd import protocol
from nexusd.bench import procs, report, scenarios, stats, wire
from nexusd.bench.load import run_load


async def _daemon_pid(path: Path) -> int | None:
    try:
        reply = await wire.query(path, protocol.Status())
    except (wire.WireError, OSError, ValueError):
        return None
    return reply.pid if isinstance(reply, protocol.StatusReply) else None


async def _run_cells(
    path: Path,
    echo_path: Path | None,
    names: Sequence[str],
    clients: Sequence[int],
    workspace: str,
    *,
    requests: int | None,
    duration: float | None,
    warmup: int,
    corpus: Path | None,
) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for name in names:
        scenario = scenarios.SCENARIOS[name]
        cycle = scenarios.calls(name, workspace, corpus)
        for n in clients:
            per_client = [scenarios.encode_for_client(cycle, c, offset=c * 7) for c in range(n)]
            cell: dict[str, Any] = {"scenario": name, "clients": n}
            if echo_path is not None:
                floor = await run_load(
                    echo_path, name, per_client, requests=requests, duration=duration, warmup=warmup, echo=True
                )
                cell["echo"] = floor.summary()
            res = await run_load(
                path, name, per_client, requests=requests, duration=duration, warmup=warmup, with_ui=scenario.needs_ui
            )
            cell["nexusd"] = res.summary()
            if "echo" in cell:
                d, e = cell["nexusd"], cell["echo"]
                cell["ratio"] = {
                    "p50": stats.ratio(d["latency_us"]["p50"], e["latency_us"]["p50"]),
                    "p99": stats.ratio(d["latency_us"]["p99"], e["latency_us"]["p99"]),
                    "throughput": stats.ratio(d["throughput_rps"], e["throughput_rps"]),
                }
            cells.append(cell)
    return cells


def run_bench(
    *,
    socket: Path | None = None,
    scenario_names: Sequence[str] = ("allow", "deny", "prompt", "mix"),
    clients: Sequence[int] = (1, 32),
    requests: int | None = 2000,
    duration: float | None = None,
    warmup: int = 20,
    baseline: bool = False,
    uvloop: bool = False,
    corpus: Path | None = None,
    daemon_args: Sequence[str] = (),
    pin: bool = True,
) -> dict[str, Any]:
    """Run every (scenario, clients) cell; returns the JSON-able report (see ``docs/PERFORMANCE.md``).

    With ``pin`` (and a daemon of its own), the daemon and the echo server share one CPU and the load
    generator gets the others: otherwise where the scheduler happens to place the processes swings
    both the floor and the daemon by 2x between runs (measured on 2 vCPUs), and ratios mean nothing."""
    for name in scenario_names:
        if name not in scenarios.SCENARIOS:
            raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(scenarios.SCENARIOS)}")
    if "mix" in scenario_names:
        scenarios.load_corpus(corpus)  # fail before starting anything, not half-way through the run
    procs.raise_nofile(4096)
    out: dict[str, Any] = {
        "benchmark": "wire",
        "machine": report.machine_info(),
        "params": {
            "scenarios": list(scenario_names),
            "clients": list(clients),
            "requests": requests,
            "duration_s": duration,
            "warmup_per_client": warmup,
            "baseline": baseline,
            "uvloop": uvloop,
            "target": str(socket) if socket else "temporary daemon",
        },
    }
    split = procs.cpu_split() if pin and socket is None else None
    out["params"]["pinned"] = (
        {"server_cpus": sorted(split[0]), "client_cpus": sorted(split[1])} if split is not None else None
    )
    with contextlib.ExitStack() as stack:
        if split is not None:
            mask = os.sched_getaffinity(0)
            stack.callback(os.sched_setaffinity, 0, mask)
            os.sched_setaffinity(0, split[1])
        if socket is None:
            d = stack.enter_context(procs.daemon(procs.BENCH_POLICY, daemon_args, uvloop=uvloop))
            path, workspace = d.socket, str(d.root / "workspace")
            pid: int | None = d.pid
            out["daemon"] = {"start_to_ready_ms": d.ready_s * 1000.0}
        else:
            path = socket
            pid = asyncio.run(_daemon_pid(path))
            workspace = str(procs.make_project(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nxb-ws")))))
            out["daemon"] = {}
        echo = stack.enter_context(procs.echo_server(uvloop=uvloop)) if baseline else None
        echo_path = echo.socket if echo is not None else None
        if split is not None:
            for server in (pid, echo.pid if echo is not None else None):
                if server:
                    procs.pin(server, split[0])
        out["daemon"]["pid"] = pid
        out["daemon"]["rss_before_mb"] = report.mb(procs.rss_bytes(pid)) if pid else None
        out["cells"] = asyncio.run(
            _run_cells(
                path,
                echo_path,
                scenario_names,
                clients,
                workspace,
                requests=requests,
                duration=duration,
                warmup=warmup,
                corpus=corpus,
            )
        )
        out["daemon"]["rss_after_mb"] = report.mb(procs.rss_bytes(pid)) if pid else None
    out["checks"] = checks(out)
    return stats.json_safe(out)


def checks(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 8's round-trip and throughput targets, where this run measured them.

    A cell whose decisions were not the expected rule decisions (another policy, an error) measured
    something else: its rows say ``invalid`` instead of pass or miss.
    """
    t = report.TARGETS
    rows: list[dict[str, Any]] = []
    for cell in out.get("cells", []):
        if cell["scenario"] not in ("allow", "deny"):
            continue
        name = f"{cell['scenario']} x{cell['clients']}"
        d = cell["nexusd"]
        bad = d["errors"] or d["unexpected"]
        found: list[dict[str, Any]] = []
        if cell["clients"] == 1:
            if "ratio" in cell:
                found.append(_row(f"round trip p50 / echo p50 ({name})", cell["ratio"]["p50"], t["rt_p50_ratio"], "x"))
            found.append(_row(f"round trip p99 ({name})", d["latency_us"]["p99"], t["rt_p99_us"], "µs"))
        if cell["clients"] >= 32 and "ratio" in cell:
            ratio = cell["ratio"]["throughput"]
            found.append(_row(f"throughput / echo ({name})", ratio, t["throughput_ratio"], "x", at_least=True))
        for row in found:
            if bad:
                row["result"] = "invalid"
        rows += found
    return rows


def _row(metric: str, value: float | None, target: float, unit: str, *, at_least: bool = False) -> dict[str, Any]:
    return {
        "metric": metric,
        "value": value,
        "target": f"{'≥' if at_least else '≤'} {target:g}{unit}",
        "result": report.check(value, target, at_least=at_least),
    }


def render(out: dict[str, Any]) -> str:
    """The readable table: one row per (scenario, clients, target)."""
    rows = []
    for cell in out["cells"]:
        for key in ("echo", "nexusd"):
            if key not in cell:
                continue
            s = cell[key]
            lat = s["latency_us"]
            ratio = cell.get("ratio", {}).get("p50") if key == "nexusd" else None
            tput = cell.get("ratio", {}).get("throughput") if key == "nexusd" else None
            rows.append(
                [
                    cell["scenario"],
                    cell["clients"],
                    key,
                    s["requests"],
                    lat["p50"],
                    lat["p90"],
                    lat["p99"],
                    lat["max"],
                    s["throughput_rps"],
                    s["errors"],
                    s["unexpected"],
                    ratio,
                    tput,
                ]
            )
    head = ["scenario", "clients", "target", "n", "p50 µs", "p90 µs", "p99 µs", "max µs", "req/s", "err", "unexp"]
    head += ["p50 x floor", "tput x floor"]
    m = out["machine"]
    d = out.get("daemon", {})
    load = ", ".join(f"{x:.2f}" for x in m["loadavg"])
    lines = [
        f"machine: {m['nproc']} cpu ({m['cpu']}), Python {m['python']}, load {load}",
        f"daemon: pid {d.get('pid')}, start-to-ready {report.fmt(d.get('start_to_ready_ms'))} ms, "
        f"RSS before {report.fmt(d.get('rss_before_mb'))} MB, after {report.fmt(d.get('rss_after_mb'))} MB"
        + (" (uvloop)" if out["params"].get("uvloop") else ""),
        "",
        report.table(head, rows),
    ]
    samples = [f"  {c['scenario']} x{c['clients']}: {s}" for c in out["cells"] for s in c["nexusd"]["samples"][:2]]
    if samples:
        lines += ["", "unexpected replies (first few):", *samples]
    if out.get("checks"):
        lines += [
            "",
            report.table(
                ["target", "value", "goal", "result"],
                [[c["metric"], c["value"], c["target"], c["result"]] for c in out["checks"]],
            ),
        ]
    return "\n".join(lines)
