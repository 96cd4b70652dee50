"""The long-option grammar shared by nexus-hook, nexus-mcp and nexus-acp, and each program's malformed forms."""

from __future__ import annotations

import pytest
from nexus_clients import acp, hook, mcp_bridge
from nexus_clients.options import HelpRequested, OptionError, UnknownArgument, long_options

NAMES = ("--socket", "--timeout")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], []),
        (["--socket", "/s"], [("--socket", "/s")]),
        (["--socket=/s", "--timeout", "5"], [("--socket", "/s"), ("--timeout", "5")]),
        (["--socket=", "--timeout=a=b"], [("--socket", ""), ("--timeout", "a=b")]),
        (["--socket", "--timeout"], [("--socket", "--timeout")]),  # a value is taken as it is
    ],
)
def test_well_formed(argv: list[str], expected: list[tuple[str, str]]) -> None:
    assert long_options(argv, NAMES) == expected


@pytest.mark.parametrize(
    ("argv", "error", "says"),
    [
        (["--bogus"], UnknownArgument, "unknown argument '--bogus'"),
        (["--sock", "/s"], UnknownArgument, "unknown argument '--sock'"),  # no prefix matching
        (["socket"], UnknownArgument, "unknown argument 'socket'"),
        (["-s", "/s"], UnknownArgument, "unknown argument '-s'"),
        (["--socket"], OptionError, "--socket needs a value"),
        (["--timeout", "5", "--socket"], OptionError, "--socket needs a value"),
        (["--help"], UnknownArgument, "unknown argument '--help'"),  # only where the program takes it
    ],
)
def test_malformed(argv: list[str], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        long_options(argv, NAMES)


def test_help_only_before_a_bad_argument() -> None:
    with pytest.raises(HelpRequested):
        long_options(["--socket", "/s", "-h", "--bogus"], NAMES, help_flags=True)
    with pytest.raises(UnknownArgument):
        long_options(["--bogus", "--help"], NAMES, help_flags=True)


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["claude", "--bogus"], "unknown argument"), (["claude", "--timeout"], "--timeout needs a value")],
)
def test_hook_refuses(argv: list[str], says: str) -> None:
    with pytest.raises(hook.UsageError, match=says):
        hook.parse_args(argv, {})


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["--bogus"], "nexus-mcp: unknown argument '--bogus'"), (["--session"], "nexus-mcp: --session needs a value")],
)
def test_mcp_bridge_refuses(argv: list[str], says: str) -> None:
    with pytest.raises(SystemExit, match=says):
        mcp_bridge.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--bogus", "--", "agent"], "nexus-acp: unknown argument '--bogus'"),
        (["--on-no-ui", "--", "agent"], "nexus-acp: --on-no-ui needs a value"),  # '--' ends the bridge's own
        (["--socket", "/s", "--"], "no agent command after --"),
        (["--on-no-ui=maybe", "--", "agent"], "--on-no-ui must be deny or ask"),
        (["agent"], "put the agent command after --"),
    ],
)
def test_acp_refuses(argv: list[str], says: str) -> None:
    with pytest.raises(SystemExit, match=says):
        acp.parse_args(argv)


def test_bridges_print_help(capsys: pytest.CaptureFixture[str]) -> None:
    for parse, argv in ((mcp_bridge.parse_args, ["--help"]), (acp.parse_args, ["-h", "--", "agent"])):
        with pytest.raises(SystemExit) as exit_:
            parse(argv)
        assert exit_.value.code == 0
        assert "usage:" in capsys.readouterr().out
