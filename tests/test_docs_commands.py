"""Every command the README and docs/ show in a shell block is a command our programs accept.

A user copies these lines first; a renamed subcommand, a dropped option or a program that is not on PATH
after the README's setup is a first-hour trip (issue "first hour"). Each line is split on shell operators
and every invocation of our programs is parsed by that program's own parser (click's for nexusd and
nexusctl, the hook's and the bridge's hand-rolled ones, argparse for the TUI) without running it; scripts
and benchmark files must exist.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OURS = ("nexusctl", "nexusd", "nexus-hook", "nexus-tui", "nexus-mcp", "nexus-web", "nexus-acp")
BLOCK = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.M | re.S)
OPERATORS = {"|", "||", "&&", ";", "&"}


def documented_lines() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for block in BLOCK.findall(doc.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    yield f"{doc.name}: {line.strip()}", line


def invocations(line: str) -> Iterator[list[str]]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for token in lexer:
        if token in OPERATORS:
            if words:
                yield words
            words = []
        else:
            words.append(token)
    if words:
        yield words


LINES = list(documented_lines())


def _remaining(ctx: click.Context) -> list[str]:
    """The subcommand and its words, as a group left them (click 8.2 moved them to a private name)."""
    protected = ctx.__dict__.get("_protected_args", ctx.__dict__.get("protected_args", []))
    return [*protected, *ctx.args]


def _click_parse(cmd: click.Command, args: list[str], name: str) -> None:
    """Resolve subcommands and options exactly as click would, without invoking anything."""
    ctx = cmd.make_context(name, list(args), resilient_parsing=False)
    while isinstance(cmd, click.Group) and _remaining(ctx):
        sub_name, *rest = _remaining(ctx)
        sub = cmd.get_command(ctx, sub_name)
        assert sub is not None, f"no such command: {name} {sub_name}"
        cmd, name = sub, f"{name} {sub_name}"
        ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=False)


def check_invocation(words: list[str]) -> bool:
    """True when ``words`` ran one of our programs (and it parsed); False when it is something else."""
    env_prefix = 0
    while env_prefix < len(words) and re.match(r"^[A-Z_][A-Z0-9_]*=", words[env_prefix]):
        env_prefix += 1
    words = words[env_prefix:]
    if not words:
        return False
    prog, args = words[0], words[1:]
    if prog.startswith(("scripts/", "./benchmarks/", "benchmarks/")):
        assert (REPO / prog.removeprefix("./")).is_file(), f"{prog} does not exist"
        return True
    if prog.endswith("/python") and args and args[0].startswith("benchmarks/"):
        assert (REPO / args[0]).is_file(), f"{args[0]} does not exist"
        return True
    name = prog.rsplit("/", 1)[-1]
    if name not in OURS:
        return False
    assert prog == f".venv/bin/{name}", f"{prog}: after the README's setup only .venv/bin/{name} exists"
    if "--help" in args or "-h" in args:
        return True
    if name == "nexusctl":
        from nexusd.cli.ctl import main as ctl

        _click_parse(ctl, args, name)
    elif name == "nexusd":
        from nexusd.cli.daemon_main import main as daemon

        _click_parse(daemon, args, name)
    elif name == "nexus-hook":
        from nexus_clients.hook import parse_args

        parse_args(args, {})
    elif name == "nexus-mcp":
        from nexus_clients.mcp_bridge import parse_args as mcp_args

        mcp_args(args)
    elif name == "nexus-web":
        from nexus_clients.web.app import parse_args as web_args

        web_args(args)  # parses only; exits 2 on a bad line (pytest reports the SystemExit)
    elif name == "nexus-acp":
        from nexus_clients.acp import parse_args as acp_args

        acp_args(args)
    elif name == "nexus-tui":
        import nexus_clients.tui.app as tui

        parsers: list[object] = []
        real = tui.argparse.ArgumentParser.parse_args

        def capture(self, a=None, ns=None):  # parse only: main() would start the app
            parsers.append(real(self, a, ns))
            raise SystemExit(0)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tui.argparse.ArgumentParser, "parse_args", capture)
            with pytest.raises(SystemExit) as exit_:
                tui.main(args)
        assert exit_.value.code == 0 and parsers
    return True


def test_the_docs_show_our_commands():
    assert sum(1 for _, line in LINES for w in invocations(line) if w and w[0].rsplit("/", 1)[-1] in OURS) >= 15


@pytest.mark.parametrize(("where", "line"), LINES, ids=[w[:90] for w, _ in LINES])
def test_documented_command_parses(where: str, line: str) -> None:
    for words in invocations(line):
        try:
            check_invocation(words)
        except click.exceptions.Exit as e:
            assert e.exit_code == 0, where
        except click.ClickException as e:
            pytest.fail(f"{where}\n  {' '.join(words)}\n  {e.format_message()}")
