"""Machine facts, the targets of issues 8 and 21, and the readable table every benchmark prints."""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

# Issue 8's targets as tightened by issue 21, as plain numbers the checks below compare with.
TARGETS = {
    "rt_p50_ratio": 1.5,  # decision round trip p50 / echo p50, rule-decided shell command, 1 client
    "rt_p99_us": 1000.0,  # decision round trip p99, rule-decided
    "throughput_ratio": 0.60,  # nexusd / echo throughput with 32 concurrent agents
    "hook_over_isolated_floor_ms": 5.0,  # each agent's hook, whole process, minus `python -I -S -c pass` (issue 37)
    "mcp_ready_ms": 300.0,  # nexus-mcp: process start to tools/list answered
    "pending_over_idle_mb": 50.0,  # 10,000 pending
    "pending_late_ms": 250.0,  # every pending denied at most this late
    "classify_median_us": 50.0,
    "idle_rss_mb": 40.0,
    "start_to_ready_ms": 200.0,
    "ask_cpu_us": 150.0,  # daemon CPU per ask answered by a UI (pending entry, fan-out, answer, guard, audit)
    "ask_p50_over_allow": 3.0,  # prompt p50 / allow p50, 32 clients
    "first_time_p50_ratio": 1.5,  # agent stream, memo off: p50 / echo p50, 1 client
    "first_time_throughput_ratio": 0.5,  # agent stream, memo off: throughput / echo, 32 clients
}


def machine_info() -> dict[str, Any]:
    """What the numbers came from, and how busy it was when they were taken."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or cpu
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg": load,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def check(value: float | None, target: float, *, at_least: bool = False) -> str:
    """``pass`` / ``MISS`` / ``n/a`` for one number against one target."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    ok = value >= target if at_least else value <= target
    return "pass" if ok else "MISS"


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    num = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(headers))]

    def line(vals: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, widths, num, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def mb(nbytes: float | None) -> float | None:
    return None if nbytes is None else nbytes / (1024 * 1024)


def emit(out: dict[str, Any], text: str, *, as_json: bool, path: str | None) -> None:
    """Print the table (or the JSON) and, with ``path``, also save the JSON there."""
    import json

    data = json.dumps(out, indent=2, ensure_ascii=False)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data + "\n")
    print(data if as_json else text)
