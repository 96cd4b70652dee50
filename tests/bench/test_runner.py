"""``run_bench`` end to end: its own temporary daemon beside the echo floor, or a running daemon."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nexusd.bench import procs
from nexusd.bench.runner import memo_off, render, run_bench
from tests.bench.sanity import assert_summary
from tests.conftest import DaemonHandle


def test_baseline_run_reports_both_targets_and_ratios() -> None:
    out = run_bench(scenario_names=("allow", "prompt"), clients=(1, 2), requests=10, warmup=1, baseline=True)
    assert [(c["scenario"], c["clients"]) for c in out["cells"]] == [
        ("allow", 1),
        ("allow", 2),
        ("prompt", 1),
        ("prompt", 2),
    ]
    for cell in out["cells"]:
        for key in ("echo", "nexusd"):
            s = cell[key]
            assert s["requests"] == 10 and s["errors"] == 0
            assert_summary(s["latency_us"], 10)
            assert s["throughput_rps"] > 0
        assert sum(cell["nexusd"]["outcomes"].values()) == 10
        for r in cell["ratio"].values():
            assert r is not None and math.isfinite(r) and r > 0
    d = out["daemon"]
    assert d["pid"] > 0 and d["rss_before_mb"] > 0 and d["rss_after_mb"] > 0 and d["start_to_ready_ms"] > 0
    assert {c["result"] for c in out["checks"]} <= {"pass", "MISS", "invalid"}
    assert any(c["metric"].startswith("round trip p99 (allow x1)") for c in out["checks"])
    text = render(out)
    assert "allow" in text and "prompt" in text and "echo" in text
    json.dumps(out, allow_nan=False)  # strict JSON: no NaN anywhere
    split = procs.cpu_split()
    if split is None:
        assert out["params"]["pinned"] is None
    else:
        assert out["params"]["pinned"] == {"server_cpus": sorted(split[0]), "client_cpus": sorted(split[1])}
        assert os.sched_getaffinity(0) >= split[0] | split[1]  # the harness gave its own CPUs back


def test_pin_moves_every_thread_of_a_process() -> None:
    split = procs.cpu_split()
    if split is None:
        pytest.skip("needs two CPUs")
    with procs.daemon(procs.BENCH_POLICY) as d:  # the audit thread exists once the daemon is ready
        tids = [int(t) for t in os.listdir(f"/proc/{d.pid}/task")]
        assert len(tids) >= 2
        procs.pin(d.pid, split[0])
        assert all(os.sched_getaffinity(t) == split[0] for t in tids)


def test_bench_workspace_is_a_repository(tmp_path) -> None:
    from nexusd.policy.filesystem import RealFileSystem
    from nexusd.policy.gate import workspace_of
    from nexusd.protocol import CallInfo

    ws = procs.make_project(tmp_path / "ws")
    (ws / "src").mkdir()
    call = CallInfo(provider="claude", session="s", tool="Bash", input={"command": "ls"}, cwd=str(ws / "src"))
    assert workspace_of(call, RealFileSystem()) == os.path.realpath(ws)


def test_running_daemon_is_measured_in_place(daemon_factory: Callable[..., DaemonHandle]) -> None:
    d = daemon_factory(policy=procs.BENCH_POLICY)
    out = run_bench(socket=d.socket, scenario_names=("deny",), clients=(2,), requests=8, warmup=0)
    assert out["daemon"]["pid"] == d.proc.pid
    cell = out["cells"][0]
    assert "echo" not in cell and cell["nexusd"]["requests"] == 8


def test_nexusctl_bench_json_and_usage_errors(daemon_factory: Callable[..., DaemonHandle]) -> None:
    d = daemon_factory(policy=procs.BENCH_POLICY)
    cmd = [str(Path(sys.executable).with_name("nexusctl")), "bench", "--socket", str(d.socket)]
    cp = subprocess.run(
        [*cmd, "--clients", "2", "--requests", "6", "--scenario", "deny", "--json"],
        capture_output=True,
        env=d.env,
        timeout=60,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr.decode()
    out = json.loads(cp.stdout)
    assert out["cells"][0]["nexusd"]["requests"] == 6
    bad = subprocess.run([*cmd, "--clients", "0"], capture_output=True, env=d.env, timeout=60, check=False)
    assert bad.returncode == 2 and b"positive" in bad.stderr


def test_a_daemon_argument_it_refuses_is_one_clear_error() -> None:
    nexusctl = str(Path(sys.executable).with_name("nexusctl"))
    cp = subprocess.run(
        [nexusctl, "bench", "--scenario", "allow", "--clients", "1", "--requests", "2", "--daemon-arg=--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cp.returncode == 1 and "No such option '--bogus'" in cp.stderr and "Traceback" not in cp.stderr


def test_agent_cells_report_memo_hits_and_daemon_cpu() -> None:
    on = run_bench(scenario_names=("agent", "allow"), clients=(1,), requests=60, warmup=2)
    agent, allow = on["cells"]
    assert agent["memo"]["lookups"] >= 60 and allow["memo"]["lookups"] >= 60
    # distinct calls miss where a rotation of four commands hits
    assert agent["memo"]["hit_rate"] < allow["memo"]["hit_rate"]
    for cell in on["cells"]:
        assert cell["nexusd"]["daemon_cpu_s"] >= 0 and cell["nexusd"]["daemon_cpu_us_per_request"] is not None
        # the decision's own time, from the daemon's gate counters (the CPU figure counts 10 ms clock
        # ticks: over a cell this short it may be 0, so the two are not compared here)
        assert 0 < cell["nexusd"]["decision_us_per_call"] < 1e6
    assert "memo hit %" in render(on) and "decision µs" in render(on)
    off = run_bench(scenario_names=("agent",), clients=(1,), requests=20, warmup=1, daemon_args=("--decision-memo=0",))
    assert off["cells"][0]["memo"] is None and off["params"]["daemon_args"] == ["--decision-memo=0"]


def test_first_time_rows_and_the_floors_own_cpu() -> None:
    """With the memo off the agent cells carry issue 21's first-time targets (p50 at one client, throughput
    at 32), and every echo row its server's CPU per request: the budget a decision is measured against."""
    out = run_bench(
        scenario_names=("agent",),
        clients=(1, 32),
        requests=64,
        warmup=1,
        baseline=True,
        daemon_args=("--decision-memo=0",),
    )
    metrics = {c["metric"]: c for c in out["checks"]}
    assert set(metrics) == {
        "first-time p50 / echo p50 (agent x1, memo off)",
        "first-time throughput / echo (agent x32, memo off)",
    }
    assert all(c["result"] in ("pass", "MISS") for c in metrics.values())
    for cell in out["cells"]:
        assert cell["echo"]["server_cpu_us_per_request"] is not None and cell["echo"]["server_cpu_us_per_request"] >= 0
    on = run_bench(scenario_names=("agent",), clients=(1,), requests=20, warmup=1, baseline=True)
    assert not [c for c in on["checks"] if c["metric"].startswith("first-time")]  # memo on: not the first-time figure


def test_memo_off_reads_both_option_spellings() -> None:
    assert memo_off(["--decision-memo=0"]) and memo_off(["--x", "--decision-memo", "0"])
    assert not memo_off([]) and not memo_off(["--decision-memo=4096"]) and not memo_off(["--decision-memo"])
    assert not memo_off(["--decision-memo", "10"]) and not memo_off(["0", "--decision-memo"])
