"""``nexusctl doctor``: is every installed hook still able to run, and is the daemon there to answer it?

A hook command names an interpreter and a file by absolute path. When the venv behind them is removed or
moved, the agent can no longer start the hook, and some agents then let the call run (Claude Code without
``onFailure``, Gemini CLI on exit 1, Codex without ``|| exit 2``): the gate is off and nobody is told. So the
doctor runs each installed command for real (``--help``: it starts the interpreter and imports the hook,
touching no agent and no daemon) and says which one no longer works and what to do about it.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import click
from nexus_clients import agent_settings as settings

AGENTS = ("claude", "gemini", "codex", "cursor", "copilot", "opencode")
RUN_TIMEOUT_S = 30.0  # a cold interpreter on a loaded machine; the hook itself answers --help at once


def hook_argv(command: str) -> list[str]:
    """The hook's own argv from an installed command line (``… || exit 2`` is the shell's, not the hook's)."""
    words = shlex.split(command)
    if "||" in words:
        words = words[: words.index("||")]
    return words


def run_check(command: str) -> str | None:
    """None when the installed command starts and answers ``--help`` as nexus-hook; else what is wrong."""
    try:
        argv = hook_argv(command)
    except ValueError as exc:
        return f"the command cannot be read ({exc})"
    if not argv:
        return "the command is empty"
    exe = Path(argv[0])
    if not exe.exists():
        return f"{exe} does not exist (a moved or removed venv?)"
    for word in argv[1:]:
        if word.endswith(".py") and not Path(word).exists():
            return f"{word} does not exist (a moved or removed install?)"
    try:
        proc = subprocess.run([*argv, "--help"], capture_output=True, timeout=RUN_TIMEOUT_S, check=False)
    except OSError as exc:
        return f"it cannot start: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"it did not answer --help within {RUN_TIMEOUT_S:g} s"
    if proc.returncode != 0 or b"usage: nexus-hook" not in proc.stdout:
        detail = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()
        return f"it exited {proc.returncode}" + (f": {detail[-1][:200]}" if detail else "")
    return None


def _daemon(ctx: click.Context) -> str | None:
    from nexusd.client import Client, NexusClientError

    try:
        with Client(socket_path=(ctx.obj or {}).get("socket"), role="ui", name="nexusctl doctor", timeout=5.0):
            return None
    except NexusClientError as exc:
        return exc.describe("nexusctl")


@click.command()
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also check the hooks installed in this project's settings.",
)
@click.pass_context
def doctor(ctx: click.Context, project: Path | None) -> None:
    """Check that every installed agent hook still runs, and that nexusd answers.

    Exit 0 when all is well, 1 when a hook can no longer run (reinstall it with `nexusctl install AGENT`),
    3 when the daemon is not reachable (every gated call is then denied)."""
    problems = 0
    checked = 0
    scopes: list[Path | None] = [None] + ([project] if project is not None else [])
    for scope in scopes:
        for agent in AGENTS:
            try:
                path, commands = settings.installed_hook_commands(agent, scope)  # type: ignore[arg-type]
            except settings.SettingsError as exc:
                click.echo(f"{agent}: cannot check: {exc}")
                problems += 1
                continue
            for command in commands:
                checked += 1
                wrong = run_check(command)
                if wrong is None:
                    click.echo(f"{agent}: ok ({path}): {command}")
                    continue
                problems += 1
                where = f" --project {scope}" if scope is not None else ""
                click.echo(
                    f"{agent}: BROKEN ({path}): {wrong}.\n"
                    "  The agent cannot start this hook, so its calls may run ungated. "
                    f"Fix: nexusctl install {agent}{where}"
                )
    if not checked:
        click.echo("No agent has nexusd's hook installed (nexusctl install claude|gemini|codex|…).")
    unreachable = _daemon(ctx)
    if unreachable is not None:
        click.echo(f"daemon: {unreachable}: every gated call is denied until it runs (scripts/run-daemon, or")
        click.echo("  nexusctl service install).")
    else:
        click.echo("daemon: answering.")
    ctx.exit(1 if problems else 3 if unreachable is not None else 0)


def register(group: Any) -> None:
    """Attach ``doctor`` to nexusctl."""
    group.add_command(doctor)
