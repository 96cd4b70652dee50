from __future__ import annotations

from nexusd.bench import hook
from tests.bench.sanity import assert_summary


def test_every_hook_is_allowed_by_rule_and_timed_beside_both_floors() -> None:
    out = hook.run(runs=2, warmup=0)
    assert out["errors"] == 0, out["samples"]
    calls = (*hook.PROVIDERS, "console script", hook.MCP_ROW, hook.ACP_ROW)
    assert out["outcomes"] == {name: {"allow": 2} for name in calls}
    for name in ("python -I -S -c pass", "python -c pass", *calls):
        assert_summary(out["ms"][name], 2)
    assert set(out["over_isolated_floor_ms"]) == {*hook.PROVIDERS, "console script"}
    assert [c["metric"].split()[1] for c in out["checks"]] == [*hook.PROVIDERS, "permission", "permission"]
    text = hook.render(out)
    assert "nexus-hook opencode" in text and "python -I -S -c pass" in text
