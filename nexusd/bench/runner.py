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
from nexusd.bench import agent, procs, report, scenarios, stats, wire
from nexusd.bench.load import run_load


async def _daemon_pid(path: Path) -> int | None:
    try:
        reply = await wire.query(path, protocol.Status())
    except (wire.WireError, OSError, ValueError):
        return None
    return reply.pid if isinstance(reply, protocol.StatusReply) else None


async def _status(path: Path) -> protocol.StatusReply | None:
    try:
        reply = await wire.query(path, protocol.Status())
    except (wire.WireError, OSError, ValueError):
        return None
    return reply if isinstance(reply, protocol.StatusReply) else None


_MEMO_KEYS = ("memo/hit", "memo/miss", "memo/stale")


def _memo(before: protocol.StatusReply | None, after: protocol.StatusReply | None) -> dict[str, Any] | None:
    """The decision memo's counters over one cell (None when the daemon keeps no memo or did not answer).

    ``hit_rate`` is hits over lookups; a lookup that found a stale entry counts as a miss. Against a
    running daemon (``--socket``) other agents' calls are counted too."""
    if before is None or after is None:
        return None
    delta = {k.split("/")[1]: after.counters.get(k, 0) - before.counters.get(k, 0) for k in _MEMO_KEYS}
    lookups = delta["hit"] + delta["miss"] + delta["stale"]
    if not lookups:
        return None
    return delta | {"lookups": lookups, "hit_rate": delta["hit"] / lookups}


def _decision_us(before: protocol.StatusReply | None, after: protocol.StatusReply | None) -> float | None:
    """The mean wall time of the gate's inline decision over one cell (``gate/ns`` over ``gate/calls``):
    the part of a call's daemon CPU that is the decision itself, beside the wire, the loop and the audit."""
    if before is None or after is None:
        return None
    calls = after.counters.get("gate/calls", 0) - before.counters.get("gate/calls", 0)
    ns = after.counters.get("gate/ns", 0) - before.counters.get("gate/ns", 0)
    return ns / calls / 1000.0 if calls > 0 else None


