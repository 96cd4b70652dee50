"""``nexusctl bench --scenario sandbox``: what running an agent's shell call sandboxed costs, against the
floor of bubblewrap itself.

Two temporary daemons with ``[sandbox] enabled = true``, one with the default isolated network and one
with a filtered one (an allowed domain: the proxy's ports made inside by the joiner), decide ``Bash(true)``
for an agent and hand back the command text they really hand agents (the generated wrapper). Every run
is of a text decided for it, untimed, as an agent's every call is: a call's per-call files (its error
tap's FIFO, a filtered call's FIFOs) serve one run, and a text run again would run without them. Then, round by round
in rotating order (so that drift in machine load hits every side alike), the isolated wrapper, the
filtered wrapper and a bare ``bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true`` are each
started through ``/bin/sh -c`` as an agent's shell starts them. Reported: wall time of each (median, p90),
the medians of the per-round differences against bare bubblewrap, and the CPU (user + system of the
children) of each; and the agent's decision round trip for the filtered call (a hook's share, not the
wrapper's). Two more sides put numbers on what the benchmark workspace (a bare ``.git``) hides: ``true``
in a source tree of ~10,000 entries, planned in this process with the default policy,
its epilogue starting from the known directories (``tree``) and walking the whole tree (``tree-walk``,
what every call did before).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexusd.bench import procs, report, stats
from nexusd.sandbox.wrapper import wrapper_words

SANDBOX_POLICY = """\
[permissions]
allow = ["Bash(true)"]

[sandbox]
enabled = true
"""
FILTERED_POLICY = SANDBOX_POLICY + '\n[sandbox.network]\nallowed_domains = ["localhost:9"]\n'
BARE = "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true"
TARGET_MS = 10.0  # the wrapped call's median overhead over bare bubblewrap (issue 36; issue 8 said 25)


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


def _wait_probe(daemon: procs.Spawned) -> None:
    from nexusd.client import Client

    deadline = time.monotonic() + 30
    with Client(socket_path=str(daemon.socket), role="ui", name="nexus-bench") as c:
        while c.status().sandbox is None:  # the probe runs after the socket serves
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon never reported its sandbox probe")
            time.sleep(0.05)
        probe = c.status().sandbox
    if probe is None or not probe.available:
        raise RuntimeError(f"no sandbox on this machine: {probe.reason if probe else 'not probed'}")


def wrapped_true(daemon: procs.Spawned, *, probed: bool = False, session: str = "nexus-bench-sandbox") -> str:
    """The command text the daemon hands an agent for ``true`` in the benchmark workspace."""
    from nexusd.client import Client
    from nexusd.protocol import CallInfo

    if not probed:
        _wait_probe(daemon)
    ws = str(daemon.root / "workspace")
    call = CallInfo(provider="claude", session=session, tool="Bash", cwd=ws, workspace=ws, input={"command": "true"})
    with Client(socket_path=str(daemon.socket), role="agent", name="nexus-bench") as c:
        d = c.request(call)
    if d.decision != "allow" or not d.updated_input:
        raise RuntimeError(f"the daemon did not hand back a sandboxed command: {d.decision} {d.reason}")
    return str(d.updated_input["command"])


TREE_DIRS = 400  # a source tree of ~10,000 entries: 20 packages of 20 directories of 24 files
TREE_FILES = 24


def make_tree(root: Path) -> Path:
    """A workspace the size of a real project's checkout, for the epilogue's cost (``tree``)."""
    ws = procs.make_project(root)
    for i in range(TREE_DIRS):
        d = ws / f"pkg{i // 20}" / f"mod{i % 20}"
        d.mkdir(parents=True)
        for j in range(TREE_FILES):
            (d / f"f{j}.py").write_text("x = 1\n")
    return ws


def tree_texts(ws: Path, state: Path) -> tuple[Callable[[], str], Callable[[], str]]:
    """Makers of (the wrapper for ``true`` in ``ws`` as the daemon writes it, the same with the epilogue
    walking the whole tree as before the known-directory list), planned once in this process with the
    default policy; each text made afresh, its per-call files with it, as for every agent's call."""
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import _state_dir, plan_command, workspace_dir
    from nexusd.sandbox.probe import probe
    from nexusd.sandbox.wrapper import RUN_DIR, agent_command, known_dirs_file

    store = PolicyStore(config_dir=state / "config", state_dir=state / "state", managed_dir=state / "managed")
    store.load()
    found = probe()
    plan = plan_command("true", str(ws), store, found, workspace=str(ws))
    if not plan.allowed or plan.backend != "bwrap":
        raise RuntimeError(f"no bubblewrap plan for the tree: {plan.reason}")
    run_dir = workspace_dir(_state_dir(store), os.path.realpath(ws)) / RUN_DIR
    known = known_dirs_file(plan, run_dir)
    if known is None:
        raise RuntimeError("no known-directory list for the tree (GNU find >= 4.9 and a local file system needed)")
    return (lambda: agent_command(plan, "true", run_dir, known=known)), (lambda: agent_command(plan, "true", run_dir))


