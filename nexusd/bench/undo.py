"""Undo's cost: the checkpoint taken before each mutating call, on a repository of many files, and the
storage a run of calls leaves behind.

``python -m nexusd.bench.undo [--files 10000] [--calls 1000] [--changes 3]`` builds a throwaway workspace
of ``--files`` text files (in directories of 100, as a source tree), takes the first checkpoint (cold: every
file hashed), then plays ``--calls`` calls, each editing, creating or deleting ``--changes`` files before
the checkpoint of the next call, through the daemon's own code (``UndoService.checkpoint``, what the worker
thread runs), twice per call on the same tree: a shadow fed by its watcher (as shipped) and one scanning in
full (``watch = false``), whose trees must be equal (``watched_equals_full_scan``). Beside them, in the same
run, the floor: the two git processes a checkpoint starts doing
nothing (``git --version`` twice), and a bare ``lstat`` of every file (what any snapshot must at least do
to see what changed). Prints one JSON object; figures are in docs/PERFORMANCE.md. Not a test: nothing is
timed against a threshold here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from nexusd import protocol as p
from nexusd.undo.service import UndoService
from nexusd.undo.settings import UndoSettings


def _tree(ws: Path, files: int, rng: random.Random) -> None:
    for i in range(files):
        d = ws / f"pkg{i // 100:03d}"
        d.mkdir(exist_ok=True)
        lines = "".join(f"line {j} of file {i}: {rng.random():.12f}\n" for j in range(rng.randint(10, 80)))
        (d / f"mod{i % 100:02d}.py").write_text(lines)


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
    return total


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _ms(xs: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(xs) * 1000, 2),
        "p90_ms": round(_pct(xs, 0.9) * 1000, 2),
        "p99_ms": round(_pct(xs, 0.99) * 1000, 2),
        "max_ms": round(max(xs) * 1000, 2),
    }


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children (git), to the microsecond."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _floor(ws: Path) -> tuple[float, float, float, float]:
    """(wall, CPU) of two git spawns, and (wall, CPU) of an lstat of every file."""
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(2):
        subprocess.run(["git", "--version"], capture_output=True, check=True)
    spawn, spawn_cpu = time.perf_counter() - t0, _cpu() - c0
    c0, t0 = _cpu(), time.perf_counter()
    for root, _dirs, names in os.walk(ws):
        for n in names:
            os.lstat(os.path.join(root, n))
    return spawn, spawn_cpu, time.perf_counter() - t0, _cpu() - c0


def _mutate(ws: Path, files: list[Path], rng: random.Random, changes: int, n: int) -> None:
    """``changes`` edits (60 %), creations (20 %) and deletions (20 %); ``files`` is kept up to date."""
    for k in range(changes):
        r = rng.random()
        if r < 0.6 and files:
            with open(rng.choice(files), "a") as fh:
                fh.write(f"edit {n}.{k}\n")
        elif r < 0.8 or not files:
            d = ws / f"pkg{rng.randrange(100):03d}"
            d.mkdir(exist_ok=True)
            f = d / f"new_{n}_{k}.py"
            f.write_text(f"created by call {n}\n" * rng.randint(1, 40))
            files.append(f)
        else:
            files.pop(rng.randrange(len(files))).unlink()


def run(files: int, calls: int, changes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="nexus-undo-bench-"))
    try:
        ws, state, state_w, config = root / "ws", root / "state", root / "state-watched", root / "config"
        for d in (ws, state, state_w, config):
            d.mkdir()
        _tree(ws, files, rng)
        workspace_bytes = _du(ws)
        # the same workspace, two shadows: one scans in full (watch off), one is fed by its watcher (as shipped)
        svc = UndoService(
            state, config, spawn=lambda *a: None, audit=lambda c, d: None, settings=UndoSettings(watch=False)
        )
        svc_w = UndoService(state_w, config, spawn=lambda *a: None, audit=lambda c, d: None, settings=UndoSettings())
        verdict = p.Verdict(
            "allow", "bench", "rule", requirement="workspace-write", details=p.CallDetails("shell", "Bash")
        )

        cpu: list[float] = []
        cpu_w: list[float] = []

        def checkpoint(service: UndoService, n: int, into: list[float]) -> tuple[float, str]:
            call = p.CallInfo("claude", "bench", "Bash", {"command": f"call {n}"}, str(ws), workspace=str(ws))
            c0, t0 = _cpu(), time.perf_counter()
            entry = service.checkpoint(call, verdict, time.monotonic() + 600)
            took = time.perf_counter() - t0
            into.append(_cpu() - c0)  # of the git processes and of this process: what a loaded machine's wall hides
            if entry.tree is None:
                raise RuntimeError(entry.note)
            return took, entry.tree

        first, _ = checkpoint(svc, 0, cpu)
        first_cpu = cpu[-1]
        first_w, _ = checkpoint(svc_w, 0, cpu_w)
        first_w_cpu = cpu_w[-1]
        shadow, shadow_w = svc.shadow(str(ws)), svc_w.shadow(str(ws))
        shadow.repack()
        baseline = _du(shadow.git_dir)
        second, _ = checkpoint(svc, 1, cpu)  # nothing changed: the index's stat cache answers
        second_w, _ = checkpoint(svc_w, 1, cpu_w)  # nothing changed: the watcher says so
        cpu.clear()
        cpu_w.clear()
        times: list[float] = []
        times_w: list[float] = []
        equal = 0
        full_scans: dict[str, int] = {}
        tracked = sorted(ws.rglob("*.py"))
        spawn_floor: list[float] = []
        walk_floor: list[float] = []
        spawn_cpu: list[float] = []
        walk_cpu: list[float] = []
        for n in range(2, calls + 2):
            _mutate(ws, tracked, rng, changes, n)
            order = [(svc, times, cpu), (svc_w, times_w, cpu_w)]
            trees = {}
            for service, into_t, into_c in order if n % 2 else order[::-1]:  # neither always first after the edit
                took, trees[id(service)] = checkpoint(service, n, into_c)
                into_t.append(took)
            equal += trees[id(svc)] == trees[id(svc_w)]
            if shadow_w.last != "watched":
                why = shadow_w.last.split(" (")[0]
                full_scans[why] = full_scans.get(why, 0) + 1
            if n % 10 == 0:
                s, sc, w, wc = _floor(ws)
                spawn_floor.append(s)
                walk_floor.append(w)
                spawn_cpu.append(sc)
                walk_cpu.append(wc)
        repo = shadow.git_dir
        loose = _du(repo)
        t0 = time.perf_counter()
        shadow.repack()
        repack_s = time.perf_counter() - t0
        packed = _du(repo)
        history = (state / "undo" / "history.jsonl").stat().st_size
        med_spawn, med_walk = statistics.median(spawn_floor), statistics.median(walk_floor)
        med_spawn_cpu, med_walk_cpu = statistics.median(spawn_cpu), statistics.median(walk_cpu)
        watches = shadow_w.watcher.watches if shadow_w.watcher is not None else 0
        svc_w.close()
        return {
            "files": files,
            "calls": calls,
            "changes_per_call": changes,
            "workspace_bytes": workspace_bytes,
            "first_checkpoint_ms": round(first * 1000, 1),
            "first_checkpoint_cpu_ms": round(first_cpu * 1000, 1),
            "first_checkpoint_watched_ms": round(first_w * 1000, 1),
            "first_checkpoint_watched_cpu_ms": round(first_w_cpu * 1000, 1),
            "unchanged_checkpoint_ms": round(second * 1000, 2),
            "unchanged_checkpoint_watched_ms": round(second_w * 1000, 2),
            "checkpoint": _ms(times),
            "checkpoint_cpu": _ms(cpu),
            "checkpoint_watched": _ms(times_w),
            "checkpoint_watched_cpu": _ms(cpu_w),
            "watched_equals_full_scan": f"{equal}/{calls}",
            "watched_full_scans": full_scans,
            "watches": watches,
            "floor_two_git_spawns": _ms(spawn_floor),
            "floor_lstat_every_file": _ms(walk_floor),
            "floor_two_git_spawns_cpu": _ms(spawn_cpu),
            "floor_lstat_every_file_cpu": _ms(walk_cpu),
            "ratio_median_to_floor": round(statistics.median(times) / (med_spawn + med_walk), 2),
            "ratio_median_cpu_to_floor_cpu": round(statistics.median(cpu) / (med_spawn_cpu + med_walk_cpu), 2),
            "ratio_watched_median_to_floor": round(statistics.median(times_w) / (med_spawn + med_walk), 3),
            "ratio_watched_median_cpu_to_floor_cpu": round(
                statistics.median(cpu_w) / (med_spawn_cpu + med_walk_cpu), 3
            ),
            "ratio_watched_median_cpu_to_spawns_cpu": round(statistics.median(cpu_w) / med_spawn_cpu, 2),
            "storage_loose_bytes": loose,
            "storage_packed_bytes": packed,
            "repack_s": round(repack_s, 2),
            "history_bytes": history,
            "storage_after_first_bytes": baseline,
            "per_call_packed_bytes": round((packed - baseline) / calls),
            "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def through_daemon(files: int, calls: int, seed: int) -> dict[str, Any]:
    """What an agent waits for: an allowed Write's round trip through a real daemon on the same tree, with
    undo on and off (``undo.toml``), each call after a one-file edit. The checkpoint's share is the
    difference."""
    from nexusd.bench.procs import start_daemon
    from nexusd.client import Client

    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="nexus-undo-bench-"))
    out: dict[str, Any] = {"files": files, "calls": calls}
    try:
        ws = root / "ws"
        ws.mkdir()
        _tree(ws, files, rng)
        target = ws / "pkg000" / "mod00.py"
        variants = (("undo_on", True, True), ("undo_on_full_scan", True, False), ("undo_off", False, True))
        for label, enabled, watch in (*variants, ("undo_on_again", True, True)):
            config = root / f"config-{label}"
            config.mkdir()
            (config / "undo.toml").write_text(
                f"[undo]\nenabled = {str(enabled).lower()}\nwatch = {str(watch).lower()}\ntimeout = 600\n"
            )
            d = start_daemon(None, extra_env={"NEXUS_CONFIG_DIR": str(config)})
            try:
                info = p.CallInfo(
                    "claude",
                    "bench",
                    "Write",
                    {"file_path": str(target), "content": "x\n"},
                    str(ws),
                    mode="bypassPermissions",
                    workspace=str(ws),
                )
                took: list[float] = []
                with Client(socket_path=str(d.socket), role="agent", name="undo-bench", timeout=600) as c:
                    c.request(info, timeout=900)  # the first checkpoint of the tree (cold) is not counted
                    for n in range(calls):
                        with open(target, "a") as fh:
                            fh.write(f"edit {n}\n")
                        one = msgspec.structs.replace(info, input={"file_path": str(target), "content": f"{n}\n"})
                        t0 = time.perf_counter()
                        decision = c.request(one, timeout=600)  # each call its own input: no runaway limit
                        took.append(time.perf_counter() - t0)
                        if decision.decision != "allow":
                            raise RuntimeError(f"not allowed: {decision.reason}")
                out[label] = _ms(took)
            finally:
                d.cleanup()
        out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=1_000)
    ap.add_argument("--changes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument(
        "--daemon-calls", type=int, default=0, help="Also: N allowed Writes through a real daemon, undo on/off."
    )
    args = ap.parse_args()
    result = run(args.files, args.calls, args.changes, args.seed)
    if args.daemon_calls:
        result["through_daemon"] = through_daemon(args.files, args.daemon_calls, args.seed)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