def _run_length(requests: int | None, clients: int, warmup: int) -> int:
    """Calls per client a stream scenario needs: its warm-up and its share, each call once; a
    ``--duration`` run gets 4,000 and then starts its stream over (the memo hits more from there)."""
    return warmup + (-(-requests // clients) if requests else 4000)


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
    seed: int,
    pid: int | None,
    echo_pid: int | None = None,
) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for name in names:
        scenario = scenarios.SCENARIOS[name]
        for n in clients:
            length = _run_length(requests, n, warmup)
            per_client = scenarios.per_client(name, n, workspace, length=length, corpus=corpus, seed=seed)
            cell: dict[str, Any] = {"scenario": name, "clients": n}
            if echo_path is not None:
                e0 = procs.cpu_seconds(echo_pid) if echo_pid else None
                floor = await run_load(
                    echo_path, name, per_client, requests=requests, duration=duration, warmup=warmup, echo=True
                )
                e1 = procs.cpu_seconds(echo_pid) if echo_pid else None
                cell["echo"] = floor.summary()
                # the floor's own CPU per request: what a JSON-lines server costs before any decision
                if e0 is not None and e1 is not None:
                    sent = floor.completed + warmup * n
                    cell["echo"]["server_cpu_us_per_request"] = (e1 - e0) * 1e6 / sent if sent else None
            before = await _status(path)
            cpu0 = procs.cpu_seconds(pid) if pid else None
            res = await run_load(
                path, name, per_client, requests=requests, duration=duration, warmup=warmup, with_ui=scenario.needs_ui
            )
            cpu1 = procs.cpu_seconds(pid) if pid else None
            after = await _status(path)
            cell["nexusd"] = res.summary()
            cell["memo"] = _memo(before, after)
            cell["nexusd"]["decision_us_per_call"] = _decision_us(before, after)
            # The daemon's CPU over the whole cell (warm-up included) per request of the cell.
            if cpu0 is not None and cpu1 is not None:
                sent = res.completed + warmup * n
                cell["nexusd"]["daemon_cpu_s"] = cpu1 - cpu0
                cell["nexusd"]["daemon_cpu_us_per_request"] = (cpu1 - cpu0) * 1e6 / sent if sent else None
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
    scenario_names: Sequence[str] = ("agent", "allow", "deny", "prompt", "mix"),
    clients: Sequence[int] = (1, 32),
    requests: int | None = 2000,
    duration: float | None = None,
    warmup: int = 20,
    baseline: bool = False,
    uvloop: bool = False,
    corpus: Path | None = None,
    daemon_args: Sequence[str] = (),
    pin: bool = True,
    seed: int = 1,
) -> dict[str, Any]:
    """Run every (scenario, clients) cell; returns the JSON-able report (see ``docs/PERFORMANCE.md``).

    With ``pin`` (and a daemon of its own), the daemon and the echo server share one CPU and the load
    generator gets the others: otherwise where the scheduler happens to place the processes swings
    both the floor and the daemon by 2x between runs (measured on 2 vCPUs), and ratios mean nothing."""
    for name in scenario_names:
        if name not in scenarios.SCENARIOS:
            raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(scenarios.SCENARIOS)}")
    if {"mix", "agent"} & set(scenario_names):
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
            "seed": seed,
            "daemon_args": list(daemon_args),
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
            out["daemon"] = {
                "start_to_ready_ms": d.ready_s * 1000.0,
                "cpu_to_ready_ms": d.ready_cpu_s * 1000.0 if d.ready_cpu_s is not None else None,
            }
        else:
            path = socket
            pid = asyncio.run(_daemon_pid(path))
            workspace = str(procs.make_project(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nxb-ws")))))
            out["daemon"] = {}
        if "agent" in scenario_names:
            agent.populate(Path(workspace), seed)
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
                seed=seed,
                pid=pid,
                echo_pid=echo.pid if echo is not None else None,
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
    cells = out.get("cells", [])
    allow_p50 = {c["clients"]: c["nexusd"]["latency_us"]["p50"] for c in cells if c["scenario"] == "allow"}
    first_time = memo_off(out.get("params", {}).get("daemon_args", []))
    for cell in cells:
        if cell["scenario"] == "prompt":
            rows += _ask_rows(cell, allow_p50.get(cell["clients"]))
            continue
        if cell["scenario"] == "agent":
            rows += _agent_rows(cell) if first_time else []
            continue
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


def memo_off(daemon_args: Sequence[str]) -> bool:
    """Whether the daemon was started with its decision memo off (``--decision-memo=0`` or
    ``--decision-memo 0``): only then are the agent cells first-time figures."""
    args = list(daemon_args)
    return any(
        a == "--decision-memo=0" or (a == "--decision-memo" and i + 1 < len(args) and args[i + 1] == "0")
        for i, a in enumerate(args)
    )


def _agent_rows(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 21's first-time targets, on the agent stream with the memo off (every call decided afresh):
    p50 against the echo floor at one client, throughput against it at 32 or more."""
    t = report.TARGETS
    if "ratio" not in cell:
        return []
    n = cell["clients"]
    name = f"agent x{n}, memo off"
    found = []
    if n == 1:
        found.append(_row(f"first-time p50 / echo p50 ({name})", cell["ratio"]["p50"], t["first_time_p50_ratio"], "x"))
    if n >= 32:
        found.append(
            _row(
                f"first-time throughput / echo ({name})",
                cell["ratio"]["throughput"],
                t["first_time_throughput_ratio"],
                "x",
                at_least=True,
            )
        )
    d = cell["nexusd"]
    for row in found:
        if d["errors"] or d["unexpected"]:
            row["result"] = "invalid"
    return found


def _ask_rows(cell: dict[str, Any], allow_p50: float | None) -> list[dict[str, Any]]:
    """Issue 21's ask targets: the daemon's CPU per ask, and (32 clients) p50 against the allow p50."""
    t = report.TARGETS
    d = cell["nexusd"]
    n = cell["clients"]
    found = []
    cpu = d.get("daemon_cpu_us_per_request")
    if cpu is not None:
        found.append(_row(f"daemon CPU per ask (prompt x{n})", cpu, t["ask_cpu_us"], "µs"))
    if n >= 32 and allow_p50:
        found.append(
            _row(
                f"ask p50 / allow p50 (x{n})",
                stats.ratio(d["latency_us"]["p50"], allow_p50),
                t["ask_p50_over_allow"],
                "x",
            )
        )
    for row in found:
        if d["errors"] or d["unexpected"]:
            row["result"] = "invalid"
    return found


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
            memo = cell.get("memo") if key == "nexusd" else None
            hit = memo["hit_rate"] * 100.0 if memo else None
            cpu = s.get("daemon_cpu_us_per_request", s.get("server_cpu_us_per_request"))
            decision = s.get("decision_us_per_call")
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
                    hit,
                    cpu,
                    decision,
                ]
            )
    head = ["scenario", "clients", "target", "n", "p50 µs", "p90 µs", "p99 µs", "max µs", "req/s", "err", "unexp"]
    head += ["p50 x floor", "tput x floor", "memo hit %", "cpu µs/req", "decision µs"]
    m = out["machine"]
    d = out.get("daemon", {})
    load = ", ".join(f"{x:.2f}" for x in m["loadavg"])
    lines = [
        f"machine: {m['nproc']} cpu ({m['cpu']}), Python {m['python']}, load {load}",
        f"daemon: pid {d.get('pid')}, start-to-ready {report.fmt(d.get('start_to_ready_ms'))} ms "
        f"(CPU {report.fmt(d.get('cpu_to_ready_ms'))} ms), "
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
