"""Latency summaries in microseconds: the numbers every benchmark reports."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already-sorted values (q in 0..100); NaN when empty."""
    if not sorted_values:
        return math.nan
    if q <= 0:
        return float(sorted_values[0])
    rank = math.ceil(q / 100.0 * len(sorted_values))
    return float(sorted_values[min(len(sorted_values), max(1, rank)) - 1])


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """count, min, p50, p90, p99, max, mean of ``values`` (same unit in, same unit out)."""
    s = sorted(values)
    n = len(s)
    return {
        "count": n,
        "min": float(s[0]) if n else math.nan,
        "p50": percentile(s, 50),
        "p90": percentile(s, 90),
        "p99": percentile(s, 99),
        "max": float(s[-1]) if n else math.nan,
        "mean": (math.fsum(s) / n) if n else math.nan,
    }


def median(values: Sequence[float]) -> float:
    """The true median (mean of the two middle values for even counts)."""
    s = sorted(values)
    n = len(s)
    if not n:
        return math.nan
    mid = n // 2
    return float(s[mid]) if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def ratio(value: float, floor: float) -> float:
    """value / floor, NaN when the floor is unusable (zero, NaN)."""
    if not floor or math.isnan(floor) or math.isnan(value):
        return math.nan
    return value / floor


def finite_or_none(value: float) -> float | None:
    """JSON has no NaN: report missing numbers as null."""
    return None if value is None or math.isnan(value) or math.isinf(value) else value


def json_safe(obj: Any) -> Any:
    """Replace NaN/inf anywhere in nested dicts/lists with None."""
    if isinstance(obj, float):
        return finite_or_none(obj)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj
