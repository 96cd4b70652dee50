"""Classification of the command corpus: median and p99 per command.

The measuring loop belongs to the classifier's owner (``benchmarks/classify_bench.py``, ``run(commands)
-> dict``); this module loads it and the corpus, and holds the result to issue 8's target.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType
from typing import Any

from nexusd.bench import report, scenarios, stats

BENCH_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "classify_bench.py"  # source tree only


def load_module(path: Path = BENCH_FILE) -> ModuleType:
    if not path.is_file():
        raise FileNotFoundError(f"classifier benchmark not found: {path}")
    spec = importlib.util.spec_from_file_location("nexus_classify_bench", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _find(d: dict[str, Any], *names: str) -> float | None:
    """First numeric value under any of ``names``, searching nested dicts (the owner picks the keys)."""
    for name in names:
        v = d.get(name)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    for v in d.values():
        if isinstance(v, dict):
            found = _find(v, *names)
            if found is not None:
                return found
    return None


def run(corpus: Path | None = None, limit: int | None = None) -> dict[str, Any]:
    commands = scenarios.load_corpus(corpus)
    if limit:
        commands = commands[:limit]
    result = load_module().run(commands)
    # The honest number is a cold classification (parse included, no cache); fall back to whatever the
    # owner's dict holds if its shape changes.
    headline = result.get("results", {}).get("classify_cold", result) if isinstance(result, dict) else {}
    median = _find(headline, "median_us", "p50_us", "median", "p50")
    p99 = _find(headline, "p99_us", "p99")
    out = {
        "benchmark": "classify",
        "machine": report.machine_info(),
        "params": {"commands": len(commands), "corpus": str(corpus or scenarios.DEFAULT_CORPUS)},
        "result": result,
        "median_us": median,
        "p99_us": p99,
        "checks": [
            {
                "metric": "classification median per command",
                "value": median,
                "target": "≤ 50 µs",
                "result": report.check(
                    median if median is not None else math.nan, report.TARGETS["classify_median_us"]
                ),
            }
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    rows = []
    for name, r in (out["result"].get("results") or {}).items():
        if isinstance(r, dict):
            rows.append([name, r.get("median_us"), r.get("p99_us")])
    lines = [
        f"{out['params']['commands']:,} commands; headline (classify_cold): median {report.fmt(out['median_us'])} µs, "
        f"p99 {report.fmt(out['p99_us'])} µs",
        "",
        report.table(["phase", "median µs", "p99 µs"], rows) if rows else "",
        "",
        report.table(
            ["target", "value", "goal", "result"],
            [[c["metric"], c["value"], c["target"], c["result"]] for c in out["checks"]],
        ),
    ]
    return "\n".join(lines)
