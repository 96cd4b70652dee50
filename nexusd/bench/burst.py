"""A burst of asks: N agents each submit M asks at once, and an automatic UI answers every prompt.

The shape that once wedged the daemon (issue 27): a UI that reads a prompt and writes its answer while
thousands of prompts pour in. The UI here answers each prompt as it reads it and never waits for the ack
before reading on. Reported: how many asks were answered, how many were denied at their deadline, any
missing (a wedge) or wrong (an allow nobody gave), how long the burst took to settle, and the daemon's
memory. A regression shows as a figure: timed-out or missing asks, or memory.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import msgspec

from nexusd import protocol
from nexusd.bench import procs, report, stats
from nexusd.bench.wire import Conn, WireError


async def _ui(conn: Conn, counts: Counter[str], subscribed: asyncio.Event) -> None:
    """Answer allow to every prompt as soon as it is read; count everything else."""
    conn.send(protocol.encode(protocol.Subscribe(ref="s")))
    try:
        while True:
            msg = protocol.decode_server(await conn.recv_line())
            if isinstance(msg, protocol.Prompt):
                counts["prompt"] += 1
                conn.send(protocol.encode(protocol.Answer(id=msg.item.id, decision="allow")))
            elif isinstance(msg, protocol.Snapshot):
                subscribed.set()
            else:
                counts[str(msg.__struct_config__.tag or "?")] += 1
    except (WireError, ConnectionError, OSError):
        return


async def _agent(conn: Conn, agent: int, asks: int, out: Counter[str], cwd: str) -> None:
    call = protocol.CallInfo(
        provider="claude",
        session=f"bench-burst-{agent}",
        tool="Bash",
        input={"command": "git push origin main", "description": "bench"},
        cwd=cwd,
    )
    for k in range(asks):
        conn.send(protocol.encode(protocol.Request(call=call, on_no_ui="deny", ref=f"{agent}.{k}")))
    writing = asyncio.ensure_future(conn.drain())
    finals = 0
    try:
        while finals < asks:
            msg = protocol.decode_server(await conn.recv_line())
            if isinstance(msg, protocol.Pending):
                continue
            finals += 1
            out[f"{msg.decision}/{msg.source}" if isinstance(msg, protocol.Decision) else type(msg).__name__] += 1
    except (WireError, ConnectionError, OSError):
        return
    finally:
        writing.cancel()


async def _measure(sock: Any, pid: int, agents: int, asks: int, timeout: float, cwd: str) -> dict[str, Any]:
    await asyncio.sleep(0.3)
    idle = procs.rss_bytes(pid)
    ui = await Conn.open(sock, role="ui", name="nexus-bench-burst-ui")
    ui_counts: Counter[str] = Counter()
    subscribed = asyncio.Event()
    ui_task = asyncio.ensure_future(_ui(ui, ui_counts, subscribed))
    await asyncio.wait_for(subscribed.wait(), 10)
    conns = [await Conn.open(sock, role="agent", name=f"nexus-bench-burst-{i}") for i in range(agents)]
    outcomes: Counter[str] = Counter()
    t0 = time.monotonic()
    with procs.RssSampler(pid, interval=0.05) as sampler:
        tasks = [asyncio.ensure_future(_agent(c, i, asks, outcomes, cwd)) for i, c in enumerate(conns)]
        # the deadline plus a margin: a wedge shows as missing decisions, never as a hung benchmark
        await asyncio.wait(tasks, timeout=timeout + 60.0)
        settled = time.monotonic() - t0
    for t in tasks:
        t.cancel()
    status: Any = None
    try:
        from nexusd.bench.wire import query

        status = await query(sock, protocol.Status())
    except (WireError, OSError):
        pass
    ui_task.cancel()
    for c in [*conns, ui]:
        await c.close()
    after = procs.rss_bytes(pid)
    total = agents * asks
    decided = sum(outcomes.values())
    answered = outcomes["allow/user"]
    timed_out = outcomes["deny/timeout"]
    return {
        "asks": total,
        "decisions": decided,
        "answered": answered,
        "timed_out": timed_out,
        "missing": total - decided,
        "other": decided - answered - timed_out,
        "outcomes": dict(outcomes),
        "ui_received": dict(ui_counts),
        "settled_s": settled,
        "pending_after": status.pending if isinstance(status, protocol.StatusReply) else None,
        "rss_mb": {
            "idle": report.mb(idle),
            "peak": report.mb(sampler.peak),
            "after": report.mb(after),
        },
        "over_idle_mb": report.mb(sampler.peak - idle) if sampler.peak is not None and idle is not None else None,
    }


def run(
    agents: int = 10,
    asks: int = 500,
    timeout: float = 30.0,
    *,
    daemon_args: tuple[str, ...] | list[str] = (),
    uvloop: bool = False,
) -> dict[str, Any]:
    """Start a daemon (deadline ``timeout`` s) and send ``agents`` × ``asks`` asks at once."""
    procs.raise_nofile(max(4096, agents * 2 + 256))
    args = ["--pending-timeout", str(timeout), *daemon_args]
    with procs.daemon(procs.BENCH_POLICY, args, uvloop=uvloop) as d:
        result = asyncio.run(_measure(d.socket, d.pid, agents, asks, timeout, str(d.root / "workspace")))
    out = {
        "benchmark": "burst",
        "machine": report.machine_info(),
        "params": {"agents": agents, "asks_per_agent": asks, "timeout_s": timeout, "daemon_args": args},
        **result,
    }
    return stats.json_safe(msgspec.to_builtins(out))


def errors(out: dict[str, Any]) -> int:
    """Asks that did not end in a person's answer: a wedge, a lost answer, or anything else."""
    return int(out["missing"]) + int(out["timed_out"]) + int(out["other"])


def render(out: dict[str, Any]) -> str:
    p = out["params"]
    r = out["rss_mb"]
    return "\n".join(
        [
            f"burst: {p['agents']} agents × {p['asks_per_agent']} asks = {out['asks']:,} at once, answered by an "
            f"automatic UI (deadline {p['timeout_s']:g} s)",
            f"answered {out['answered']:,}, timed out {out['timed_out']:,}, missing {out['missing']:,}, "
            f"other {out['other']:,}; settled in {out['settled_s']:.2f} s; pending after: {out['pending_after']}",
            "",
            report.table(
                ["daemon RSS MB", "idle", "peak", "after", "peak over idle"],
                [["", r["idle"], r["peak"], r["after"], out["over_idle_mb"]]],
            ),
        ]
    )
