"""Shared checks that a benchmark's numbers are sane: never how fast, only that they mean something."""

from __future__ import annotations

import math
from typing import Any


def assert_summary(s: dict[str, Any], count: int | None = None, *, allow_negative: bool = False) -> None:
    """A stats.summarize() result: finite, ordered, and (unless lateness) positive."""
    if count is not None:
        assert s["count"] == count
    assert s["count"] > 0
    keys = ("min", "p50", "p90", "p99", "max")
    for k in (*keys, "mean"):
        assert s[k] is not None and math.isfinite(s[k]), (k, s)
        if not allow_negative:
            assert s[k] > 0, (k, s)
    values = [s[k] for k in keys]
    assert values == sorted(values), s
    assert s["min"] <= s["mean"] <= s["max"]
