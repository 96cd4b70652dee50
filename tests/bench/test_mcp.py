from __future__ import annotations

from nexusd.bench import mcp
from tests.bench.sanity import assert_summary


def test_mcp_ready_lists_the_permission_tool() -> None:
    out = mcp.run(runs=1, warmup=0)
    assert "permission_prompt" in out["tools"]
    assert_summary(out["initialize_ms"], 1)
    assert_summary(out["tools_list_ms"], 1)
    assert out["tools_list_ms"]["p50"] >= out["initialize_ms"]["p50"]
