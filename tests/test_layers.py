"""The layers as docs/ARCHITECTURE.md states them, checked on every import statement (function-level ones
too, where cycles used to hide): policy never reaches up into the sandbox, the daemon or the CLI; the
sandbox never into the daemon or the CLI. The core's own rule is tests/core/test_purity.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nexusd

ROOT = Path(nexusd.__file__).parent
FORBIDDEN = {
    "policy": ("nexusd.sandbox", "nexusd.daemon", "nexusd.cli", "nexusd.bench", "nexusd.service"),
    "sandbox": ("nexusd.daemon", "nexusd.cli", "nexusd.bench", "nexusd.service"),
}


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_only_downward(layer: str) -> None:
    bad = [f"{path.relative_to(ROOT)}: {name}"
           for path in sorted((ROOT / layer).rglob("*.py"))
           for name in _imports(path)
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer])]
    assert bad == []


def test_the_check_sees_a_function_level_import(tmp_path: Path) -> None:
    """The check itself can fail: an import hidden in a function body is found."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from nexusd.sandbox.plan import plan_command\n", encoding="utf-8")
    assert "nexusd.sandbox.plan" in _imports(f)
