"""Peer figure: what Claude Code's own sandbox (bubblewrap + socat, ``sandbox.enabled``) adds per Bash call.

The real Claude Code CLI (the version the end-to-end tests pin, installed into ``.e2e-cache/`` by them or
by ``npm install --prefix .e2e-cache/npm @anthropic-ai/claude-code@VERSION``) runs against the fake model
server of the end-to-end tests, which scripts ``--calls`` Bash calls of ``true`` and then a final answer.
Each round runs one session with ``sandbox.enabled`` (``failIfUnavailable``, auto-allow) and one without
(``Bash(true)`` allowed by a rule), in alternating order; per Bash call the sandbox costs
``(sandboxed - plain) / calls``. Everything else in a session (node start, model round trips) is the same
on both sides and cancels in the difference; the noise of a whole session does not, so use many calls.

    .venv/bin/python benchmarks/claude_sandbox_peer.py --calls 20 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.fake_apis import FakeAPI, ToolCall, serve  # noqa: E402
from tests.e2e.test_agents import base_env  # noqa: E402

CLAUDE = REPO / ".e2e-cache" / "npm" / "node_modules" / ".bin" / "claude"


def session(calls: int, sandboxed: bool, command: str = "true") -> tuple[float, list[str]]:
    root = Path(tempfile.mkdtemp(prefix="nxpeer", dir="/var/tmp"))
    home, project = root / "home", root / "project"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    api = serve(
        FakeAPI(
            [ToolCall("Bash", {"command": command, "description": "t"}, id=f"toolu_peer_{i:03d}") for i in range(calls)]
        ),
        "claude",
    )
    settings: dict[str, object] = {"permissions": {"allow": ["Bash(true)"]}}
    if sandboxed:
        settings["sandbox"] = {"enabled": True, "failIfUnavailable": True, "autoAllowBashIfSandboxed": True}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = base_env(home, None) | {
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "sk-peer-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    try:
        t0 = time.perf_counter()
        r = subprocess.run(
            [str(CLAUDE), "-p", "run the scripted calls", "--output-format", "json", "--permission-mode", "default"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"claude exited {r.returncode}: {r.stderr[-2000:]}{r.stdout[-2000:]}")
        return wall, api.tool_results()
    finally:
        api.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20, help="Bash calls per long session (>= 2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not CLAUDE.exists():
        print(f"Claude Code is not installed at {CLAUDE} (see this file's docstring)", file=sys.stderr)
        return 2
    # the sandbox really applies: a write outside the workspace fails inside it
    _, told = session(1, True, "touch /etc/nexus-peer-probe; echo rc=$?")
    if "rc=0" in " ".join(told) or os.path.exists("/etc/nexus-peer-probe"):
        print(f"Claude Code's sandbox did not confine the probe: {told}", file=sys.stderr)
        return 3
    runs: dict[tuple[bool, int], list[float]] = {(s, n): [] for s in (True, False) for n in (1, a.calls)}
    for i in range(a.rounds):
        order = list(runs)
        if i % 2:
            order.reverse()
        for key in order:
            runs[key].append(session(key[1], key[0])[0])
    med = {k: statistics.median(v) for k, v in runs.items()}
    per_call_ms = (med[True, a.calls] - med[False, a.calls]) / a.calls * 1000.0
    # the first sandboxed call also pays the session's one-time sandbox set-up: the marginal call does not
    marginal_ms = ((med[True, a.calls] - med[False, a.calls]) - (med[True, 1] - med[False, 1])) / (a.calls - 1) * 1000
    report = {
        "benchmark": "claude_sandbox_peer",
        "calls": a.calls,
        "rounds": a.rounds,
        "sessions_s": {f"{'sandboxed' if s else 'plain'}_{n}_calls": v for (s, n), v in runs.items()},
        "per_call_ms": per_call_ms,
        "marginal_call_ms": marginal_ms,
        "probe": told,
        "load": os.getloadavg(),
    }
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"Claude Code, sessions of 1 and {a.calls} Bash(true) calls, {a.rounds} rounds (medians): "
            f"sandboxed {med[True, 1]:.2f} / {med[True, a.calls]:.2f} s, plain {med[False, 1]:.2f} / "
            f"{med[False, a.calls]:.2f} s; sandbox per call {per_call_ms:+.1f} ms averaged, "
            f"{marginal_ms:+.1f} ms marginal (load {os.getloadavg()[0]:.1f}); probe said {told}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
