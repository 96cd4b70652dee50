"""Long options (``--name VALUE`` or ``--name=VALUE``) for the bridges and the hook, stdlib only.

The hook is spawned for every tool call, so it cannot pay argparse's import and its exit-2-with-usage
habit; the ACP and MCP bridges share the same small grammar so that each spells its errors the same way.
"""

TYPE_CHECKING = False  # the per-call hook imports this module: no typing at run time
if TYPE_CHECKING:
    from collections.abc import Collection


class OptionError(ValueError):
    """An argument the program does not take, or an option without its value."""


class UnknownArgument(OptionError):
    """An argument the program does not take (worth showing the usage with)."""


class HelpRequested(Exception):
    """``-h`` or ``--help`` came before any bad argument."""


def long_options(argv: list[str], names: "Collection[str]", *, help_flags: bool = False) -> list[tuple[str, str]]:
    """``(name, value)`` pairs in order; ``names`` are the options taken (``"--socket"``, ...), each with a value."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if help_flags and name in ("-h", "--help"):
            raise HelpRequested
        if name not in names:
            raise UnknownArgument(f"unknown argument {argv[i]!r}")
        if not eq:
            if i + 1 >= len(argv):
                raise OptionError(f"{name} needs a value")
            value = argv[i + 1]
            i += 1
        out.append((name, value))
        i += 1
    return out
