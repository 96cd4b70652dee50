"""``nexusctl``: everything a person or a script does with a running daemon.

Command groups live in their own modules (``ctl_*.py``) and register themselves here.
"""

from __future__ import annotations

import click

from nexusd import __version__
from nexusd.cli import (
    ctl_audit,
    ctl_bench,
    ctl_daemon,
    ctl_doctor,
    ctl_grants,
    ctl_history,
    ctl_install,
    ctl_policy,
    ctl_sandbox,
    ctl_service,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--socket", "socket_path", envvar="NEXUS_SOCKET", help="Daemon socket (default: per-user).")
@click.version_option(__version__, "--version", "-V", prog_name="nexusctl", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, socket_path: str | None) -> None:
    """Talk to the nexusd permission daemon.

    Exit codes: 0 ok/allowed, 1 denied, 2 usage, 3 nexusd unreachable, 4 refused by nexusd, 5 a bad reply,
    6 a person would be asked (check), 7 no such pending request (unknown or already decided), 8 the daemon is
    degraded (status: locked, or its audit log cannot be written), 9 the audit chain is broken (audit verify).
    """
    ctx.obj = {"socket": socket_path}


for _module in (
    ctl_daemon,
    ctl_audit,
    ctl_grants,
    ctl_history,
    ctl_policy,
    ctl_sandbox,
    ctl_service,
    ctl_install,
    ctl_doctor,
    ctl_bench,
):
    _module.register(main)


def _socket_after(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        root = ctx.find_root()
        if root.obj is None:
            root.obj = {}
        root.obj["socket"] = value  # in place: the subcommands' contexts share this dict


def _accept_socket_anywhere(cmd: click.Command) -> None:
    """``--socket`` after the subcommand too (``nexusctl status --socket S``), as people type it; the group's
    callback has run by then, so the later value wins. ``bench`` keeps its own --socket."""
    if cmd.name != "bench" and not any("--socket" in getattr(o, "opts", ()) for o in cmd.params):
        cmd.params.append(
            click.Option(
                ["--socket"], expose_value=False, callback=_socket_after, help="Daemon socket (as before the command)."
            )
        )
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _accept_socket_anywhere(sub)


for _cmd in main.commands.values():
    _accept_socket_anywhere(_cmd)


if __name__ == "__main__":
    main()
