"""The load generator: N concurrent agent connections, each sending one request and awaiting its decision.

A round trip is timed from just before the request line is written to the moment the final line (the
Decision, after any Pending) has been read; encoding happens before the clock starts. All clients connect
and warm up first, then start together, so throughput covers only the steady phase.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nexusd import protocol
from nexusd.bench import stats
from nexusd.bench.scenarios import Expect
from nexusd.bench.wire import Conn, WireError, decode


@dataclass
class LoadResult:
    target: str  # "nexusd" or "echo"
    scenario: str
    clients: int
    latencies_ns: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: int = 0  # connection lost, protocol error, undecodable reply
    unexpected: int = 0  # a decision other than the scenario expects
    outcomes: Counter[str] = field(default_factory=Counter)  # "decision/source" -> count
    samples: list[str] = field(default_factory=list)  # first few unexpected or error details
    ui_answers: int = 0

    @property
    def completed(self) -> int:
        return len(self.latencies_ns)

    def summary(self) -> dict[str, Any]:
        lat = stats.summarize([ns / 1000.0 for ns in self.latencies_ns])
        return {
            "target": self.target,
            "scenario": self.scenario,
            "clients": self.clients,
            "requests": self.completed,
            "errors": self.errors,
            "unexpected": self.unexpected,
            "elapsed_s": self.elapsed_s,
            "throughput_rps": (self.completed / self.elapsed_s) if self.elapsed_s > 0 else float("nan"),
            "latency_us": lat,
            "outcomes": dict(self.outcomes),
            "ui_answers": self.ui_answers,
            "samples": self.samples,
        }


class _Gate:
    """Start line: every client connects and warms up, then all go at once."""

    def __init__(self, parties: int) -> None:
        self.waiting = parties
        self.event = asyncio.Event()

    async def arrive(self) -> None:
        self.waiting -= 1
        if self.waiting <= 0:
            self.event.set()
        await self.event.wait()


async def _round_trip(conn: Conn, line: bytes, echo: bool) -> tuple[int, bytes]:
    t0 = time.perf_counter_ns()
    conn.send(line)
    while True:
        raw = await conn.recv_line()
        t1 = time.perf_counter_ns()
        if echo or not raw.startswith(b'{"type":"pending"'):
            return t1 - t0, raw


def _check(result: LoadResult, raw: bytes, expect: Expect) -> None:
    msg = decode(raw)
    if isinstance(msg, protocol.Decision):
        result.outcomes[f"{msg.decision}/{msg.source}"] += 1
        if expect is not None and (msg.decision, msg.source) != expect:
            result.unexpected += 1
            if len(result.samples) < 5:
                result.samples.append(
                    f"expected {expect[0]}/{expect[1]}, got {msg.decision}/{msg.source}: {msg.reason}"
                )
        return
    if isinstance(msg, protocol.Pending):
        return
    result.errors += 1
    if len(result.samples) < 5:
        result.samples.append(f"unexpected reply: {raw[:200]!r}")


BENCH_SESSION_PREFIX = "bench-"


async def auto_ui(path: Path, stop: asyncio.Event, counter: list[int], name: str = "nexus-bench-ui") -> None:
    """A UI client that allows, once, every prompt of the benchmark's own sessions as soon as it sees it.

    Prompts of any other session are left alone: against a running daemon, a real agent's request must
    never be answered by a benchmark.
    """
    conn = await Conn.open(path, role="ui", name=name)
    conn.send(protocol.encode(protocol.Subscribe()))
    try:
        while not stop.is_set():
            recv = asyncio.ensure_future(conn.recv_line())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({recv, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if recv not in done:
                recv.cancel()
                return
            stopper.cancel()
            msg = decode(recv.result())
            items: list[protocol.PendingItem] = []
            if isinstance(msg, protocol.Prompt):
                items = [msg.item]
            elif isinstance(msg, protocol.Snapshot):
                items = list(msg.items)
            for item in items:
                if not item.call.session.startswith(BENCH_SESSION_PREFIX):
                    continue
                conn.send(protocol.encode(protocol.Answer(id=item.id, decision="allow", scope="once")))
                counter[0] += 1
    except (WireError, ConnectionError, OSError):
        return
    finally:
        await conn.close()


async def run_load(
    path: Path,
    scenario: str,
    per_client: list[list[tuple[bytes, Expect]]],
    *,
    requests: int | None = 1000,
    duration: float | None = None,
    warmup: int = 20,
    echo: bool = False,
    with_ui: bool = False,
) -> LoadResult:
    """Run ``len(per_client)`` clients; ``requests`` in total (split evenly) or for ``duration`` seconds."""
    clients = len(per_client)
    result = LoadResult("echo" if echo else "nexusd", scenario, clients)
    gate = _Gate(clients)
    stop_ui = asyncio.Event()
    ui_count = [0]
    ui_task = None
    if with_ui and not echo:
        ui_task = asyncio.ensure_future(auto_ui(path, stop_ui, ui_count))
        await asyncio.sleep(0.05)  # let it subscribe before the first request asks for a person
    quota = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)] if requests else []
    starts: list[float] = []
    ends: list[float] = []

    async def worker(idx: int) -> None:
        lines = per_client[idx]
        n = len(lines)
        try:
            conn = await Conn.open(path, role="agent", name=f"nexus-bench-{idx}", echo=echo)
        except (WireError, OSError) as exc:
            result.errors += 1
            result.samples.append(f"connect: {exc}")
            await gate.arrive()
            return
        try:
            for i in range(warmup):
                await _round_trip(conn, lines[i % n][0], echo)
            await gate.arrive()
            if not starts:
                starts.append(time.perf_counter())
            i = 0
            end = (time.perf_counter() + duration) if duration else None
            limit = quota[idx] if quota else None
            while (limit is None or i < limit) and (end is None or time.perf_counter() < end):
                line, expect = lines[(warmup + i) % n]  # a stream of distinct calls goes on past the warm-up
                i += 1
                dt, raw = await _round_trip(conn, line, echo)
                result.latencies_ns.append(dt)
                if not echo:
                    _check(result, raw, expect)
        except (WireError, ConnectionError, OSError) as exc:
            result.errors += 1
            if len(result.samples) < 5:
                result.samples.append(f"client {idx}: {exc}")
            if gate.waiting > 0:
                await gate.arrive()
        finally:
            ends.append(time.perf_counter())
            await conn.close()

    await asyncio.gather(*(worker(i) for i in range(clients)))
    result.elapsed_s = (max(ends) - starts[0]) if starts and ends else 0.0
    if ui_task is not None:
        stop_ui.set()
        await ui_task
    result.ui_answers = ui_count[0]
    return result
