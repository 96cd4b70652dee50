"""``nexusctl bench --scenario head-of-line``: does one agent in a huge workspace slow anyone else down?

A temporary daemon with ``[sandbox] enabled = true`` and ``Bash(ls *)`` allowed; one workspace holding
``repos`` git repositories (default 1,500: a ``~/src``), one small project. Each pair, as whole
``nexus-hook claude`` processes (what an agent really waits for):

1. *alone*: ``ls -l`` in the small project;
2. *during*: the big tree is changed (a new directory in one repository, so its scan must run again,
   as for a first call), the big-tree agent's ``ls -l`` is started, and 10 ms later the small project's
   ``ls -l``: its time is measured while the big call's facts and sandbox plan are being computed;
3. *big again*: the big-tree agent's next ``ls -l`` (its scan cached and proven fresh), and *small
   again* right after it, for the ratio.

Alone and during alternate within each pair, so load drift hits both alike. Reported: the per-pair
difference during - alone (target ≤ 20 ms), the big tree's second call over the small project's (target
≤ 2×), and how many pairs really overlapped (the small call ended before the big one). Last, the command
text the daemon handed the big-tree agent is run once, as the agent's shell runs it: a plan that
bubblewrap refuses (more mounts than it takes) would otherwise look fast here and fail there.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from nexusd.bench import procs, report, stats
from nexusd.bench.hook import hook_command, stdin_for

POLICY = """\
[permissions]
allow = ["Bash(ls *)"]

