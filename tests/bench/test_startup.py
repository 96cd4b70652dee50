from __future__ import annotations

from nexusd.bench import startup
from tests.bench.sanity import assert_summary


def test_startup_reports_ready_time_and_rss() -> None:
    out = startup.run(runs=2, settle=0.1)
    assert_summary(out["start_to_ready_ms"], 2)
    assert_summary(out["idle_rss_mb"], 2)
    assert out["start_to_ready_ms"]["median"] > 0
    assert [c["result"] in ("pass", "MISS") for c in out["checks"]] == [True, True]
    assert "start to ready" in startup.render(out)
