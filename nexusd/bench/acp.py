"""``nexus-acp``: one permission round as the agent sees it, in a running proxy, with the real daemon.

A stand-in ACP agent (a few lines of Python that ``nexus-acp`` runs as its AGENT) sends
``session/request_permission`` for a shell call the benchmark policy allows, waits for the answer, and
times each round: proxy, a fresh daemon connection, the decision, the reply. No process starts per call,
so this is the whole per-call cost an ACP editor's agent pays.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from nexusd.bench import procs, stats

AGENT = r"""
import json, sys, time
n = int(sys.argv[1])
options = [{"optionId": "once", "name": "Allow", "kind": "allow_once"},
           {"optionId": "no", "name": "Reject", "kind": "reject_once"}]
ms, chosen = [], []
for i in range(n):
    call = {"toolCallId": f"c{i}", "status": "pending", "title": "echo hello", "kind": "execute",
            "rawInput": {"command": "echo hello"}, "content": [], "locations": []}
    msg = {"jsonrpc": "2.0", "id": i, "method": "session/request_permission",
           "params": {"sessionId": "bench", "toolCall": call, "options": options}}
    t0 = time.perf_counter()
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
    reply = json.loads(sys.stdin.readline())
    ms.append((time.perf_counter() - t0) * 1000.0)
    chosen.append(reply.get("result", {}).get("outcome", {}).get("optionId", "?"))
result = {"jsonrpc": "2.0", "method": "bench/result", "params": {"ms": ms, "chosen": chosen}}
sys.stdout.write(json.dumps(result) + "\n")
sys.stdout.flush()
"""


def acp_command() -> list[str]:
    exe = Path(sys.executable).with_name("nexus-acp")
    found = str(exe) if exe.exists() else shutil.which("nexus-acp")
    if not found:
        raise FileNotFoundError("nexus-acp is not installed (pip install -e .)")
    return [found]


def rounds(env: dict[str, str], cwd: str, n: int, timeout: float = 120.0) -> dict[str, Any]:
    """Times of ``n`` permission rounds through one ``nexus-acp`` and the option each chose."""
    cmd = [*acp_command(), "--", sys.executable, "-c", AGENT, str(n)]
    # the editor's side stays open until the agent is done: its end would end the session
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("method") == "bench/result":
                return dict(msg["params"])
    finally:
        timer.cancel()
        proc.kill()
        _, err = proc.communicate()
    raise RuntimeError(f"nexus-acp gave no result (exit {proc.returncode}): {err.decode()[-300:]}")


def run(n: int = 30, warmup: int = 3) -> dict[str, Any]:
    with procs.daemon(procs.BENCH_POLICY) as d:
        ws = d.root / "workspace"
        ws.mkdir(exist_ok=True)
        got = rounds(dict(d.env), str(ws), n + warmup)
    ms = got["ms"][warmup:]
    return stats.json_safe(
        {
            "round_ms": stats.summarize(ms) | {"median": stats.median(ms)},
            "allowed": sum(1 for c in got["chosen"] if c == "once"),
            "rounds": len(got["chosen"]),
        }
    )