Series = dict[str, list[float]]


def _rounds(sides: dict[str, Callable[[], str]], pairs: int, warmup: int) -> tuple[Series, Series, Series]:
    """(wall ms, CPU ms, difference against ``bare`` per round) of each side, run in rotating order."""
    for _ in range(warmup):
        for make in sides.values():
            t = make()
            _, _, rc = _once(t)
            if rc != 0:
                raise RuntimeError(f"exit {rc} from {t[:200]!r}")
    walls: Series = {k: [] for k in sides}
    cpus: Series = {k: [] for k in sides}
    diffs: Series = {k: [] for k in sides if k != "bare"}
    names = list(sides)
    for i in range(pairs):
        order = names[i % len(names) :] + names[: i % len(names)]  # rotate: each side goes first in turn
        for name in order:
            t = sides[name]()
            wall, cpu, rc = _once(t)
            if rc != 0:
                raise RuntimeError(f"exit {rc} from {t[:200]!r}")
            walls[name].append(wall)
            cpus[name].append(cpu)
        for name in diffs:
            diffs[name].append(walls[name][-1] - walls["bare"][-1])
    return walls, cpus, diffs


def _summary(values: list[float]) -> dict[str, Any]:
    return stats.summarize(values) | {"median": stats.median(values)}


def run(pairs: int = 60, warmup: int = 5, *, filtered: bool = True, tree: bool = True) -> dict[str, Any]:
    if shutil.which("bwrap") is None:
        raise RuntimeError("bwrap is not installed (scripts/bootstrap installs it)")
    daemons = [procs.start_daemon(SANDBOX_POLICY)]
    tree_root = Path(tempfile.mkdtemp(prefix="nxbt", dir="/var/tmp")) if tree else None
    try:
        if filtered:
            daemons.append(procs.start_daemon(FILTERED_POLICY))
        for d in daemons:
            _wait_probe(d)
        calls = 0

        def isolated_text() -> str:  # a call's per-call files (its tap's FIFO) serve one run: decided afresh
            nonlocal calls
            calls += 1  # a session per call: the runaway limit counts repeats per session
            return wrapped_true(daemons[0], probed=True, session=f"nexus-bench-isolated-{calls}")

        decide_ms: list[float] = []

        def filtered_text() -> str:  # a filtered call's FIFOs serve one run: decided again for every run
            t0 = time.perf_counter()  # a session per call: the runaway limit counts repeats per session
            out = wrapped_true(daemons[1], probed=True, session=f"nexus-bench-sandbox-{len(decide_ms)}")
            decide_ms.append((time.perf_counter() - t0) * 1000.0)
            return out

        sides: dict[str, Callable[[], str]] = {"isolated": isolated_text, "bare": lambda: BARE}
        if filtered:
            sides["filtered"] = filtered_text
            words = wrapper_words(filtered_text())  # sh, the script, the time, the command, the cd file
            if words is None or "--info-fd" not in Path(words[1]).read_text():
                raise RuntimeError("the filtered daemon handed back a wrapper without a filtered network")
        if tree_root is not None:
            sides["tree"], sides["tree-walk"] = tree_texts(make_tree(tree_root / "ws"), tree_root)
        if tree_root is not None:
            time.sleep(0.1)  # the epilogue looks at what changed from 50 ms before the plan on
        walls, cpus, diffs = _rounds(sides, pairs, warmup)
        decide_ms[: warmup + 1] = []  # the check's and the warm-up's decisions
    finally:
        for d in daemons:
            d.cleanup()
        if tree_root is not None:
            shutil.rmtree(tree_root, ignore_errors=True)
    over = stats.median(diffs["isolated"])
    out: dict[str, Any] = {
        "benchmark": "sandbox",
        "machine": report.machine_info(),
        "params": {
            "pairs": pairs,
            "warmup": warmup,
            "bare": BARE,
            "wrapped": "the daemon's command for Bash(true)",
            "filtered": FILTERED_POLICY if filtered else None,
        },
        "wrapped_ms": _summary(walls["isolated"]),
        "bare_ms": _summary(walls["bare"]),
        "overhead_ms": _summary(diffs["isolated"]),
        "wrapped_cpu_ms": _summary(cpus["isolated"]),
        "bare_cpu_ms": _summary(cpus["bare"]),
        "checks": [
            {
                "metric": "wrapped true over bare bwrap, median of pairs",
                "value": over,
                "target": f"≤ {TARGET_MS:g} ms",
                "result": report.check(over, TARGET_MS),
            }
        ],
    }
    if filtered:
        fover = stats.median(diffs["filtered"])
        out |= {
            "filtered_ms": _summary(walls["filtered"]),
            "filtered_overhead_ms": _summary(diffs["filtered"]),
            "filtered_cpu_ms": _summary(cpus["filtered"]),
            "filtered_decide_ms": _summary(decide_ms),
        }
        out["checks"].append(
            {
                "metric": "wrapped true with a filtered network over bare bwrap, median of pairs",
                "value": fover,
                "target": f"≤ {TARGET_MS:g} ms",
                "result": report.check(fover, TARGET_MS),
            }
        )
    if tree:
        out |= {
            "tree_ms": _summary(walls["tree"]),
            "tree_overhead_ms": _summary(diffs["tree"]),
            "tree_cpu_ms": _summary(cpus["tree"]),
            "tree_walk_ms": _summary(walls["tree-walk"]),
            "tree_walk_overhead_ms": _summary(diffs["tree-walk"]),
            "tree_walk_cpu_ms": _summary(cpus["tree-walk"]),
        }
        tover = stats.median(diffs["tree"])
        out["checks"].append(
            {
                "metric": f"wrapped true in a tree of {TREE_DIRS * (TREE_FILES + 1):,} entries over bare bwrap",
                "value": tover,
                "target": f"≤ {TARGET_MS:g} ms",
                "result": report.check(tover, TARGET_MS),
            }
        )
    return stats.json_safe(out)


