"""``nexusctl install|uninstall AGENT``: wire the agents' hooks (Claude's prompt tool, OpenCode's plugin) to nexusd.

The merging itself lives in ``nexus_clients.agent_settings`` (pure transforms, atomic writes, backups);
this module is the command-line shell around it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from nexus_clients import agent_settings as settings

AGENTS = click.Choice(["claude", "gemini", "codex", "cursor", "copilot", "opencode"])


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
    group.add_command(install)
    group.add_command(uninstall)


def _scope(user: bool, project: Path | None) -> Path | None:
    if user and project is not None:
        raise click.UsageError("--user and --project are exclusive")
    return project.resolve() if project is not None else None


def _run(changes: list[settings.Change], dry_run: bool, *, uninstall: bool = False, stop: Path | None = None) -> bool:
    """Apply (or show) the changes, saying per file what happened; True when anything changed."""
    if not any(c.changed for c in changes):
        click.echo("Nothing to change.")
        return False
    for change in changes:
        if not change.changed:
            click.echo(f"{change.path}: unchanged")
            continue
        if dry_run:
            click.echo(change.diff(), nl=False)
            continue
        backup = settings.apply(change)
        note = f" (backup: {backup})" if backup else ""
        if change.new_text is None:
            what = "removed (nothing else was in it)"
        elif change.old_text is None:
            what = "created"
        else:
            what = "updated"
        if uninstall:
            gone = settings.tidy_after_uninstall(change, stop=stop)
            backups = sum(1 for g in gone if ".nexus-backup-" in g.name)
            dirs = [str(g) for g in gone if ".nexus-backup-" not in g.name]
            note = f" ({backups} backup{'s' if backups != 1 else ''} of ours removed)" if backups else ""
            if dirs:
                note += f"; empty {', '.join(dirs)} removed"
        click.echo(f"{change.path}: {what}{note}")
    if dry_run:
        click.echo("Dry run: nothing was written.")
    return True


_scope_options = [
    click.option("--user", is_flag=True, help="The user's settings (the default)."),
    click.option(
        "--project",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        help="A project's settings (DIR/.claude/settings.json, DIR/.gemini/settings.json, DIR/.codex/config.toml, "
        "DIR/.cursor/hooks.json, DIR/.github/hooks/nexusd.json, DIR/.opencode/plugins/nexusd.js).",
    ),
    click.option("--dry-run", is_flag=True, help="Print the change as a diff; write nothing."),
]


def _with_scope(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_scope_options):
        fn = opt(fn)
    return fn


@click.command()
@click.argument("agent", type=AGENTS)
@_with_scope
@click.option(
    "--mcp",
    is_flag=True,
    help=f"Claude only: also register nexus-mcp (for --permission-prompt-tool {settings.PROMPT_TOOL}).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(5, 3600),
    default=settings.HOOK_TIMEOUT_S,
    show_default=True,
    help=f"Seconds the hook waits for a decision (the agent is told {settings.AGENT_TIMEOUT_S} s).",
)
@click.option(
    "--claude-version",
    metavar="X.Y.Z",
    help="Claude only: the Claude Code version to write for (default: what `claude --version` says).",
)
def install(
    agent: str, user: bool, project: Path | None, dry_run: bool, mcp: bool, timeout: float, claude_version: str | None
) -> None:
    """Merge nexusd's hook into AGENT's settings, keeping everything else (a backup is kept).

    Files: claude ~/.claude/settings.json, gemini ~/.gemini/settings.json, codex $CODEX_HOME/config.toml
    (default ~/.codex; trusted for Codex's /hooks review), cursor ~/.cursor/hooks.json, copilot
    ~/.copilot/hooks/nexusd.json, opencode ~/.config/opencode/plugins/nexusd.js (with --project, the
    project's own)."""
    if timeout >= settings.AGENT_TIMEOUT_S:
        raise click.UsageError(f"--timeout must stay below the agent's {settings.AGENT_TIMEOUT_S} s hook timeout")
    block = False
    if agent == "claude":
        block = _claude_on_failure(claude_version)
    try:
        changes = settings.install_changes(
            agent,  # type: ignore[arg-type]
            project=_scope(user, project),
            mcp=mcp,
            timeout=timeout,
            on_failure_block=block,
        )
    except settings.SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    changed = _run(changes, dry_run)
    if agent == "codex" and (warning := settings.codex_hook_command("")[1]):
        click.echo(f"Warning: {warning}", err=True)
    if mcp and not dry_run:
        click.echo(f"Run non-interactive Claude with: claude -p … --permission-prompt-tool {settings.PROMPT_TOOL}")
    if agent == "claude" and changed and not dry_run:
        click.echo(
            "nexusd also applies the permission rules in your Claude Code settings (allow, ask, deny) to every "
            "agent it gates, deny rules first; `[claude] import_settings = false` in nexusd's policy turns that off."
        )
    click.echo(sandbox_first_note())
    if not dry_run:
        _warn_when_no_daemon(click.get_current_context(), agent)


def _warn_when_no_daemon(ctx: click.Context, agent: str) -> None:
    """With no daemon, every call the hook sends is denied (fail closed), even ``ls``: say so, and offer the
    service (issue 38: the install said nothing and the agent could do nothing)."""
    from nexusd import locations
    from nexusd.client import Client, NexusClientError

    sock = locations.socket_path((ctx.find_root().obj or {}).get("socket"))
    try:
        with Client(sock, role="admin", name="nexusctl install", timeout=2.0):
            return
    except NexusClientError as e:
        why = str(e)
    name = {"claude": "Claude Code", "gemini": "Gemini CLI", "codex": "Codex", "cursor": "Cursor"}.get(agent, agent)
    click.echo(
        f"Warning: nexusd is not running ({why}). Until it runs, {name} is denied every tool call, even `ls`.\n"
        "  Run it as a user service (starts now and at login): nexusctl service install\n"
        "  or in a terminal: nexusd (in a checkout: scripts/run-daemon)",
        err=True,
    )
    if (
        sys.stdin.isatty()
        and sys.stderr.isatty()
        and click.confirm("Install and start the user service now?", err=True)
    ):
        from nexusd.cli.ctl_service import install as service_install

        ctx.invoke(service_install, manager=None, dry_run=False, nexusd_path=None)


def sandbox_first_note() -> str:
    """What the agent's shell calls get here: sandbox-first (the default, where the sandbox works, probed
    in this context: the agent's) or gate-only, and the one line that opts out."""
    from nexusd.locations import config_dir
    from nexusd.sandbox.probe import probe

    found = probe()
    policy = config_dir() / "policy.toml"
    if found.available:
        return (
            f"Sandbox-first: the agent's shell calls will run in nexusd's sandbox ({found.backend}): the "
            "workspace writable, credentials hidden, no network; a sandboxed call runs without asking unless "
            "a deny or ask rule, a safety check or an escape needs you. Opt out with one line in "
            f"{policy}: [sandbox] enabled = false"
        )
    return (
        f"No working sandbox here ({found.reason}): the agent's shell calls are decided by the permission "
        "gate alone (gate-only). `nexusctl sandbox probe --here` says why; `nexusctl status` notes it."
    )


def _claude_on_failure(version_text: str | None) -> bool:
    """Whether to write ``"onFailure": "block"``: only for a Claude Code that knows it (2.1.295+). Says so
    either way, because without it a hook that cannot run lets every call through."""
    if version_text is not None:
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version_text.strip())
        if m is None:
            raise click.BadParameter("expected X.Y.Z", param_hint="--claude-version")
        version: tuple[int, int, int] | None = (int(m[1]), int(m[2]), int(m[3]))
    else:
        version = settings.claude_version()
    since = ".".join(map(str, settings.ON_FAILURE_SINCE))
    if version is not None and version >= settings.ON_FAILURE_SINCE:
        click.echo(f"Claude Code {'.'.join(map(str, version))}: a hook that cannot run blocks the call (onFailure).")
        return True
    found = "not found" if version is None else ".".join(map(str, version))
    click.echo(
        f"Warning: Claude Code {found}: onFailure needs {since} or later, so it is not set. If nexus-hook cannot "
        "run (a removed venv, a broken interpreter), Claude Code lets the call through. Upgrade Claude Code "
        "and install again.",
        err=True,
    )
    return False


@click.command()
@click.argument("agent", type=AGENTS)
@_with_scope
def uninstall(agent: str, user: bool, project: Path | None, dry_run: bool) -> None:
    """Remove nexusd's entries from AGENT's settings, leaving everything else as it was."""
    try:
        changes = settings.uninstall_changes(agent, project=_scope(user, project))  # type: ignore[arg-type]
    except settings.SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    _run(changes, dry_run, uninstall=True, stop=_scope(user, project) or Path.home())
