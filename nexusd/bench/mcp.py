"""``nexus-mcp``: time from process start until ``tools/list`` is answered, as Claude Code sees it.

Like Claude, the benchmark writes ``initialize`` the moment the process is spawned (the pipe buffers it),
then ``notifications/initialized`` and ``tools/list`` once initialize is answered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from nexusd.bench import procs, report, stats

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "nexus-bench", "version": "0"},
    },
}


def mcp_command() -> list[str]:
    exe = Path(sys.executable).with_name("nexus-mcp")
    found = str(exe) if exe.exists() else shutil.which("nexus-mcp")
    if not found:
        raise FileNotFoundError("nexus-mcp is not installed (pip install -e .)")
    return [found]


def _send(pipe: IO[bytes], obj: dict[str, Any]) -> None:
    pipe.write(json.dumps(obj).encode() + b"\n")
    pipe.flush()


def _await_id(pipe: IO[bytes], want: int) -> dict[str, Any]:
    while True:
        line = pipe.readline()
        if not line:
            raise RuntimeError("nexus-mcp closed stdout")
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # MCP stdio servers must not print non-JSON, but a bench is not the place to judge
        if isinstance(msg, dict) and msg.get("id") == want:
            return msg


def once(cmd: list[str], env: dict[str, str], timeout: float = 20.0) -> tuple[float, float, list[str]]:
    """(ms to initialize answered, ms to tools/list answered, tool names) for one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        _send(proc.stdin, INIT)
        init = _await_id(proc.stdout, 1)
        t_init = time.perf_counter()
        if "result" not in init:
            raise RuntimeError(f"initialize failed: {init}")
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        listed = _await_id(proc.stdout, 2)
        t_list = time.perf_counter()
        tools = [t.get("name", "") for t in listed.get("result", {}).get("tools", [])]
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return (t_init - t0) * 1000.0, (t_list - t0) * 1000.0, tools


def run(runs: int = 15, warmup: int = 2) -> dict[str, Any]:
    cmd = mcp_command()
    init_ms: list[float] = []
    list_ms: list[float] = []
    tools: list[str] = []
    with procs.daemon(procs.BENCH_POLICY) as d:
        for i in range(warmup + runs):
            a, b, tools = once(cmd, d.env)
            if i >= warmup:
                init_ms.append(a)
                list_ms.append(b)
    med = stats.median(list_ms)
    out = {
        "benchmark": "mcp_ready",
        "machine": report.machine_info(),
        "params": {"runs": runs, "warmup": warmup, "command": cmd},
        "initialize_ms": stats.summarize(init_ms) | {"median": stats.median(init_ms)},
        "tools_list_ms": stats.summarize(list_ms) | {"median": med},
        "tools": tools,
        "checks": [
            {
                "metric": "nexus-mcp start to tools/list, median",
                "value": med,
                "target": "≤ 300 ms",
                "result": report.check(med, report.TARGETS["mcp_ready_ms"]),
            },
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    a, b = out["initialize_ms"], out["tools_list_ms"]
    rows = [
        ["initialize answered", a["count"], a["median"], a["p90"], a["max"]],
        ["tools/list answered", b["count"], b["median"], b["p90"], b["max"]],
    ]
    lines = [report.table(["from process start to", "runs", "median ms", "p90 ms", "max ms"], rows)]
    lines.append(f"\ntools: {', '.join(out['tools']) or '-'}\n")
    lines.append(
        report.table(
            ["target", "value", "goal", "result"],
            [[c["metric"], c["value"], c["target"], c["result"]] for c in out["checks"]],
        )
    )
    return "\n".join(lines)


def permission_rounds(env: dict[str, str], n: int, timeout: float = 120.0) -> tuple[list[float], list[str]]:
    """``n`` ``permission_prompt`` calls through one running ``nexus-mcp``, as Claude's ``-p`` run makes them:
    the ms of each round trip and each answer's ``behavior``. No process starts per call, so this is the
    per-call cost of the MCP route."""
    proc = subprocess.Popen(
        mcp_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    ms: list[float] = []
    behaviors: list[str] = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        _send(proc.stdin, INIT)
        _await_id(proc.stdout, 1)
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(n):
            args = {"tool_name": "Bash", "input": {"command": "echo hello"}, "tool_use_id": f"toolu_{i}"}
            call = {"name": "permission_prompt", "arguments": args}
            t0 = time.perf_counter()
            _send(proc.stdin, {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": call})
            reply = _await_id(proc.stdout, 10 + i)
            ms.append((time.perf_counter() - t0) * 1000.0)
            try:
                behaviors.append(json.loads(reply["result"]["content"][0]["text"])["behavior"])
            except (KeyError, IndexError, TypeError, ValueError):
                behaviors.append(f"unreadable: {str(reply)[:120]}")
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return ms, behaviors
