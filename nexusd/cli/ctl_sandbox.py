"""``nexusctl sandbox probe``, ``nexusctl sandbox status`` and ``nexusctl run``."""

from __future__ import annotations

import shlex
import sys

import click
import msgspec

from nexusd.protocol import Probe, ProbeReply, SandboxPlanReply, SandboxProbe


def format_probe(probe: SandboxProbe, where: str) -> str:
    lines = [
        f"sandbox ({where}): {'available' if probe.available else 'UNAVAILABLE'}",
        f"  platform:  {probe.platform}",
    ]
    if probe.backend:
        lines.append(f"  backend:   {probe.backend}")
    if probe.container:
        lines.append(f"  container: {probe.container}")
    for name, outcome in probe.checks.items():
        lines.append(f"  check {name}: {outcome}")
    if probe.reason:
        lines.append(f"  {'reason' if not probe.available else 'note'}: {probe.reason}")
    return "\n".join(lines)


@click.group("sandbox")
def sandbox_group() -> None:
    """The sandbox shell commands run in."""


@sandbox_group.command("probe")
@click.option("--refresh", is_flag=True, help="Make the daemon probe again (it caches its probe for its life).")
@click.option("--here", is_flag=True, help="Probe in this process's own context instead of asking the daemon.")
@click.option("--json", "as_json", is_flag=True, help="Print the probe as JSON.")
@click.pass_context
def probe_cmd(ctx: click.Context, refresh: bool, here: bool, as_json: bool) -> None:
    """What the sandbox can do here; exit 0 when a sandbox is available, 1 when not."""
    if here:
        from nexusd.sandbox.probe import probe

        result, where = probe(), "probed here"
    else:
        from nexusd.client import Client, NexusClientError

        try:
            with Client(socket_path=(ctx.obj or {}).get("socket"), role="ui", name="nexusctl") as c:
                reply = c.call(Probe(refresh=refresh))
        except NexusClientError as e:
            raise click.ClickException(f"{e} (use --here to probe without the daemon)") from None
        if not isinstance(reply, ProbeReply):
            raise click.ClickException(f"unexpected reply {type(reply).__name__}")
        result, where = reply.probe, "the daemon's view"
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        click.echo(format_probe(result, where))
    ctx.exit(0 if result.available else 1)


@sandbox_group.command("status")
@click.option("--workspace", type=click.Path(file_okay=False), help="The workspace (default: here).")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's plan for the workspace as JSON.")
@click.pass_context
def status_cmd(ctx: click.Context, workspace: str | None, as_json: bool) -> None:
    """Whether agents' shell calls in a workspace run sandboxed, are auto-allowed, and what they can reach.

    Exit 0 when agents' shell calls there run sandboxed, 1 when they do not (or would be refused).
    """
    import os

    from nexusd.client import Client, NexusClientError
    from nexusd.protocol import SandboxPlan

    ws = os.path.abspath(workspace or os.getcwd())
    try:
        with Client(socket_path=(ctx.obj or {}).get("socket"), role="ui", name="nexusctl") as c:
            plan = c.call(SandboxPlan(command="true", cwd=ws, workspace=ws))
    except NexusClientError as e:
        raise click.ClickException(str(e)) from None
    if not isinstance(plan, SandboxPlanReply):
        raise click.ClickException(f"unexpected reply {type(plan).__name__}")
    if as_json:
        click.echo(msgspec.json.encode(plan).decode())
        ctx.exit(0 if plan.transparent and plan.allowed else 1)
    lines = [
        f"sandbox for {ws}:",
        f"  agents' shell calls: {_mode(plan)}",
        f"  auto-allow if sandboxed: {'on' if plan.auto_allow else 'off'}",
        f"  backend: {plan.backend or 'none'}" + ("" if plan.allowed else " (commands are refused)"),
        f"  network: {plan.network}",
        f"  host Unix sockets: {plan.unix_sockets}",
        f"  nested protected paths: {len(plan.protected_before)} bound read-only",
    ]
    if plan.reason:
        lines.append(f"  note: {plan.reason}")
    click.echo("\n".join(lines))
    ctx.exit(0 if plan.transparent and plan.allowed else 1)


def _mode(plan: SandboxPlanReply) -> str:
    if plan.transparent:
        return "run sandboxed (sandbox-first)"
    if plan.backend is None and "no sandbox is available" in (plan.reason or ""):
        return "NOT sandboxed: no working sandbox here, the gate alone decides (gate-only)"
    return "NOT sandboxed (off here: [sandbox] enabled = false, or enabled_platforms)"


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--cwd", type=click.Path(file_okay=False), help="Run in this directory (default: here).")
@click.option("--workspace", type=click.Path(file_okay=False), help="The writable root (default: the cwd).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def run_cmd(ctx: click.Context, cwd: str | None, workspace: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND sandboxed; its output and exit code pass through (126: refused, with the reason)."""
    from nexusd.sandbox.runner import run

    sys.stdout.flush()
    ctx.exit(run(shlex.join(command), cwd=cwd, workspace=workspace, socket=(ctx.obj or {}).get("socket")))


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
    group.add_command(sandbox_group)
    group.add_command(run_cmd)
