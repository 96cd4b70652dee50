"""The scaling benchmark (``python -m nexusd.bench.scaling``) runs its three kinds of workers on real
decisions and reports every cell, the stage costs and a check per kind (its figures: docs/PERFORMANCE.md)."""

from __future__ import annotations

from typing import Any

from nexusd.bench import scaling


def test_every_kind_of_worker_decides_every_call_and_is_reported() -> None:
    out = scaling.run(calls=240, workers=(1, 2), rounds=1)
    med = out["decisions_per_s"]["median"]
    assert set(med) == {"threads", "processes", "facts in processes"}
    for cells in med.values():
        assert set(cells) == {1, 2} and all(rate > 0 for rate in cells.values())
    assert out["stages"]["facts_us"] > 0 and out["stages"]["ruling_us"] > 0
    assert [c["metric"].split(":")[0] for c in out["checks"]] == ["threads", "processes", "facts in processes"]
    text = scaling.render(out)
    assert "facts in processes" in text and "ruling" in text


def test_facts_from_a_child_rule_as_the_callers_own_would() -> None:
    """What the children send back (workspace, context, classification, pickled) gives the same verdicts
    as facts gathered here: the measured mode decides the real calls, not a cheaper stand-in."""
    import pickle
    import shutil
    import tempfile
    from pathlib import Path

    from nexusd.core.model import Session
    from nexusd.policy import gate

    root = Path(tempfile.mkdtemp(prefix="nxs"))
    try:
        store, stream = scaling._world(root, 120, 1, clients=2)
        for call in stream:
            here = gate.gather(call, store)
            ws, ctx, cls = pickle.loads(pickle.dumps((here.workspace, here.ctx, here.cls), protocol=5))
            there = gate.Facts(call, ws, store.policy_for(ws), ctx=ctx, cls=cls)
            a = gate.rule(here, Session(id="a", provider="claude", agent_mode=call.mode), store)
            b = gate.rule(there, Session(id="a", provider="claude", agent_mode=call.mode), store)
            assert a is not None and b is not None
            va, vb = a.verdict, b.verdict
            assert (va.decision, va.reason) == (vb.decision, vb.reason) if va and vb else va is vb is None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_facts_child_that_dies_fails_the_run_instead_of_hanging(monkeypatch: Any) -> None:
    import shutil
    import tempfile
    from pathlib import Path

    import pytest

    from nexusd.policy import gate

    root = Path(tempfile.mkdtemp(prefix="nxs"))
    try:
        store, stream = scaling._world(root, 40, 1, clients=1)

        def broken(call: Any, store: Any, **kw: Any) -> Any:
            raise OSError("a file system that failed")

        monkeypatch.setattr(gate, "gather", broken)  # (the forked children inherit it)
        with pytest.raises(RuntimeError, match="ended before every call"):
            scaling._facts_processes(store, stream, 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
