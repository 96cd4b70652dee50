"""``nexus-hook claude`` as a whole process, against the bare Python floor measured in the same run.

Each round spawns the floor (``python3 -c 'import socket, json'`` with the hook's own interpreter, so the
difference is what the hook adds, not which Python) and then the hook with a realistic PreToolUse stdin
that the benchmark policy allows by rule; the two are interleaved so load drifts hit both alike.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from nexusd.bench import procs, report, stats


def hook_command() -> list[str]:
    """The installed console script, as Claude Code would spawn it."""
    exe = Path(sys.executable).with_name("nexus-hook")
    found = str(exe) if exe.exists() else shutil.which("nexus-hook")
    if not found:
        raise FileNotFoundError("nexus-hook is not installed (pip install -e .)")
    return [found, "claude"]


def interpreter_of(script: str) -> str:
    """The interpreter in a console script's shebang (falls back to this one)."""
    try:
        with open(script, "rb") as f:
            first = f.readline().decode(errors="replace").strip()
    except OSError:
        return sys.executable
    return first[2:].split()[0] if first.startswith("#!") and "python" in first else sys.executable


def stdin_for(workspace: str, n: int, command: str = "echo hello") -> bytes:
    """A PreToolUse payload shaped like Claude Code's (fields as observed with the real CLI)."""
    return json.dumps(
        {
            "session_id": "3f1c9a52-7d1e-4c55-9a57-0b8f2d6a1e44",
            "transcript_path": f"{workspace}/.claude/transcript.jsonl",
            "cwd": workspace,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Print a greeting"},
            "tool_use_id": f"toolu_01Bench{n:06d}",
        }
    ).encode()


def _timed(
    cmd: list[str], stdin: bytes | None, env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    cp = subprocess.run(cmd, input=stdin, env=env, capture_output=True, timeout=60, check=False)
    return (time.perf_counter() - t0) * 1000.0, cp


def run(runs: int = 40, warmup: int = 3, *, uvloop: bool = False) -> dict[str, Any]:
    cmd = hook_command()
    py = interpreter_of(cmd[0])
    floor_cmd = [py, "-c", "import socket, json"]
    hook_ms: list[float] = []
    floor_ms: list[float] = []
    outcomes: dict[str, int] = {}
    errors = 0
    samples: list[str] = []
    with procs.daemon(procs.BENCH_POLICY, uvloop=uvloop) as d:
        ws = str(d.root / "workspace")
        env = dict(d.env)
        for i in range(warmup + runs):
            f_ms, _ = _timed(floor_cmd, None, env)
            h_ms, cp = _timed(cmd, stdin_for(ws, i), env)
            try:
                decision = json.loads(cp.stdout)["hookSpecificOutput"]["permissionDecision"]
            except (ValueError, KeyError, TypeError):
                decision = f"exit {cp.returncode}"
            if i < warmup:
                continue
            floor_ms.append(f_ms)
            hook_ms.append(h_ms)
            outcomes[decision] = outcomes.get(decision, 0) + 1
            if decision != "allow":
                errors += 1
                if len(samples) < 3:
                    samples.append((cp.stdout + cp.stderr).decode(errors="replace")[:300])
    hook_med, floor_med = stats.median(hook_ms), stats.median(floor_ms)
    over = hook_med - floor_med
    out = {
        "benchmark": "hook_process",
        "machine": report.machine_info(),
        "params": {"runs": runs, "warmup": warmup, "hook": cmd, "floor": floor_cmd},
        "hook_ms": stats.summarize(hook_ms) | {"median": hook_med},
        "floor_ms": stats.summarize(floor_ms) | {"median": floor_med},
        "over_floor_ms": over,
        "outcomes": outcomes,
        "errors": errors,
        "samples": samples,
        "checks": [
            {
                "metric": "nexus-hook claude median - floor median",
                "value": over,
                "target": "≤ 15 ms",
                "result": report.check(over, report.TARGETS["hook_over_floor_ms"]),
            },
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    h, f = out["hook_ms"], out["floor_ms"]
    rows = [
        ["python -c 'import socket, json'", f["count"], f["median"], f["p90"], f["max"]],
        ["nexus-hook claude (allow by rule)", h["count"], h["median"], h["p90"], h["max"]],
    ]
    lines = [report.table(["process", "runs", "median ms", "p90 ms", "max ms"], rows)]
    lines.append(f"\nhook over floor: {report.fmt(out['over_floor_ms'])} ms; outcomes {out['outcomes']}")
    lines += [f"  sample: {s}" for s in out["samples"]]
    lines.append("")
    lines.append(
        report.table(
            ["target", "value", "goal", "result"],
            [[c["metric"], c["value"], c["target"], c["result"]] for c in out["checks"]],
        )
    )
    return "\n".join(lines)
