"""``nexusctl policy validate``, ``nexusctl rules list|add|remove``, ``nexusctl trust add|remove|list``.

``policy validate`` works without a daemon (it parses the files itself, as CI would); rules and trust
go through the daemon so it stays the one writer of learned.toml and trust.toml and reloads at once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from nexusd import locations


def _client(ctx: click.Context) -> Any:
    from nexusd.client import Client

    sock = (ctx.find_root().obj or {}).get("socket")
    return Client(socket_path=sock, role="admin", name="nexusctl")


def _call(ctx: click.Context, msg: Any) -> Any:
    from nexusd.client import ClientError, NexusClientError

    try:
        with _client(ctx) as c:
            return c.call(msg)
    except ClientError as e:
        click.echo(f"nexusctl: refused: {e}", err=True)
        sys.exit(1)
    except NexusClientError as e:
        click.echo(f"nexusctl: {e}", err=True)
        sys.exit(2)


def _workspace(path: str) -> str:
    from nexusd.policy.gate import workspace_of
    from nexusd.protocol import CallInfo

    return workspace_of(CallInfo(provider="other", session="cli", tool="x", input={}, cwd=os.path.abspath(path)))


@click.group("policy")
def policy_group() -> None:
    """Policy files."""


@policy_group.command("validate")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--workspace", "-w", default=".", show_default=True, help="Also check this workspace's project layer.")
def validate(file: Path | None, workspace: str) -> None:
    """Check policy files without a daemon: FILE alone, or every layer nexusd would load."""
    from nexusd.policy.loader import parse_claude_settings, parse_policy
    from nexusd.policy.store import PolicyStore

    errors: list[str] = []
    warnings: list[str] = []
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            click.echo(f"{file}: cannot read: {e}", err=True)
            sys.exit(1)
        resolved = file.resolve()
        if file.suffix == ".json":
            layer = parse_claude_settings(text, resolved, layer="claude")
        else:
            layer = parse_policy(text, resolved, layer="file")
        errors, warnings = layer.errors, layer.warnings
        n = len(layer.rules)
    else:
        store = PolicyStore(
            config_dir=locations.config_dir(), state_dir=locations.state_dir(), managed_dir=locations.MANAGED_POLICY
        )
        errors = list(store.load())
        pol = store.policy_for(_workspace(workspace))
        errors += [e for e in store.errors if e not in errors]
        warnings = list(dict.fromkeys([*store.warnings, *pol.warnings]))
        n = len(pol.rules)
        for s in store.sources():
            click.echo(f"{s.layer:15} {s.path}  {'ok' if s.loaded else s.state()}")
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    for text in errors:
        click.echo(f"error: {text}", err=True)
    if errors:
        sys.exit(1)
    click.echo(f"ok: {n} rule(s)")


@policy_group.command("paths")
@click.option("--workspace", "-w", default=".", show_default=True, help="Also name this workspace's project files.")
def paths(workspace: str) -> None:
    """Where every policy layer lives on this machine, in precedence order, and whether it exists.

    The daemon reloads by itself when one of the global files changes; project files are read again on the
    next call in their workspace.
    """
    from nexusd import locations
    from nexusd.policy.store import PolicyStore

    store = PolicyStore(
        config_dir=locations.config_dir(), state_dir=locations.state_dir(), managed_dir=locations.MANAGED_POLICY
    )
    store.load()
    for layer, path in store.layer_files():
        click.echo(f"{layer:<15} {path}{'' if path.exists() else '  (none)'}")
    ws = Path(_workspace(workspace))
    for layer, rel in store.project_files():
        f = ws / rel
        click.echo(f"{layer:<15} {f}{'' if f.exists() else '  (none)'}")


@click.group("rules", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (with no subcommand).")
@click.pass_context
def rules_group(ctx: click.Context, as_json: bool) -> None:
    """Show, add and remove rules (added rules go to learned.toml); with no subcommand, list them."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(rules_list, as_json=as_json)


