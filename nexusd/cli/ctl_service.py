"""``nexusctl service install|uninstall|status``: run nexusd as a user service (systemd or launchd)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

MANAGER_OPTIONS = [
    click.option("--systemd", "manager", flag_value="systemd", help="systemd user units (default on Linux)."),
    click.option("--launchd", "manager", flag_value="launchd", help="launchd LaunchAgent (default on macOS)."),
]


def _manager_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(MANAGER_OPTIONS):
        fn = opt(fn)
    return fn


def _echo(line: str) -> None:
    click.echo(line)


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
    group.add_command(service)


@click.group()
def service() -> None:
    """Run nexusd as a user service: started on the first connection, restarted when it fails."""


@service.command()
@_manager_options
@click.option("--dry-run", is_flag=True, help="Print every step and file; change nothing.")
@click.option("--nexusd", "nexusd_path", help="The nexusd executable (default: the one beside this nexusctl).")
@click.pass_context
def install(ctx: click.Context, manager: str | None, dry_run: bool, nexusd_path: str | None) -> None:
    """Write the units (or the LaunchAgent) with the absolute path of nexusd, then enable and start the socket."""
    from nexusd import locations
    from nexusd.service import installer, launchd, systemd

    manager = manager or installer.default_manager()
    try:
        nexusd = installer.find_nexusd(nexusd_path)
        plan = installer.plan_install(manager, nexusd)
    except (installer.StepFailed, ValueError) as e:
        raise click.ClickException(str(e)) from e
    title = "systemd user units" if manager == "systemd" else "a launchd agent"
    _echo(f"Installing nexusd as {title}{' (dry run: nothing is changed)' if dry_run else ''}")
    _echo(f"  nexusd: {nexusd}")
    service_socket = (
        f"{os.environ.get('XDG_RUNTIME_DIR') or '$XDG_RUNTIME_DIR'}/nexus/nexusd.sock"
        if manager == "systemd"
        else str(launchd.socket_path(installer.home_dir(os.environ)))
    )
    _echo(f"  socket: {service_socket}")
    for w in installer.nexusd_warnings(nexusd):
        _echo(f"  warning: {w}")
    client_socket = ctx.obj.get("socket") if ctx.obj else None
    if client_socket and os.path.abspath(client_socket) != os.path.abspath(service_socket):
        _echo(f"  warning: NEXUS_SOCKET/--socket is {client_socket}; clients using it will not reach the service")
    if manager == "systemd" and not dry_run and not (systemd.unit_dir() / systemd.SOCKET_NAME).exists():
        _warn_running_daemon(locations.socket_path(None))
    ok = installer.run_plan(plan, _echo, dry_run=dry_run)
    if ok and not dry_run:
        _echo("Done. The daemon starts on the first connection; `nexusctl service status` shows it.")
    if not ok:
        sys.exit(1)


def _warn_running_daemon(path: os.PathLike[str]) -> None:
    """A daemon started by hand would lose its socket file to systemd's (its clients would move over)."""
    from nexusd.client import Client, NexusClientError

    try:
        with Client(path, role="admin", name="nexusctl service install", timeout=2.0) as c:
            pid = c.status().pid
    except NexusClientError:
        return
    _echo(f"  warning: a nexusd started by hand is running on {path} (pid {pid}); stop it: kill {pid}")


@service.command()
@_manager_options
@click.option("--dry-run", is_flag=True, help="Print every step; change nothing.")
def uninstall(manager: str | None, dry_run: bool) -> None:
    """Stop and disable the service, then remove its files."""
    from nexusd.service import installer

    manager = manager or installer.default_manager()
    plan = installer.plan_uninstall(manager)
    _echo(f"Removing the nexusd {manager} service{' (dry run: nothing is changed)' if dry_run else ''}")
    if not installer.run_plan(plan, _echo, dry_run=dry_run):
        sys.exit(1)
    if not dry_run:
        _echo("Done: the service is stopped and its files are removed.")


@service.command()
@_manager_options
@click.pass_context
def status(ctx: click.Context, manager: str | None) -> None:
    """What is installed, what the service manager says, and whether the daemon answers (exit 1 if not)."""
    from nexusd import locations
    from nexusd.service import installer
    from nexusd.service import status as service_status

    manager = manager or installer.default_manager()
    sock = locations.socket_path(ctx.obj.get("socket") if ctx.obj else None)
    if not service_status.report(manager, sock, _echo):
        sys.exit(1)
