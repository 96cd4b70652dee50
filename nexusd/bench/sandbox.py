"""``nexusctl bench --scenario sandbox``: what running an agent's shell call sandboxed costs, against the
floor of bubblewrap itself.

A temporary daemon with ``[sandbox] enabled = true`` decides ``Bash(true)`` for an agent and hands back the
command text it really hands agents (the generated wrapper); then, pair by pair and in alternating
order (so that drift in machine load hits both sides alike), the wrapped ``true`` and a bare
``bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true`` are each started through ``/bin/sh -c``
as an agent's shell starts them. Reported: wall time of each (median, p90), the median of the per-pair
differences, and the CPU (user + system of the children) of each.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from typing import Any

from nexusd.bench import procs, report, stats

SANDBOX_POLICY = """\
[permissions]
allow = ["Bash(true)"]

[sandbox]
enabled = true
"""
BARE = "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true"
TARGET_MS = 25.0  # the wrapped call's median overhead over bare bubblewrap
AIM_MS = 10.0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _once(text: str) -> tuple[float, float, int]:
    """(wall ms, CPU ms, exit code) of ``/bin/sh -c text``."""
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    rc = subprocess.run(
        ["/bin/sh", "-c", text], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/"
    ).returncode
    wall = (time.perf_counter() - t0) * 1000.0
    return wall, (_children_cpu() - cpu0) * 1000.0, rc


def wrapped_true(daemon: procs.Spawned) -> str:
    """The command text the daemon hands an agent for ``true`` in the benchmark workspace."""
    from nexusd.client import Client
    from nexusd.protocol import CallInfo

    ws = str(daemon.root / "workspace")
    deadline = time.monotonic() + 30
    with Client(socket_path=str(daemon.socket), role="ui", name="nexus-bench") as c:
        while c.status().sandbox is None:  # the probe runs after the socket serves
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon never reported its sandbox probe")
            time.sleep(0.05)
        probe = c.status().sandbox
    if probe is None or not probe.available:
        raise RuntimeError(f"no sandbox on this machine: {probe.reason if probe else 'not probed'}")
    call = CallInfo(
        provider="claude", session="nexus-bench-sandbox", tool="Bash", cwd=ws, workspace=ws, input={"command": "true"}
    )
    with Client(socket_path=str(daemon.socket), role="agent", name="nexus-bench") as c:
        d = c.request(call)
    if d.decision != "allow" or not d.updated_input:
        raise RuntimeError(f"the daemon did not hand back a sandboxed command: {d.decision} {d.reason}")
    return str(d.updated_input["command"])


def run(pairs: int = 60, warmup: int = 5) -> dict[str, Any]:
    if shutil.which("bwrap") is None:
        raise RuntimeError("bwrap is not installed (scripts/bootstrap installs it)")
    daemon = procs.start_daemon(SANDBOX_POLICY)
    try:
        text = wrapped_true(daemon)
        for _ in range(warmup):
            for t in (text, BARE):
                _, _, rc = _once(t)
                if rc != 0:
                    raise RuntimeError(f"exit {rc} from {t[:200]!r}")
        wrapped_ms: list[float] = []
        bare_ms: list[float] = []
        wrapped_cpu: list[float] = []
        bare_cpu: list[float] = []
        diffs: list[float] = []
        for i in range(pairs):
            order = [(text, wrapped_ms, wrapped_cpu), (BARE, bare_ms, bare_cpu)]
            if i % 2:
                order.reverse()
            for t, walls, cpus in order:
                wall, cpu, rc = _once(t)
                if rc != 0:
                    raise RuntimeError(f"exit {rc} from {t[:200]!r}")
                walls.append(wall)
                cpus.append(cpu)
            diffs.append(wrapped_ms[-1] - bare_ms[-1])
    finally:
        daemon.cleanup()
    over = stats.median(diffs)
    out = {
        "benchmark": "sandbox",
        "machine": report.machine_info(),
        "params": {"pairs": pairs, "warmup": warmup, "bare": BARE, "wrapped": "the daemon's command for Bash(true)"},
        "wrapped_ms": stats.summarize(wrapped_ms) | {"median": stats.median(wrapped_ms)},
        "bare_ms": stats.summarize(bare_ms) | {"median": stats.median(bare_ms)},
        "overhead_ms": stats.summarize(diffs) | {"median": over},
        "wrapped_cpu_ms": stats.summarize(wrapped_cpu) | {"median": stats.median(wrapped_cpu)},
        "bare_cpu_ms": stats.summarize(bare_cpu) | {"median": stats.median(bare_cpu)},
        "checks": [
            {
                "metric": "wrapped true over bare bwrap, median of pairs",
                "value": over,
                "target": f"≤ {TARGET_MS:g} ms (aim {AIM_MS:g} ms)",
                "result": report.check(over, TARGET_MS),
            }
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    rows = []
    for label, key in (
        ("wrapped true (ms)", "wrapped_ms"),
        ("bare bwrap true (ms)", "bare_ms"),
        ("difference per pair (ms)", "overhead_ms"),
        ("wrapped CPU (ms)", "wrapped_cpu_ms"),
        ("bare CPU (ms)", "bare_cpu_ms"),
    ):
        s = out[key]
        rows.append([label, s["count"], s["median"], s["p90"], s["max"]])
    checks = "\n".join(
        f"{c['metric']}: {report.fmt(c['value'])} ms, target {c['target']}: {c['result']}" for c in out["checks"]
    )
    return report.table(["metric", "runs", "median", "p90", "max"], rows) + "\n\n" + checks