def render(out: dict[str, Any]) -> str:
    rows = []
    for label, key in (
        ("wrapped true (ms)", "wrapped_ms"),
        ("bare bwrap true (ms)", "bare_ms"),
        ("difference per pair (ms)", "overhead_ms"),
        ("wrapped CPU (ms)", "wrapped_cpu_ms"),
        ("bare CPU (ms)", "bare_cpu_ms"),
        ("filtered true (ms)", "filtered_ms"),
        ("filtered difference per pair (ms)", "filtered_overhead_ms"),
        ("filtered CPU (ms)", "filtered_cpu_ms"),
        ("filtered decision round trip (ms)", "filtered_decide_ms"),
        ("tree: wrapped true (ms)", "tree_ms"),
        ("tree: difference per pair (ms)", "tree_overhead_ms"),
        ("tree: CPU (ms)", "tree_cpu_ms"),
        ("tree, whole walk: wrapped true (ms)", "tree_walk_ms"),
        ("tree, whole walk: difference per pair (ms)", "tree_walk_overhead_ms"),
        ("tree, whole walk: CPU (ms)", "tree_walk_cpu_ms"),
    ):
        if key not in out:
            continue
        s = out[key]
        rows.append([label, s["count"], s["median"], s["p90"], s["max"]])
    checks = "\n".join(
        f"{c['metric']}: {report.fmt(c['value'])} ms, target {c['target']}: {c['result']}" for c in out["checks"]
    )
    return report.table(["metric", "runs", "median", "p90", "max"], rows) + "\n\n" + checks
