from __future__ import annotations

from nexusd.bench import pending
from tests.bench.sanity import assert_summary


def test_pending_requests_are_all_denied_by_timeout() -> None:
    out = pending.run(total=30, connections=3, timeout=0.6, settle=0.1)
    assert out["pending_seen"] == 30
    assert out["decisions"] == 30 and out["missing"] == 0 and out["errors"] == 0
    assert out["outcomes"] == {"deny/timeout": 30}
    assert_summary(out["late_ms"], 30, allow_negative=True)
    r = out["rss_mb"]
    assert all(r[k] > 0 for k in ("idle", "connected", "all_pending", "peak", "after"))
    assert out["over_idle_mb"] is not None
    assert out["ui_received"].get("prompt", 0) == 30
    assert "denied after deadline" in pending.render(out)
