"""The echo floor, real process over a real socket."""

from __future__ import annotations

import asyncio
import socket

import pytest

from nexusd.bench import procs, scenarios
from nexusd.bench.load import run_load
from tests.bench.sanity import assert_summary


@pytest.fixture(scope="module")
def echo() -> procs.Spawned:
    e = procs.start_echo()
    yield e
    e.cleanup()


def test_echo_answers_each_line_and_reports_bad_json(echo: procs.Spawned) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(echo.socket))
        s.sendall(b'{"a": [1, 2]}\nnot json\n')
        buf = b""
        while buf.count(b"\n") < 2:
            buf += s.recv(4096)
    first, second = buf.splitlines()
    assert first == b'{"a":[1,2]}'
    assert b"bad_json" in second
    assert oct(echo.socket.stat().st_mode & 0o777) == "0o600"


def test_load_against_echo_counts_add_up(echo: procs.Spawned) -> None:
    cycle = scenarios.calls("allow", "/tmp")
    per_client = [scenarios.encode_for_client(cycle, c) for c in range(3)]
    res = asyncio.run(run_load(echo.socket, "allow", per_client, requests=31, warmup=2, echo=True))
    s = res.summary()
    assert s["requests"] == 31 and s["errors"] == 0
    assert_summary(s["latency_us"], 31)
    assert s["throughput_rps"] > 0 and s["elapsed_s"] > 0


def test_duration_mode_runs_until_time_is_up(echo: procs.Spawned) -> None:
    cycle = scenarios.calls("deny", "/tmp")
    per_client = [scenarios.encode_for_client(cycle, c) for c in range(2)]
    res = asyncio.run(run_load(echo.socket, "deny", per_client, requests=None, duration=0.2, warmup=0, echo=True))
    assert res.completed > 0 and res.errors == 0
    assert res.elapsed_s >= 0.2