[sandbox]
enabled = true
"""
TARGET_EXTRA_MS = 20.0
TARGET_RATIO = 2.0


def make_tree(root: Path, repos: int) -> Path:
    """``repos`` repositories below a project root (hooks, config, sources and tests in each)."""
    procs.make_project(root)
    for i in range(repos):
        r = root / f"repo{i:04d}"
        for d in (".git/hooks", ".git/objects", "src/pkg", "tests"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / ".git" / "config").write_text("[core]\n")
        (r / "src" / "pkg" / "main.py").write_text("print('hi')\n")
    return root


def _start(cmd: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, subprocess.Popen[bytes]]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    return t0, proc


def _finish(t0: float, proc: subprocess.Popen[bytes]) -> tuple[float, str, float]:
    """(wall ms, permission decision, the moment it ended)."""
    out = proc.stdout.read() if proc.stdout is not None else b""
    proc.wait(60)
    end = time.perf_counter()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        decision = json.loads(out)["hookSpecificOutput"]["permissionDecision"]
    except (ValueError, KeyError, TypeError):
        decision = f"exit {proc.returncode}"
    return (end - t0) * 1000.0, decision, end


def _hook(cmd: list[str], ws: str, n: int, env: dict[str, str]) -> tuple[float, str, float]:
    return _finish(*_start(cmd, stdin_for(ws, n, "ls -l"), env))


def run_as_agent(cmd: list[str], ws: str, n: int, env: dict[str, str]) -> dict[str, Any]:
    """Ask for ``ls -d .`` in ``ws`` and run the text handed back through ``/bin/sh -c``, as an agent's shell
    does: its exit status and the tail of its error output."""
    out = subprocess.run(cmd, input=stdin_for(ws, n, "ls -d ."), capture_output=True, env=env, timeout=120)
    try:
        hso = json.loads(out.stdout)["hookSpecificOutput"]
        text = hso["updatedInput"]["command"]
    except (ValueError, KeyError, TypeError):
        return {"ran": False, "exit": None, "error": f"no sandboxed command handed back: {out.stdout[-300:]!r}"}
    ran = subprocess.run(["/bin/sh", "-c", text], cwd=ws, capture_output=True, env=env, timeout=120)
    ok = ran.returncode == 0 and ran.stdout.strip() == b"."
    error = ran.stderr.decode(errors="replace").strip()
    return {"ran": ok, "exit": ran.returncode, "error": error.splitlines()[0][:300] if error else ""}


def run(pairs: int = 20, repos: int = 1500, warmup: int = 2) -> dict[str, Any]:
    cmd = hook_command()
    outcomes: dict[str, int] = {}
    alone: list[float] = []
    during: list[float] = []
    extra: list[float] = []
    big_first: list[float] = []
    big_again: list[float] = []
    small_again: list[float] = []
    overlapped = 0
    with procs.daemon(POLICY) as d:
        small = str(d.root / "workspace")
        big_root = make_tree(d.root / "big", repos)
        big = str(big_root)
        env = dict(d.env)
        n = 0

        def note(decision: str) -> None:
            outcomes[decision] = outcomes.get(decision, 0) + 1

        for i in range(warmup + pairs):
            n += 1
            a_ms, a_dec, _ = _hook(cmd, small, n, env)
            (big_root / f"repo{i % repos:04d}" / f"new{i}").mkdir()  # the tree changed: scanned again
            n += 1
            t_big, p_big = _start(cmd, stdin_for(big, n, "ls -l"), env)
            time.sleep(0.01)
            n += 1
            s_ms, s_dec, s_end = _hook(cmd, small, n, env)
            b_ms, b_dec, b_end = _finish(t_big, p_big)
            n += 1
            b2_ms, b2_dec, _ = _hook(cmd, big, n, env)
            n += 1
            s2_ms, s2_dec, _ = _hook(cmd, small, n, env)
            if i < warmup:
                continue
            for dec in (a_dec, s_dec, b_dec, b2_dec, s2_dec):
                note(dec)
            alone.append(a_ms)
            during.append(s_ms)
            extra.append(s_ms - a_ms)
            big_first.append(b_ms)
            big_again.append(b2_ms)
            small_again.append(s2_ms)
            overlapped += s_end < b_end
        runs = run_as_agent(cmd, big, n + 1, env)
    ratio = stats.median(big_again) / stats.median(small_again)
    over = stats.median(extra)
    out = {
        "benchmark": "head_of_line",
        "machine": report.machine_info(),
        "params": {"pairs": pairs, "repos": repos, "warmup": warmup, "call": "Bash(ls -l), sandboxed"},
        "small_alone_ms": stats.summarize(alone) | {"median": stats.median(alone)},
        "small_during_ms": stats.summarize(during) | {"median": stats.median(during)},
        "extra_per_pair_ms": stats.summarize(extra) | {"median": over},
        "big_first_ms": stats.summarize(big_first) | {"median": stats.median(big_first)},
        "big_again_ms": stats.summarize(big_again) | {"median": stats.median(big_again)},
        "small_again_ms": stats.summarize(small_again) | {"median": stats.median(small_again)},
        "overlapped_pairs": overlapped,
        "big_command": runs,
        "outcomes": outcomes,
        "checks": [
            {
                "metric": "small project's call during the big tree's, over alone (median of pairs)",
                "value": over,
                "target": f"≤ {TARGET_EXTRA_MS:g} ms",
                "result": report.check(over, TARGET_EXTRA_MS),
            },
            {
                "metric": "big tree's second call over a small project's (medians)",
                "value": ratio,
                "target": f"≤ {TARGET_RATIO:g}x",
                "result": report.check(ratio, TARGET_RATIO),
            },
            {
                "metric": "the big tree's sandboxed command runs (exit status)",
                "value": runs["exit"],
                "target": "0",
                "result": "pass" if runs["ran"] else f"MISS: {runs['error'] or 'no output'}",
            },
            {  # a deny (a runaway limit, a late plan) would be timed as if it were the sandboxed allow
                "metric": "timed calls that were sandboxed allows",
                "value": outcomes.get("allow", 0),
                "target": f"all {sum(outcomes.values())}",
                "result": "pass" if set(outcomes) == {"allow"} else f"MISS: {outcomes}",
            },
        ],
    }
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    rows = []
    for label, key in (
        ("small project, alone", "small_alone_ms"),
        ("small project, during the big tree's call", "small_during_ms"),
        ("difference per pair", "extra_per_pair_ms"),
        ("big tree, after a change (scanned again)", "big_first_ms"),
        ("big tree, next call (cache proven fresh)", "big_again_ms"),
        ("small project, right after", "small_again_ms"),
    ):
        s = out[key]
        rows.append([label, s["count"], s["median"], s["p90"], s["max"]])
    p = out["params"]
    lines = [
        f"head-of-line: {p['repos']} repositories in one workspace, {p['call']}, whole nexus-hook processes",
        report.table(["ms", "runs", "median", "p90", "max"], rows),
        f"\noverlapped pairs: {out['overlapped_pairs']} of {p['pairs']}; outcomes {out['outcomes']}",
    ]
    lines += [f"{c['metric']}: {report.fmt(c['value'], 2)}, target {c['target']}: {c['result']}" for c in out["checks"]]
    return "\n".join(lines)
