"""``nexusctl audit verify``: check the audit trail's hash chain (nexusd/daemon/auditchain.py).

Reads the files, so it works without a daemon; with one running (and no ``--file``), it also checks that the
live file still holds every line the daemon has written (a tail cut since the last checkpoint).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from nexusd.cli.ctl_daemon import EXIT_OK, EXIT_USAGE, _fail, _json, audit

EXIT_TAMPERED = 9  # audit verify: the chain is broken, a file is missing or truncated


@audit.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--offline", is_flag=True, help="Do not ask the running daemon for its chain head.")
@click.pass_context
def verify(ctx: click.Context, as_json: bool, offline: bool) -> None:
    """Check the audit trail's hash chain: every line must carry the hash of the one before, and the files
    must match the chain checkpoint (<audit>.chain) and the running daemon's head.

    Prints the first place where the chain breaks (an edited, removed or inserted line; a truncated tail; lines
    appended after the daemon's last write; a torn line nobody sealed; a file missing, swapped or replaced) and
    exits 9 when it finds any; 0 when the trail is whole.
    """
    from nexusd import locations
    from nexusd.daemon.audit import DEFAULT_KEEP
    from nexusd.daemon.auditchain import verify as check

    given: Path | None = (ctx.obj or {}).get("audit_file")
    # A daemon writing while we read can make the tail look wrong for a moment (a line written between its
    # status and our scan): a tail problem is looked at again, up to 5 times; a forged or cut tail stays.
    for attempt in range(5):
        path, live, where = given, None, "files only"
        if path is None and not offline:
            live_path, live = _live(ctx)
            if live is not None:
                path, where = live_path, "files and the running daemon's head"
            else:
                where = "files only (nexusd is not running)"
        path = path or locations.state_dir() / locations.AUDIT_NAME
        rep = check(path, DEFAULT_KEEP, live)
        if rep.ok or not rep.tail or attempt == 4:
            break
        time.sleep(0.3)
    if as_json:
        _json(
            {
                "ok": rep.ok,
                "file": str(path),
                "checked": where,
                "files": rep.files,
                "lines": rep.lines,
                "problems": rep.problems,
                "notes": rep.notes,
            }
        )
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


EXIT_NOT_FOUND = 7  # explain: no audit record with that id (as answer's unknown request)


@click.command()
@click.argument("audit_id")
@click.option("--json", "as_json", is_flag=True, help="Print the audit record (with its trace) as JSON.")
@click.option(
    "--file", "path", type=click.Path(dir_okay=False, path_type=Path), help="Audit file (default: state dir)."
)
def explain(audit_id: str, as_json: bool, path: Path | None) -> None:
    """Why a past decision came out as it did: every step that produced it (the engine's decision order, the
    gate's sandbox step, the daemon's own steps: no UI connected, a limit reached, waiting for a person, the
    answer, a sandbox wrap), with each rule's policy file and line.

    AUDIT_ID is the record's id (`nexusctl audit --json` shows it) or any unique prefix of it.
    Exit 0 found, 7 no such record, 2 an ambiguous prefix.
    """
    from nexusd import locations
    from nexusd.daemon.audit import DEFAULT_KEEP, find_records

    if len(audit_id) < 4:
        _fail(EXIT_USAGE, "give at least 4 characters of the audit id")
    path = path or locations.state_dir() / locations.AUDIT_NAME
    found = find_records(path, audit_id, DEFAULT_KEEP)
    if not found:
        _fail(EXIT_NOT_FOUND, f"no audit record with an id starting {audit_id!r} in {path} (or its rotations)")
    if len({r.id for r in found}) > 1:
        _fail(EXIT_USAGE, f"{audit_id!r} is ambiguous: {', '.join(r.id[:16] for r in found)} ...")
    rec = found[0]
    if as_json:
        _json(rec)
        sys.exit(EXIT_OK)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.time))
    click.echo(f"{rec.id}  {when}  {rec.event}")
    click.echo(
        f"  call:     {rec.provider} session {rec.session}: {rec.tool} {rec.summary}"
        + (f"  (in {rec.cwd})" if rec.cwd else "")
    )
    click.echo(f"  decision: {rec.decision} ({rec.source}): {rec.reason}")
    if rec.rule:
        click.echo(f"  rule:     {rec.rule}  from {rec.rule_origin or 'unknown'}")
    if rec.answered_by:
        click.echo(f"  answered: by {rec.answered_by} (pid {rec.answer_pid}), scope {rec.scope or 'once'}")
    if not rec.trace:
        click.echo("  trace:    none recorded (a record written before provenance was kept)")
    else:
        click.echo("  trace:")
        for i, step in enumerate(rec.trace, 1):
            detail = f" — {step.detail}" if step.detail else ""
            click.echo(f"    {i:2}. {step.step}: {step.outcome}{detail}")
    sys.exit(EXIT_OK)


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
    """``verify`` is attached to the ``audit`` group at import; ``explain`` is a command of its own."""
    group.add_command(explain)
