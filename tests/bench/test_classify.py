from __future__ import annotations

import math

from nexusd.bench import classify


def test_classification_benchmark_reports_median_and_p99() -> None:
    out = classify.run(limit=40)
    assert out["params"]["commands"] == 40
    assert out["median_us"] is not None and math.isfinite(out["median_us"]) and out["median_us"] > 0
    assert out["p99_us"] is not None and out["p99_us"] >= out["median_us"]
    assert out["checks"][0]["result"] in ("pass", "MISS")
