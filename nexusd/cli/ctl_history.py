"""``nexusctl history`` (past calls that could change a workspace, per session, with what each changed),
``history show ID`` (its diff) and ``rewind ID`` (the workspace as it was before that call). docs/UNDO.md."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import click

from nexusd import protocol as p
from nexusd.cli.ctl_daemon import EXIT_OK, EXIT_REFUSED, _ago, _client, _json

EXIT_PARTIAL = 1  # a rewind that restored some paths and not others (each named)
_MARK = {"create": "+", "restore": "~", "mode": "m", "delete": "-"}


def _counts(e: p.HistoryEntry) -> str:
    if e.tree is None:
        return "NO CHECKPOINT"
    return f"+{e.added} ~{e.changed} -{e.deleted} files, +{e.plus} -{e.minus} lines"


def _line(e: p.HistoryEntry) -> str:
    what = e.summary.replace("\n", " ")
    if len(what) > 70:
        what = what[:67] + "..."
    kind = "rescue " if e.kind == "rescue" else ""
    return f"{e.id:>6}  {_ago(e.time)}  {kind}{e.tool:10} {what:70}  {_counts(e)}"


def _by_session(entries: Iterable[p.HistoryEntry]) -> dict[tuple[str, str, str], list[p.HistoryEntry]]:
    groups: dict[tuple[str, str, str], list[p.HistoryEntry]] = {}
    for e in entries:
        groups.setdefault((e.workspace, e.session, e.provider), []).append(e)
    return groups


@click.group(invoke_without_command=True)
@click.option("--session", help="Only this agent session.")
@click.option("--workspace", type=click.Path(), help="Only this workspace (a directory).")
@click.option("-n", "limit", default=50, show_default=True, help="The newest N checkpoints.")
@click.option("--files", is_flag=True, help="Also list each call's changed files.")
@click.option("--json", "as_json", is_flag=True, help="One HistoryEntry JSON object per line.")
@click.pass_context
def history(
    ctx: click.Context, session: str | None, workspace: str | None, limit: int, files: bool, as_json: bool
) -> None:
    """Calls that could change a workspace, per session, each with the checkpoint taken before it and
    what it changed (files added ~changed -deleted, +/- lines); a call's changes run from its checkpoint to
    the next one in the workspace, or to the workspace now for the newest.

    `nexusctl history show ID` prints one call's diff; `nexusctl rewind ID` puts the workspace back as it
    was before it.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _client(ctx, timeout=120.0) as c:
        reply: p.HistoryReply = c.call(p.History(session=session, workspace=workspace, limit=limit), timeout=120.0)
    if as_json:
        for e in reply.entries:
            _json(e)
        sys.exit(EXIT_OK)
    if not reply.entries:
        click.echo("no checkpoints")
    for (ws, sid, provider), entries in _by_session(reply.entries).items():
        who = f"session {sid} ({provider})" if sid else "rewinds"
        click.echo(f"{who} in {ws or '?'}")
        for e in entries:
            click.echo(_line(e))
            if e.note:
                click.echo(f"        {e.note}")
            if files:
                for f in e.files:
                    n = "binary" if f.plus is None else f"+{f.plus} -{f.minus}"
                    click.echo(f"        {f.status} {f.path}  {n}")
    sys.exit(EXIT_OK)


@history.command("show")
@click.argument("checkpoint", type=int)
@click.option("--file", "paths", multiple=True, type=click.Path(), help="Only this file or directory (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="The HistoryReply as JSON.")
@click.pass_context
def show(ctx: click.Context, checkpoint: int, paths: tuple[str, ...], as_json: bool) -> None:
    """The diff of call CHECKPOINT: from the checkpoint before it to the next one (or the workspace now)."""
    with _client(ctx, timeout=120.0) as c:
        reply: p.HistoryReply = c.call(p.History(id=checkpoint, diff=True, paths=list(paths)), timeout=120.0)
    if as_json:
        _json(reply)
        sys.exit(EXIT_OK)
    e = reply.entries[0]
    until = f"checkpoint {e.until}" if e.until is not None else "the workspace now"
    click.echo(f"# {e.id} {e.tool}: {e.summary}")
    click.echo(f"# session {e.session} ({e.provider}) in {e.workspace}, {_ago(e.time)}; changes up to {until}")
    if e.note:
        click.echo(f"# {e.note}")
    click.echo(reply.diff or "", nl=False)
    if reply.truncated:
        click.echo("\n# (diff cut: use --file to see one file)")
    sys.exit(EXIT_OK)


@click.command("rewind")
@click.argument("checkpoint", type=int)
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@click.option("--file", "paths", multiple=True, type=click.Path(), help="Only this file or directory (repeatable).")
@click.option("--force", is_flag=True, help="Also overwrite changes made after the call by someone else.")
@click.option("--json", "as_json", is_flag=True, help="The RewindReply as JSON.")
@click.pass_context
def rewind(
    ctx: click.Context, checkpoint: int, dry_run: bool, paths: tuple[str, ...], force: bool, as_json: bool
) -> None:
    """Put the workspace (or --file paths in it) back as it was before call CHECKPOINT.

    A rescue checkpoint is taken first: the rewind itself can be rewound (its id is printed). Refused,
    unless --force, when it would overwrite files changed after the call by someone other than the gated
    calls (they are named). A person's act: refused from inside an agent's process tree.

    Exit 0 done (or nothing to do), 1 some paths could not be restored, 4 refused.
    """
    import os

    absolute = [os.path.abspath(x) for x in paths]
    with _client(ctx, timeout=600.0) as c:
        reply: p.RewindReply = c.call(
            p.Rewind(id=checkpoint, dry_run=dry_run, force=force, paths=absolute), timeout=600.0
        )
    if as_json:
        _json(reply)
    else:
        for action, path in reply.changes:
            click.echo(f"{_MARK.get(action, '?')} {action:8} {path}")
        for path in reply.conflicts:
            click.echo(f"! changed after the call by someone else: {path}")
        for err in reply.errors:
            click.echo(f"error: {err}", err=True)
        click.echo(reply.detail)
    if not reply.ok:
        sys.exit(EXIT_PARTIAL if reply.errors else EXIT_REFUSED)
    sys.exit(EXIT_OK)


def register(group: click.Group) -> None:
    group.add_command(history)
    group.add_command(rewind)
