"""``nexusctl bench``: decision round trips and throughput over the wire, against the echo floor.

Without ``--socket`` it starts a daemon on a temporary socket with the benchmark policy (allow
``Bash(echo *)``, ask ``Bash(git push *)``, deny ``Bash(rm *)``), so a person's real daemon, policy and
audit log are untouched. With ``--socket`` it measures that running daemon: the automatic UI answers only
the benchmark's own sessions, and rule scenarios report ``unexpected`` if that daemon's policy differs.
The ``burst`` scenario (``nexusd/bench/burst.py``) always starts its own daemon: thousands of prompts
would otherwise reach the person's own UIs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def _int_list(value: str) -> list[int]:
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from exc
    if not out or any(n < 1 for n in out):
        raise click.BadParameter("client counts must be positive")
    return out


def _socket_given(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    if value is not None and not value.strip():
        raise click.BadParameter("empty (is the variable you passed, e.g. $NEXUS_SOCKET, set?)")
    return Path(value) if value is not None else None


@click.command("bench")
@click.option(
    "--clients", default="1,32", show_default=True, help="Concurrent agent connections; a comma list runs each."
)
@click.option(
    "--requests",
    "requests_",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Timed requests per cell (split across the clients).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Run each cell for this many seconds instead of a request count.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Untimed requests per client before the clock starts.",
)
@click.option(
    "--scenario",
    "scenario_",
    multiple=True,
    type=click.Choice(["agent", "allow", "deny", "prompt", "mix", "burst", "all", "sandbox", "hook", "head-of-line"]),
    default=["all"],
    show_default=True,
    help="Repeatable. 'all' is the five wire scenarios, 'agent' (a seeded stream of distinct agent-like calls) "
    "first; 'burst' (--clients agents × --asks asks at once, "
    "answered by an automatic UI) runs only when named; 'sandbox' (alone) times an agent's sandboxed `true` "
    "against bare bubblewrap, pair by pair (needs bwrap; --requests is the number of pairs, default 60); "
    "'hook' (alone) times each agent's installed hook command as a whole process beside `python -I -S -c pass` "
    "and `python -c pass` (--requests is the number of rounds, default 30); "
    "'head-of-line' (alone) times a small project's sandboxed call while another agent's call runs in a "
    "workspace of 1,500 repositories, against the same call alone (--requests pairs, default 20).",
)
@click.option(
    "--asks",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="burst: asks each agent submits at once.",
)
@click.option(
    "--burst-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="burst: the daemon's pending deadline; an ask not answered by then is counted as timed out.",
)
@click.option("--baseline", is_flag=True, help="Also run the bare echo server under the same load; report ratios.")
@click.option(
    "--uvloop",
    is_flag=True,
    help="Run the temporary daemon and the echo server on uvloop (experimental: see docs/PERFORMANCE.md).",
)
@click.option(
    "--corpus",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Commands for the mix and agent scenarios (default: the corpus shipped in nexusd/bench/corpus/).",
)
@click.option(
    "--seed",
    type=int,
    default=1,
    show_default=True,
    help="agent: the seed of the generated sessions (the same seed gives the same calls).",
)
@click.option(
    "--socket",
    "socket_",
    default=None,
    callback=_socket_given,
    help="Measure the daemon on this socket instead of starting a temporary one.",
)
@click.option(
    "--pin/--no-pin",
    default=True,
    show_default=True,
    help="Keep the daemon and echo server on one CPU and the load generator on the others (own daemon only).",
)
@click.option(
    "--daemon-arg",
    "daemon_args",
    multiple=True,
    help="Extra argument for the temporary daemon, repeatable (e.g. --daemon-arg=--decision-memo=0).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON.")
@click.option(
    "--out", "out_file", type=click.Path(dir_okay=False), default=None, help="Also save the JSON report here."
)
@click.pass_context
def bench(
    ctx: click.Context,
    clients: str,
    requests_: int,
    duration: float | None,
    warmup: int,
    scenario_: tuple[str, ...],
    asks: int,
    burst_timeout: float,
    baseline: bool,
    uvloop: bool,
    corpus: Path | None,
    seed: int,
    socket_: Path | None,
    pin: bool,
    daemon_args: tuple[str, ...],
    as_json: bool,
    out_file: str | None,
) -> None:
    """Benchmark decision round trips (p50/p90/p99/max µs), throughput, errors and daemon RSS; or a burst of
    asks (answered, timed out, missing, daemon RSS)."""
    from nexusd.bench.runner import render, run_bench

    if "sandbox" in scenario_:
        if len(set(scenario_)) > 1:
            raise click.UsageError("--scenario sandbox runs alone")
        _sandbox(ctx, requests_, as_json, out_file)
        return
    if "hook" in scenario_:
        if len(set(scenario_)) > 1:
            raise click.UsageError("--scenario hook runs alone")
        _hook(ctx, requests_, as_json, out_file)
        return
    if "head-of-line" in scenario_:
        if len(set(scenario_)) > 1:
            raise click.UsageError("--scenario head-of-line runs alone")
        _head_of_line(ctx, requests_, as_json, out_file)
        return
    counts = _int_list(clients)
    wanted = list(dict.fromkeys(scenario_))
    names = [n for n in wanted if n not in ("all", "burst")]
    if "all" in wanted:
        names = ["agent", "allow", "deny", "prompt", "mix"]
    if "burst" in wanted:
        if socket_ is not None:
            click.echo("nexusctl bench: the burst scenario starts its own daemon; leave out --socket", err=True)
            sys.exit(1)
        bursts = _run_bursts(counts, asks, burst_timeout, daemon_args, uvloop)
        if not names:
            _emit(
                {"benchmark": "burst", "runs": bursts}, "\n\n".join(_render_burst(b) for b in bursts), as_json, out_file
            )
            sys.exit(3 if any(_burst_errors(b) for b in bursts) else 0)
    else:
        bursts = []
    target = socket_
    parent = ctx.parent
    if (
        target is None
        and parent is not None
        and parent.get_parameter_source("socket_path") == click.core.ParameterSource.COMMANDLINE
    ):
        target = Path(parent.params["socket_path"])
    try:
        out = run_bench(
            socket=target,
            scenario_names=names,
            clients=counts,
            requests=None if duration else requests_,
            duration=duration,
            warmup=warmup,
            baseline=baseline,
            uvloop=uvloop,
            corpus=corpus,
            pin=pin,
            daemon_args=daemon_args,
            seed=seed,
        )
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        click.echo(f"nexusctl bench: {exc}", err=True)
        sys.exit(1)
    text = render(out)
    if bursts:
        out["burst"] = bursts
        text += "\n\n" + "\n\n".join(_render_burst(b) for b in bursts)
    _emit(out, text, as_json, out_file)
    errors = sum(c["nexusd"]["errors"] for c in out["cells"]) + sum(_burst_errors(b) for b in bursts)
    sys.exit(3 if errors else 0)


def _run_bursts(agents: list[int], asks: int, timeout: float, daemon_args: tuple[str, ...], uvloop: bool) -> list:
    from nexusd.bench import burst

    try:
        return [burst.run(n, asks, timeout, daemon_args=daemon_args, uvloop=uvloop) for n in agents]
    except (OSError, RuntimeError, ValueError) as exc:
        click.echo(f"nexusctl bench: {exc}", err=True)
        sys.exit(1)


def _render_burst(out: dict) -> str:
    from nexusd.bench import burst

    return burst.render(out)


def _burst_errors(out: dict) -> int:
    from nexusd.bench import burst

    return burst.errors(out)


def _emit(out: dict, text: str, as_json: bool, out_file: str | None) -> None:
    data = json.dumps(out, indent=2, ensure_ascii=False)
    if out_file:
        Path(out_file).write_text(data + "\n", encoding="utf-8")
    click.echo(data if as_json else text)


def _sandbox(ctx: click.Context, requests_: int, as_json: bool, out_file: str | None) -> None:
    from nexusd.bench import sandbox

    pairs = requests_ if ctx.get_parameter_source("requests_") == click.core.ParameterSource.COMMANDLINE else 60
    try:
        out = sandbox.run(pairs=pairs)
    except (OSError, RuntimeError) as exc:
        click.echo(f"nexusctl bench: {exc}", err=True)
        sys.exit(1)
    data = json.dumps(out, indent=2, ensure_ascii=False)
    if out_file:
        Path(out_file).write_text(data + "\n", encoding="utf-8")
    click.echo(data if as_json else sandbox.render(out))


def _hook(ctx: click.Context, requests_: int, as_json: bool, out_file: str | None) -> None:
    """Each agent's hook as a whole process beside both interpreter floors (``nexusd/bench/hook.py``)."""
    from nexusd.bench import hook

    runs = requests_ if ctx.get_parameter_source("requests_") == click.core.ParameterSource.COMMANDLINE else 30
    try:
        out = hook.run(runs=runs)
    except (OSError, RuntimeError) as exc:
        click.echo(f"nexusctl bench: {exc}", err=True)
        sys.exit(1)
    _emit(out, hook.render(out), as_json, out_file)
    sys.exit(3 if out["errors"] else 0)


def _head_of_line(ctx: click.Context, requests_: int, as_json: bool, out_file: str | None) -> None:
    from nexusd.bench import headofline

    pairs = requests_ if ctx.get_parameter_source("requests_") == click.core.ParameterSource.COMMANDLINE else 20
    try:
        out = headofline.run(pairs=pairs)
    except (OSError, RuntimeError, FileNotFoundError) as exc:
        click.echo(f"nexusctl bench: {exc}", err=True)
        sys.exit(1)
    _emit(out, headofline.render(out), as_json, out_file)


def register(group: click.Group) -> None:
    """Attach ``bench`` to nexusctl."""
    group.add_command(bench)
