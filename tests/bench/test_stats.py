from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from nexusd.bench import stats


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert stats.percentile(values, 50) == 50
    assert stats.percentile(values, 99) == 99
    assert stats.percentile(values, 100) == 100
    assert stats.percentile(values, 0) == 1
    assert math.isnan(stats.percentile([], 50))


def test_median_even_and_odd() -> None:
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    assert math.isnan(stats.median([]))


def test_ratio_and_json_safe() -> None:
    assert stats.ratio(3.0, 2.0) == 1.5
    assert math.isnan(stats.ratio(1.0, 0.0))
    assert stats.json_safe({"a": [math.nan, 1.0, {"b": math.inf}]}) == {"a": [None, 1.0, {"b": None}]}


@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=300))
def test_summary_is_ordered(values: list[float]) -> None:
    s = stats.summarize(values)
    assert s["count"] == len(values)
    assert s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"]
    assert s["min"] <= s["mean"] * (1 + 1e-12) and s["mean"] <= s["max"] * (1 + 1e-12)
