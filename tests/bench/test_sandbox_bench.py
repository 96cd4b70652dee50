"""``nexusctl bench --scenario sandbox`` runs the daemon's real wrapped command against bare bubblewrap
(structure only: speed is measured by the benchmark itself, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nexusd.bench import sandbox


def test_sandbox_bench_runs_pairs_of_the_real_wrapper() -> None:
    out = sandbox.run(pairs=2, warmup=0)
    assert out["benchmark"] == "sandbox"
    assert out["wrapped_ms"]["count"] == out["bare_ms"]["count"] == out["overhead_ms"]["count"] == 2
    assert out["wrapped_cpu_ms"]["count"] == 2 and out["checks"][0]["result"] in ("pass", "MISS")
    # the same rounds time the filtered wrapper (a fresh token each), the interpreter floor and a big tree
    for key in ("filtered_overhead_ms", "filtered_decide_ms", "tree_overhead_ms", "tree_walk_ms"):
        assert out[key]["count"] == 2, key
    assert [c["result"] in ("pass", "MISS") for c in out["checks"]] == [True, True, True]
    assert "filtered difference per pair" in sandbox.render(out) and "whole walk" in sandbox.render(out)


def test_wrapped_true_is_the_generated_wrapper_not_an_interpreter() -> None:
    from nexusd.bench import procs

    d = procs.start_daemon(sandbox.SANDBOX_POLICY)
    try:
        text = sandbox.wrapped_true(d)
    finally:
        d.cleanup()
    from nexusd.sandbox.wrapper import wrapper_words

    words = wrapper_words(text)
    assert words is not None and words[3] == "true" and len(words) == 5 and "python" not in text


def test_cli_scenario_sandbox(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "nexusctl"),
            "bench",
            "--scenario",
            "sandbox",
            "--requests",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["params"]["pairs"] == 2
    bad = subprocess.run(
        [str(Path(sys.executable).parent / "nexusctl"), "bench", "--scenario", "sandbox", "--scenario", "allow"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "runs alone" in bad.stderr
