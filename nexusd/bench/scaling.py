"""First-time decisions per second against the workers given: threads and processes, in one run.

In process, memo off, over the ``agent`` scenario's distinct calls (the same project, policy and stream
as ``nexusd.bench.gate``). The load generator is kept off the measured path: every call is built and
encoded before the clock starts, each worker gets its own slice and its own session, and the clock runs
from the moment all workers are released (one barrier) until the last one has decided its last call.
Each worker decides through ``Pipeline.ruling_now``: facts and ruling, as the daemon's pool and loop do.

- ``threads``: N threads in this process (what the daemon's pool is). CPython's GIL lets one of them
  run Python at a time, so the classification, which is CPU work, does not spread over cores.
- ``processes``: N forked processes, each with the store already loaded, each deciding whole calls
  (facts *and* ruling). The daemon cannot do this: the ruling reads and changes its state (sessions,
  grants, limits, the memo), which lives on its event loop.
- ``facts in processes``: what a process pool for the facts would be. N forked children compute each
  call's facts (``gate.gather``) and send back the workspace, context and classification, pickled, over
  a pipe; one event loop in this process reads them and rules (``gate.rule``, the policy looked up by
  workspace), keeping three calls in flight per child. On two cores the loop's share (the ruling, the
  decoding, the hand-offs) competes with the children for the same cores.

The stage costs (``facts_us``, ``ruling_us``: one thread, per call) say what bounds the last one.

Usage: ``python -m nexusd.bench.scaling [--calls N] [--workers 1,2] [--rounds R] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import pickle
import shutil
import signal
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from nexusd.bench import agent, procs, report, scenarios

TARGET_SPEEDUP = 1.6


def _world(root: Path, calls: int, seed: int, clients: int) -> tuple[Any, list[Any]]:
    from nexusd.policy.store import PolicyStore

    for d in ("config", "state", "managed", "workspace"):
        (root / d).mkdir(mode=0o700)
    ws = procs.make_project(root / "workspace")
    agent.populate(ws, seed)
    (root / "config" / "policy.toml").write_text(procs.BENCH_POLICY)
    store = PolicyStore(config_dir=root / "config", state_dir=root / "state", managed_dir=root / "managed")
    store.load()
    corpus = scenarios.load_corpus()
    stream = [c for k in range(clients) for c in agent.session_calls(seed, k, calls // clients, str(ws), corpus)]
    return store, stream


def _decide_all(store: Any, calls: list[Any], name: str) -> int:
    from nexusd.core.model import Session
    from nexusd.decision.pipeline import Pipeline

    pipeline = Pipeline(store)
    session = Session(id=name, provider="claude", agent_mode=calls[0].mode if calls else None)
    n = 0
    for call in calls:
        pipeline.ruling_now(call, session)
        n += 1
    return n


def _slices(stream: list[Any], n: int) -> list[list[Any]]:
    return [stream[i::n] for i in range(n)]


def _threads(store: Any, stream: list[Any], n: int) -> float:
    parts = _slices(stream, n)
    barrier = threading.Barrier(n + 1)
    done: list[float] = []

    def work(i: int) -> None:
        barrier.wait()
        _decide_all(store, parts[i], f"t{i}")
        done.append(time.perf_counter())

    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return len(stream) / (max(done) - t0)


def _child(store: Any, part: list[Any], i: int, go: Any, out: Any) -> None:
    go.wait()
    _decide_all(store, part, f"p{i}")
    out.put(time.perf_counter())


def _processes(store: Any, stream: list[Any], n: int) -> float:
    ctx = multiprocessing.get_context("fork")  # the store is already loaded, as a pre-forked pool's would be
    parts = _slices(stream, n)
    go = ctx.Event()
    out = ctx.Queue()
    ps = [ctx.Process(target=_child, args=(store, parts[i], i, go, out)) for i in range(n)]
    for p in ps:
        p.start()
    time.sleep(0.2)  # every child is waiting at the start line
    t0 = time.perf_counter()
    go.set()
    ends = [out.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    return len(stream) / (max(ends) - t0)


def _facts_child(store: Any, calls: list[Any], r: int, w: int) -> None:
    """A forked child: read call indices, answer each with its facts (workspace, context, classification)."""
    from nexusd.policy import gate

    rf = os.fdopen(r, "rb", buffering=0)
    with rf:
        while True:
            head = rf.read(4)
            if len(head) < 4:
                os._exit(0)
            (i,) = struct.unpack("I", head)
            f = gate.gather(calls[i], store)
            out = pickle.dumps((i, f.workspace, f.ctx, f.cls), protocol=5)
            view = memoryview(struct.pack("I", len(out)) + out)
            while view:
                view = view[os.write(w, view) :]


def _facts_processes(store: Any, stream: list[Any], n: int, window: int = 3) -> float:
    from nexusd.core.model import Session
    from nexusd.policy import gate

    kids: list[tuple[int, int, int]] = []  # (pid, request pipe's write end, reply pipe's read end)
    for _ in range(n):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # (the other children's pipe ends it inherits are never used)
            os.close(req_w)
            os.close(rep_r)
            try:
                _facts_child(store, stream, req_r, rep_w)
            finally:
                os._exit(1)
        os.close(req_r)
        os.close(rep_w)
        kids.append((pid, req_w, rep_r))
    session = Session(id="facts-processes", provider="claude", agent_mode=stream[0].mode if stream else None)
    loop = asyncio.new_event_loop()
    done: asyncio.Future[float] = loop.create_future()
    sent, got = 0, 0
    bufs = {rep_r: b"" for _, _, rep_r in kids}

    def died() -> None:  # (its traceback is on stderr): the run fails instead of waiting
        if not done.done():
            done.set_exception(RuntimeError("a facts child ended before every call was decided"))

    def send(req_w: int) -> None:
        nonlocal sent
        if sent < len(stream):
            try:
                os.write(req_w, struct.pack("I", sent))
            except BrokenPipeError:
                died()
                return
            sent += 1

    def readable(req_w: int, rep_r: int) -> None:
        nonlocal got
        chunk = os.read(rep_r, 1 << 16)
        if not chunk:
            loop.remove_reader(rep_r)
            died()
            return
        buf = bufs[rep_r] + chunk
        while len(buf) >= 4:
            (size,) = struct.unpack_from("I", buf)
            if len(buf) < 4 + size:
                break
            i, ws, ctx, cls = pickle.loads(buf[4 : 4 + size])
            buf = buf[4 + size :]
            facts = gate.Facts(stream[i], ws, store.policy_for(ws), ctx=ctx, cls=cls)
            gate.rule(facts, session, store)
            got += 1
            send(req_w)
            if got == len(stream) and not done.done():
                done.set_result(time.perf_counter())
        bufs[rep_r] = buf

    try:
        for _, req_w, rep_r in kids:
            loop.add_reader(rep_r, readable, req_w, rep_r)
        t0 = time.perf_counter()
        for _, req_w, _ in kids:
            for _ in range(window):
                send(req_w)
        t1 = loop.run_until_complete(asyncio.wait_for(done, 600))
    finally:
        loop.close()
        for pid, req_w, rep_r in kids:
            os.close(req_w)
            os.close(rep_r)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return len(stream) / (t1 - t0)


def _stage_costs(store: Any, stream: list[Any]) -> dict[str, float]:
    """µs per call of the facts and of the ruling, one thread (what bounds a pool with the ruling on a loop)."""
    from nexusd.core.model import Session
    from nexusd.policy import gate

    session = Session(id="stages", provider="claude", agent_mode=stream[0].mode if stream else None)
    facts_s = rule_s = 0.0
    for call in stream:
        t0 = time.perf_counter()
        facts = gate.gather(call, store)
        t1 = time.perf_counter()
        gate.rule(facts, session, store)
        facts_s += t1 - t0
        rule_s += time.perf_counter() - t1
    return {"facts_us": facts_s / len(stream) * 1e6, "ruling_us": rule_s / len(stream) * 1e6}


def run(
    calls: int = 2000, workers: tuple[int, ...] = (1, 2), rounds: int = 3, seed: int = agent.DEFAULT_SEED
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="nxs"))
    try:
        store, stream = _world(root, calls, seed, clients=8)
        _decide_all(store, stream, "warm")  # caches warm, as in a daemon that has run a while
        stages = _stage_costs(store, stream)
        rates: dict[str, dict[int, list[float]]] = {"threads": {}, "processes": {}, "facts in processes": {}}
        for _ in range(rounds):  # interleaved, so that load drift hits every cell alike
            for n in workers:
                rates["threads"].setdefault(n, []).append(_threads(store, stream, n))
                rates["processes"].setdefault(n, []).append(_processes(store, stream, n))
                rates["facts in processes"].setdefault(n, []).append(_facts_processes(store, stream, n))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    best = {kind: {n: max(v) for n, v in cells.items()} for kind, cells in rates.items()}
    med = {kind: {n: statistics.median(v) for n, v in cells.items()} for kind, cells in rates.items()}
    lo, hi = min(workers), max(workers)
    checks = []
    for kind in rates:
        speedup = med[kind][hi] / med[kind][lo]
        checks.append(
            {
                "metric": f"{kind}: decisions/s with {hi} workers over {lo} (medians)",
                "value": speedup,
                "target": f"≥ {TARGET_SPEEDUP:g}x",
                "result": report.check(speedup, TARGET_SPEEDUP, at_least=True),
            }
        )
    return {
        "benchmark": "scaling",
        "machine": report.machine_info(),
        "params": {"calls": len(stream), "workers": list(workers), "rounds": rounds, "cpus": os.cpu_count()},
        "decisions_per_s": {"median": med, "best": best, "rounds": rates},
        "stages": stages,
        "checks": checks,
    }


def render(out: dict[str, Any]) -> str:
    med = out["decisions_per_s"]["median"]
    rows = [[kind, n, rate] for kind, cells in med.items() for n, rate in sorted(cells.items())]
    lines = [
        f"first-time decisions/s, in process, memo off, {out['params']['calls']} agent calls, "
        f"{out['params']['rounds']} rounds (median)",
        report.table(["workers are", "workers", "decisions/s"], rows),
    ]
    st = out["stages"]
    lines.append(f"one thread, per call: facts {st['facts_us']:.0f} µs, ruling {st['ruling_us']:.0f} µs")
    lines += [f"{c['metric']}: {report.fmt(c['value'], 2)}, target {c['target']}: {c['result']}" for c in out["checks"]]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = run(a.calls, tuple(int(x) for x in a.workers.split(",")), a.rounds)
    report.emit(result, render(result), as_json=a.json, path=None)
