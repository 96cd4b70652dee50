"""10,000 requests pending at once: memory over idle, and how late after its deadline each is denied.

A UI client is subscribed (and drains every prompt without answering), so each request waits for a
person until its deadline. Requests are multiplexed over ``connections`` agent connections by ``ref``
(the protocol allows many requests per connection). Lateness is measured by the client: the time a
Decision line was read minus the deadline its Pending announced, both on the same clock; lines are only
timestamped while they arrive and decoded afterwards, to keep the client's own delay out of the numbers.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec

from nexusd import protocol
from nexusd.bench import procs, report, stats
from nexusd.bench.wire import Conn, WireError, decode


async def _drain(conn: Conn, counter: Counter[str], stop: asyncio.Event) -> None:
    """Read and count everything a UI gets; never answer."""
    try:
        while not stop.is_set():
            line = await conn.recv_line()
            counter[line[9:20].split(b'"', 1)[0].decode(errors="replace")] += 1
    except (WireError, ConnectionError, OSError):
        return


async def _reader(conn: Conn, expected: int, arrivals: list[tuple[float, bytes]]) -> None:
    """Timestamp every line until ``expected`` decisions (or errors) arrived."""
    finals = 0
    try:
        while finals < expected:
            line = await conn.recv_line()
            arrivals.append((time.time(), line))
            if not line.startswith(b'{"type":"pending"'):
                finals += 1
    except (WireError, ConnectionError, OSError):
        return


async def _measure(
    sock: Any, pid: int, total: int, connections: int, timeout: float, settle: float, cwd: str
) -> dict[str, Any]:
    await asyncio.sleep(settle)
    idle = procs.rss_bytes(pid)
    ui = await Conn.open(sock, role="ui", name="nexus-bench-ui")
    ui.send(protocol.encode(protocol.Subscribe()))
    ui_counts: Counter[str] = Counter()
    stop = asyncio.Event()
    drain = asyncio.ensure_future(_drain(ui, ui_counts, stop))
    conns = [await Conn.open(sock, role="agent", name=f"nexus-bench-{i}") for i in range(connections)]
    await asyncio.sleep(settle)
    connected = procs.rss_bytes(pid)
    per = [total // connections + (1 if i < total % connections else 0) for i in range(connections)]
    arrivals: list[list[tuple[float, bytes]]] = [[] for _ in conns]
    readers = [
        asyncio.ensure_future(_reader(c, n, arrivals[i])) for i, (c, n) in enumerate(zip(conns, per, strict=True))
    ]
    call = protocol.CallInfo(
        provider="claude",
        session="bench-pending",
        tool="Bash",
        input={"command": "git push origin main", "description": "bench"},
        cwd=cwd,  # the benchmark's own workspace: a plan of a busy /tmp would measure the host
    )
    t_submit = time.time()
    with procs.RssSampler(pid, interval=0.05) as sampler:
        for i, (c, n) in enumerate(zip(conns, per, strict=True)):
            c_call = msgspec.structs.replace(call, session=f"bench-{i}")
            for k in range(n):
                c.send(protocol.encode(protocol.Request(call=c_call, on_no_ui="deny", ref=f"{i}.{k}")))
            await c.drain()
        t_submitted = time.time()
        # Wait until every request is pending (or already decided), then until every decision arrived.
        limit = time.monotonic() + timeout + 120.0
        while time.monotonic() < limit:
            pendings = sum(1 for a in arrivals for _, ln in a if ln.startswith(b'{"type":"pending"'))
            if pendings >= total or all(r.done() for r in readers):
                break
            await asyncio.sleep(0.05)
        t_all_pending = time.time()
        peak_pending_rss = procs.rss_bytes(pid)
        status = None
        try:
            st = await _status(sock)
            status = st.pending if isinstance(st, protocol.StatusReply) else None
        except (WireError, OSError):
            status = None
        remaining = max(0.0, limit - time.monotonic())
        await asyncio.wait(readers, timeout=remaining)
    for r in readers:
        r.cancel()
    stop.set()
    drain.cancel()
    for c in [*conns, ui]:
        await c.close()
    after = procs.rss_bytes(pid)
    return _analyse(
        total,
        arrivals,
        idle,
        connected,
        peak_pending_rss,
        sampler.peak,
        after,
        status,
        ui_counts,
        t_submitted - t_submit,
        t_all_pending - t_submit,
    )


async def _status(sock: Any) -> protocol.ServerMessage:
    conn = await Conn.open(sock, role="admin", name="nexus-bench")
    try:
        conn.send(protocol.encode(protocol.Status()))
        while True:
            msg = decode(await conn.recv_line())
            if isinstance(msg, protocol.StatusReply | protocol.Error):
                return msg
    finally:
        await conn.close()


def _analyse(
    total: int,
    arrivals: list[list[tuple[float, bytes]]],
    idle: int | None,
    connected: int | None,
    pending_rss: int | None,
    peak: int | None,
    after: int | None,
    status_pending: int | None,
    ui_counts: Counter[str],
    submit_s: float,
    all_pending_s: float,
) -> dict[str, Any]:
    by_ref: dict[str, float] = {}
    by_id: dict[str, float] = {}
    pendings = 0
    finals: list[tuple[float, protocol.ServerMessage | None]] = []
    for conn_arrivals in arrivals:
        for t, line in conn_arrivals:
            msg = decode(line)
            if isinstance(msg, protocol.Pending):
                pendings += 1
                by_id[msg.id] = msg.deadline
                if msg.ref:
                    by_ref[msg.ref] = msg.deadline
            else:
                finals.append((t, msg))
    late_ms: list[float] = []
    outcomes: Counter[str] = Counter()
    errors = 0
    not_timeout = 0
    for t, msg in finals:
        if not isinstance(msg, protocol.Decision):
            errors += 1
            outcomes[type(msg).__name__ if msg else "undecodable"] += 1
            continue
        outcomes[f"{msg.decision}/{msg.source}"] += 1
        if msg.decision == "allow":
            errors += 1  # nobody answered: an allow would be a fail-open bug
        if msg.source != "timeout":
            not_timeout += 1
        deadline = by_ref.get(msg.ref or "") or by_id.get(msg.id or "")
        if deadline is not None:
            late_ms.append((t - deadline) * 1000.0)
    missing = total - len(finals)
    lat = stats.summarize(late_ms)
    over = report.mb(peak - idle) if (peak is not None and idle is not None) else None
    targets = report.TARGETS
    return {
        "requests": total,
        "pending_seen": pendings,
        "status_pending_at_peak": status_pending,
        "decisions": len(finals),
        "missing": missing,
        "errors": errors,
        "not_by_timeout": not_timeout,
        "outcomes": dict(outcomes),
        "ui_received": dict(ui_counts),
        "submit_s": submit_s,
        "all_pending_after_s": all_pending_s,
        "rss_mb": {
            "idle": report.mb(idle),
            "connected": report.mb(connected),
            "all_pending": report.mb(pending_rss),
            "peak": report.mb(peak),
            "after": report.mb(after),
        },
        "over_idle_mb": over,
        "late_ms": lat,
        "checks": [
            {
                "metric": f"{total:,} pending on {len(arrivals):,} connections: peak RSS over idle",
                "value": over,
                "target": "≤ 50 MB",
                "result": report.check(over, targets["pending_over_idle_mb"]),
            },
            {
                "metric": f"denied after deadline, max lateness ({len(arrivals):,} connections)",
                "value": lat["max"],
                "target": "≤ 250 ms",
                "result": report.check(lat["max"], targets["pending_late_ms"]) if not missing else "MISS",
            },
        ],
    }


def run(
    total: int = 10_000,
    connections: int = 100,
    timeout: float = 20.0,
    *,
    daemon_args: Sequence[str] = (),
    settle: float = 0.5,
    uvloop: bool = False,
) -> dict[str, Any]:
    """Start a daemon with a ``timeout`` s deadline and hold ``total`` requests pending at once."""
    procs.raise_nofile(max(4096, connections * 2 + 256))
    args = ["--pending-timeout", str(timeout), *daemon_args]
    with procs.daemon(procs.BENCH_POLICY, args, uvloop=uvloop) as d:
        result = asyncio.run(_measure(d.socket, d.pid, total, connections, timeout, settle, str(d.root / "workspace")))
    out = {
        "benchmark": "pending",
        "machine": report.machine_info(),
        "params": {"total": total, "connections": connections, "timeout_s": timeout, "daemon_args": args},
        **result,
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    r = out["rss_mb"]
    lat = out["late_ms"]
    p = out["params"]
    lines = [
        f"{out['requests']:,} requests over {p['connections']} connections, deadline {p['timeout_s']:g} s; "
        f"submitted in {out['submit_s']:.2f} s, all pending after {out['all_pending_after_s']:.2f} s "
        f"(daemon status: {out['status_pending_at_peak']} pending)",
        f"decisions {out['decisions']:,}, missing {out['missing']}, errors {out['errors']}, "
        f"not by timeout {out['not_by_timeout']}; outcomes {out['outcomes']}",
        "",
        report.table(
            ["RSS MB", "idle", "connected", "all pending", "peak", "after", "peak over idle"],
            [["", r["idle"], r["connected"], r["all_pending"], r["peak"], r["after"], out["over_idle_mb"]]],
        ),
        "",
        report.table(
            ["denied after deadline (ms)", "n", "min", "p50", "p90", "p99", "max"],
            [["", lat["count"], lat["min"], lat["p50"], lat["p90"], lat["p99"], lat["max"]]],
        ),
        "",
        report.table(
            ["target", "value", "goal", "result"],
            [[c["metric"], c["value"], c["target"], c["result"]] for c in out["checks"]],
        ),
    ]
    return "\n".join(lines)
