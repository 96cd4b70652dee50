"""``nexusctl audit verify``: check the audit trail's hash chain (nexusd/daemon/auditchain.py).

Reads the files, so it works without a daemon; with one running (and no ``--file``), it also checks that the
live file still holds every line the daemon has written (a tail cut since the last checkpoint).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nexusd.cli.ctl_daemon import EXIT_OK, _json, audit

EXIT_TAMPERED = 9  # audit verify: the chain is broken, a file is missing or truncated


@audit.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--offline", is_flag=True, help="Do not ask the running daemon for its chain head.")
@click.pass_context
def verify(ctx: click.Context, as_json: bool, offline: bool) -> None:
    """Check the audit trail's hash chain: every line must carry the hash of the one before, and the files
    must match the chain checkpoint (<audit>.chain) and the running daemon's head.

    Prints the first place where the chain breaks (an edited, removed or inserted line; a truncated tail; a
    file missing, swapped or replaced) and exits 9 when it finds any; 0 when the trail is whole.
    """
    from nexusd import locations
    from nexusd.daemon.audit import DEFAULT_KEEP
    from nexusd.daemon.auditchain import verify as check

    path: Path | None = (ctx.obj or {}).get("audit_file")
    live: tuple[str, int] | None = None
    where = "files only"
    if path is None and not offline:
        live_path, live = _live(ctx)
        if live is not None:
            path, where = live_path, "files and the running daemon's head"
        else:
            where = "files only (nexusd is not running)"
    path = path or locations.state_dir() / locations.AUDIT_NAME
    rep = check(path, DEFAULT_KEEP, live)
    if as_json:
        _json({"ok": rep.ok, "file": str(path), "checked": where, "files": rep.files, "lines": rep.lines,
               "problems": rep.problems, "notes": rep.notes})
    else:
        for note in rep.notes:
            click.echo(f"note: {note}")
        if rep.ok:
            click.echo(f"audit chain whole: {rep.lines} lines in {rep.files} file(s) ({where}): {path}")
        else:
            click.echo(f"AUDIT CHAIN BROKEN at {rep.problems[0]}")
            for extra in rep.problems[1:]:
                click.echo(f"  also: {extra}")
    sys.exit(EXIT_OK if rep.ok else EXIT_TAMPERED)


def _live(ctx: click.Context) -> tuple[Path | None, tuple[str, int] | None]:
    """The running daemon's audit file and chain head, or (None, None) when none answers."""
    from nexusd.client import Client, ClientError

    sock = (ctx.find_root().obj or {}).get("socket")
    try:
        with Client(socket_path=sock, role="admin", name="nexusctl", timeout=5.0) as c:
            st = c.status()
    except (ClientError, OSError, Exception):  # any failure: the files are still checked, and we say so
        return None, None
    if st.audit_head is None or st.audit_path is None:
        return None, None
    return Path(st.audit_path), (st.audit_head, st.audit_lines)


def register(group: click.Group) -> None:
    """``verify`` is attached to the ``audit`` group at import; nothing more to add."""