@rules_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def rules_list(ctx: click.Context, as_json: bool) -> None:
    """Every rule in force, with its layer and source (file:line)."""
    import msgspec

    from nexusd import protocol as p

    reply = _call(ctx, p.Rules())
    if as_json:
        click.echo(json.dumps(msgspec.to_builtins(reply.rules), indent=2))
        return
    for r in reply.rules:
        line = f"{r.kind:5} {r.rule}  [{r.layer}] {r.origin}"
        if r.warning:
            line += f"  (warning: {r.warning})"
        click.echo(line)
    if not reply.rules:
        click.echo("no rules: the built-in default applies (reads inside the workspace allowed, the rest asked)")


@rules_group.command("add", short_help="Add RULE as KIND (allow, ask, deny) to learned.toml.")
@click.argument("kind", type=click.Choice(["allow", "ask", "deny"]))
@click.argument("rule")
@click.pass_context
def rules_add(ctx: click.Context, kind: str, rule: str) -> None:
    """Add RULE as KIND (allow, ask, deny) to learned.toml, for example:

    nexusctl rules add allow 'Bash(npm run test *)'
    """
    from nexusd import protocol as p

    _call(ctx, p.RuleChange(action="add", kind=kind, rule=rule))  # type: ignore[arg-type]
    click.echo(f"added {kind} {rule}")


@rules_group.command("remove", short_help="Remove a learned rule: [KIND] RULE.")
@click.argument("words", nargs=-1, required=True, metavar="[KIND] RULE")
@click.pass_context
def rules_remove(ctx: click.Context, words: tuple[str, ...]) -> None:
    """Remove a learned RULE. KIND (allow, ask, deny) is needed only when the same rule text was learned
    under more than one kind; otherwise it is looked up."""
    from nexusd import protocol as p

    kinds = ("allow", "ask", "deny")
    if len(words) == 2 and words[0] in kinds:
        kind, rule = words
    elif len(words) == 1:
        rule = words[0]
        learned = [r.kind for r in _call(ctx, p.Rules()).rules if r.layer == "learned" and r.rule == rule]
        if not learned:
            raise click.ClickException(f"{rule!r} is not a learned rule (see `nexusctl rules list`)")
        if len(set(learned)) > 1:
            raise click.ClickException(f"{rule!r} is learned as {', '.join(sorted(set(learned)))}: name the kind")
        kind = learned[0]
    else:
        raise click.UsageError("give RULE, or KIND RULE (quote the rule: 'Bash(npm run *)')")
    _call(ctx, p.RuleChange(action="remove", kind=kind, rule=rule))  # type: ignore[arg-type]
    click.echo(f"removed {kind} {rule}")


@click.group("trust")
def trust_group() -> None:
    """Folder trust: whether a workspace's own policy (allow rules, hooks, modes) applies."""


@trust_group.command("add")
@click.argument("path", default=".", type=click.Path(exists=True, file_okay=False))
@click.pass_context
def trust_add(ctx: click.Context, path: str) -> None:
    """Trust the workspace containing PATH (its git root, else PATH)."""
    from nexusd import protocol as p

    ws = _workspace(path)
    _call(ctx, p.TrustChange(action="add", path=ws))
    click.echo(f"trusted {ws}")


@trust_group.command("remove")
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.pass_context
def trust_remove(ctx: click.Context, path: str) -> None:
    """Distrust the workspace containing PATH."""
    from nexusd import protocol as p

    ws = _workspace(path) if os.path.isdir(path) else os.path.abspath(path)
    _call(ctx, p.TrustChange(action="remove", path=ws))
    click.echo(f"no longer trusted: {ws}")


@trust_group.command("list")
@click.pass_context
def trust_list(ctx: click.Context) -> None:
    """Trusted workspaces."""
    from nexusd import protocol as p

    reply = _call(ctx, p.Rules())
    for t in reply.trusted:
        click.echo(t)
    if not reply.trusted:
        click.echo(
            "no trusted workspaces: project policies contribute only restrictions "
            "(trust one with `nexusctl trust add DIR`)"
        )


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
    group.add_command(policy_group)
    group.add_command(rules_group)
    group.add_command(trust_group)
