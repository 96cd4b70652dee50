"""The burst benchmark end to end: its own daemon, agents × asks at once, an automatic UI answering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nexusd.bench import burst


def test_a_small_burst_is_answered_and_reported() -> None:
    out = burst.run(agents=3, asks=40, timeout=20)
    assert out["asks"] == 120 and out["decisions"] == 120
    assert out["answered"] == 120 and out["timed_out"] == 0 and out["missing"] == 0 and out["other"] == 0
    assert out["outcomes"] == {"allow/user": 120}
    assert out["ui_received"]["prompt"] == 120
    assert out["pending_after"] == 0 and burst.errors(out) == 0
    r = out["rss_mb"]
    assert r["idle"] > 0 and r["peak"] >= r["idle"] and r["after"] > 0
    text = burst.render(out)
    assert "answered 120, timed out 0, missing 0" in text
    json.dumps(out, allow_nan=False)


def test_asks_past_the_daemons_limit_show_as_errors() -> None:
    """The figures are counted, not assumed: with room for 4 pending asks, some of 10 are denied at once."""
    out = burst.run(agents=2, asks=5, timeout=20, daemon_args=["--max-pending", "4"])
    assert out["decisions"] == 10 and out["missing"] == 0
    assert out["other"] >= 1 and out["answered"] >= 4 and out["answered"] + out["other"] == 10
    assert out["outcomes"].get("deny/error") == out["other"]
    assert burst.errors(out) == out["other"]


def test_nexusctl_bench_burst_json_and_refuses_a_running_daemon(tmp_path: Path) -> None:
    report = tmp_path / "b.json"
    cmd = [
        sys.executable,
        "-c",
        "from nexusd.cli.ctl import main; main()",
        "bench",
        "--scenario",
        "burst",
        "--clients",
        "2",
        "--asks",
        "10",
        "--out",
        str(report),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "answered 20, timed out 0, missing 0" in r.stdout
    runs = json.loads(report.read_text())["runs"]
    assert runs[0]["answered"] == 20
    r = subprocess.run([*cmd[:-2], "--socket", str(tmp_path / "s.sock")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "own daemon" in r.stderr
