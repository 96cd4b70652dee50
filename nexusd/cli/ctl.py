"""``nexusctl``: everything a person or a script does with a running daemon.

Command groups live in their own modules (``ctl_*.py``) and register themselves here.
"""

from __future__ import annotations

import click

from nexusd.cli import (
    ctl_audit,
    ctl_bench,
    ctl_daemon,
    ctl_grants,
    ctl_history,
    ctl_install,
    ctl_policy,
    ctl_sandbox,
    ctl_service,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--socket", "socket_path", envvar="NEXUS_SOCKET", help="Daemon socket (default: per-user).")
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
    ctl_bench,
):
    _module.register(main)


if __name__ == "__main__":
    main()
