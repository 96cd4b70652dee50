"""Each catalogue fact is stated once, in nexusd/core/tools.py, and imported everywhere: the shell-tool
set, the tools the sandbox wraps, the path keys and the redirect operators used to exist in up to four
copies with four contents. A second literal copy anywhere in the tree fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import nexus_clients

import nexusd
from nexusd.core import tools

ROOTS = (Path(nexusd.__file__).parent, Path(nexus_clients.__file__).parent)
CATALOGUE = Path(tools.__file__)


def _literal_sets(path: Path) -> list[frozenset[str]]:
    """Every literal collection of two or more strings in a module (sets, tuples, lists, dict keys)."""
    out: list[frozenset[str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elts: list[ast.expr] | None = None
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            elts = list(node.elts)
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        if elts and len(elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
            out.append(frozenset(e.value for e in elts if isinstance(e, ast.Constant)))
    return out


def _copies(fact: frozenset[str], least: int, roots: tuple[Path, ...] = ROOTS) -> list[str]:
    """Modules outside the catalogue holding a literal that is mostly ``fact``: ``least`` or more of its
    members, and they make up most of the literal (a larger table that mentions a few, such as the rule
    syntax's tool aliases or the audit's summary keys, states another fact)."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path == CATALOGUE:
                continue
            if any(len(s & fact) >= least and len(s & fact) * 5 >= len(s) * 3 for s in _literal_sets(path)):
                found.append(f"{root.name}/{path.relative_to(root)}")
    return found


def test_the_shell_tools_are_stated_once() -> None:
    # three spellings of a shell tool in one literal is a copy of the set
    assert _copies(frozenset(tools.SHELL_TOOLS), 3) == []


def test_the_path_keys_are_stated_once() -> None:
    # the daemon, core and UI; each adapter in clients/ reads its own provider's input shape
    assert _copies(frozenset(tools.PATH_KEYS), 3, (ROOTS[0], ROOTS[1] / "tui")) == []


def test_the_redirect_operators_are_stated_once() -> None:
    ops = frozenset(tools.WRITE_REDIRECTS | tools.READ_REDIRECTS) - {"<", ">"}
    assert _copies(ops, 3) == []


def test_every_user_takes_the_catalogues_objects() -> None:
    from nexus_clients.tui import request_view

    from nexusd.core import engine
    from nexusd.daemon import requests
    from nexusd.sandbox import plan

    assert request_view.SHELL_TOOLS is tools.SHELL_TOOLS and requests.SHELL_TOOLS is tools.SHELL_TOOLS
    assert plan.SANDBOXED_SHELL_TOOLS is tools.SANDBOXED_SHELL_TOOLS
    assert engine.PATH_KEYS is tools.PATH_KEYS and engine.WRITE_REDIRECTS is tools.WRITE_REDIRECTS


def test_the_catalogue_is_consistent() -> None:
    assert {"Bash", "run_shell_command", "shell", "local_shell", "exec_command", "bash", "Shell"} <= tools.SHELL_TOOLS
    assert tools.SANDBOXED_SHELL_TOOLS.keys() <= tools.SHELL_TOOLS
    assert all(tools.tool_info(t).canonical == "Bash" for t in tools.SHELL_TOOLS)
    assert "<>" in tools.WRITE_REDIRECTS and "<>" in tools.READ_REDIRECTS  # opened both ways


def test_the_copy_finder_finds_a_copy(tmp_path: Path) -> None:
    """The check can fail: a module with its own shell-tool set is found."""
    f = tmp_path / "m.py"
    f.write_text('SHELLS = frozenset({"Bash", "run_shell_command", "local_shell"})\n', encoding="utf-8")
    assert _copies(frozenset(tools.SHELL_TOOLS), 3, (tmp_path,)) == [f"{tmp_path.name}/m.py"]
