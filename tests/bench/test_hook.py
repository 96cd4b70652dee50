from __future__ import annotations

from nexusd.bench import hook
from tests.bench.sanity import assert_summary


def test_hook_process_is_allowed_by_rule_and_timed_beside_the_floor() -> None:
    out = hook.run(runs=2, warmup=0)
    assert out["errors"] == 0, out["samples"]
    assert out["outcomes"] == {"allow": 2}
    assert_summary(out["hook_ms"], 2)
    assert_summary(out["floor_ms"], 2)
    assert out["over_floor_ms"] is not None
    assert "nexus-hook claude" in hook.render(out)
