"""Classifier speed over a corpus of realistic shell commands: median and p99 µs per command.

Three columns: ``parse`` (tree-sitter + tree walk, parse cache cleared first: every command cold),
``classify_cold`` (the whole ``classify`` of a Bash call, parse cache cleared, in-memory file system
so disk speed does not blur the picture) and ``classify_warm`` (the same again with the parse cache
filled, as the daemon sees repeated commands). ``real_fs`` repeats the cold run on the real file
system of a temporary workspace.

    python benchmarks/classify_bench.py [--json] [--corpus FILE] [--repeat N]

``run(commands)`` is what the bench helper calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexusd.core.classify import bash, classify
from nexusd.core.model import Context
from nexusd.policy.filesystem import RealFileSystem
from nexusd.protocol import CallInfo

CORPUS = Path(__file__).resolve().parents[1] / "nexusd" / "bench" / "corpus" / "commands.txt"
WS = "/bench/ws"


class MemoryFileSystem:
    """A workspace with a few directories and files, and no symlinks."""

    def __init__(self) -> None:
        self.dirs = {"/", "/bench", WS, f"{WS}/src", f"{WS}/tests", f"{WS}/.git", "/root", "/tmp", "/etc"}
        self.files = {f"{WS}/README.md": b"# readme\n", f"{WS}/.git/config": b"[core]\n\tbare = false\n"}

    def realpath(self, path: str) -> str:
        return os.path.normpath(path)

    def lexists(self, path: str) -> bool:
        return path in self.dirs or path in self.files

    def is_symlink(self, path: str) -> bool:
        return False

    def size(self, path: str) -> int | None:
        data = self.files.get(path)
        return None if data is None else len(data)

    def head(self, path: str, n: int) -> bytes | None:
        data = self.files.get(path)
        return None if data is None else data[:n]


def load(path: Path = CORPUS) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def _stats(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return {"median_us": statistics.median(samples), "p99_us": p99, "max_us": samples[-1], "n": len(samples)}


def _time_each(fn, items: list) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    clock = time.perf_counter_ns
    for item in items:
        t0 = clock()
        fn(item)
        out.append((clock() - t0) / 1000.0)
    return out


def run(commands: list[str], repeat: int = 3) -> dict:  # type: ignore[type-arg]
    """Median and p99 µs per command for parse and classify (cold and warm). Best of ``repeat`` runs."""
    mem = MemoryFileSystem()
    ctx = Context(cwd=WS, workspace_roots=(WS,), home="/root")
    calls = [CallInfo(provider="claude", session="bench", tool="Bash", input={"command": c}, cwd=WS) for c in commands]
    results: dict[str, dict[str, float]] = {}

    def best(name: str, fn, items: list, clear: bool) -> None:  # type: ignore[no-untyped-def]
        runs = []
        for _ in range(repeat):
            if clear:
                bash.parse.cache_clear()
            runs.append(_stats(_time_each(fn, items)))
        results[name] = min(runs, key=lambda r: r["median_us"])

    best("parse", bash.parse, commands, clear=True)
    best("classify_cold", lambda c: classify(c, ctx, mem), calls, clear=True)
    best("classify_warm", lambda c: classify(c, ctx, mem), calls, clear=False)
    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.realpath(tmp)
        for d in ("src", "tests", ".git"):
            os.makedirs(os.path.join(ws, d))
        Path(ws, ".git", "config").write_text("[core]\n\tbare = false\n")
        rctx = Context(cwd=ws, workspace_roots=(ws,), home=os.path.expanduser("~"))
        rcalls = [CallInfo(provider="claude", session="b", tool="Bash", input={"command": c}, cwd=ws) for c in commands]
        real = RealFileSystem()
        best("classify_cold_real_fs", lambda c: classify(c, rctx, real), rcalls, clear=True)
    return {"commands": len(commands), "results": results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    report = run(load(args.corpus), repeat=args.repeat)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['commands']} commands")
    print(f"{'measure':<24}{'median µs':>12}{'p99 µs':>12}{'max µs':>12}")
    for name, r in report["results"].items():
        print(f"{name:<24}{r['median_us']:>12.1f}{r['p99_us']:>12.1f}{r['max_us']:>12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
