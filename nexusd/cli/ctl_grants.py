"""``nexusctl grants``: every grant in force (timed, session, learned) and ``grants revoke ID``."""

from __future__ import annotations

import sys
import time

import click

from nexusd import protocol as p
from nexusd.cli.ctl_daemon import EXIT_OK, _ago, _client, _json


def _left(expires: float | None) -> str:
    if expires is None:
        return ""
    s = max(0, int(expires - time.time()))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _line(g: p.GrantInfo) -> str:
    where = {
        "session": f"session {g.session}",
        "timed": f"until {_ago(g.expires or 0)} ({_left(g.expires)} left)",
        "learned": g.origin or "learned",
    }[g.scope]
    who = f" by {g.given_by}" if g.given_by else ""
    when = f" at {_ago(g.given_at)}" if g.given_at else ""
    return f"{g.id}  {g.kind:5} {g.rule}  [{g.scope}: {where}]{who}{when}  used {g.uses}x"


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One GrantInfo JSON object per line.")
@click.pass_context
def grants(ctx: click.Context, as_json: bool) -> None:
    """List every grant in force: timed ones (`answer --for`), session ones, learned rules (always/never),
    each with its id, rule, who gave it from which UI, when, its expiry and how often it decided a call.

    `nexusctl grants revoke ID` takes one back.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _client(ctx) as c:
        found = c.grants()
    for g in found:
        if as_json:
            _json(g)
        else:
            click.echo(_line(g))
    if not found and not as_json:
        click.echo("no grants")
    sys.exit(EXIT_OK)


@grants.command("revoke")
@click.argument("grant_id")
@click.pass_context
def revoke(ctx: click.Context, grant_id: str) -> None:
    """Take the grant GRANT_ID back; from the next call on it no longer applies.

    Exit 0 revoked, 7 no such grant in force (as nexusctl answer's unknown request).
    """
    with _client(ctx) as c:
        ack = c.revoke(grant_id)
    click.echo(ack.detail or f"revoked {grant_id}")
    sys.exit(EXIT_OK)


def register(group: click.Group) -> None:
    group.add_command(grants)
