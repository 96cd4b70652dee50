"""The core stays sans-I/O: no module of ``nexusd.core`` imports the OS, clocks, sockets, randomness or the
daemon shell, and importing all of it loads none of them (the real file system is injected)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import nexusd.core

CORE = Path(nexusd.core.__file__).parent
FORBIDDEN = {"os", "time", "socket", "random", "secrets", "subprocess", "threading", "asyncio", "anyio", "datetime",
             "glob", "shutil", "io", "pathlib", "signal", "select", "selectors"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_core_module_imports_io_clocks_or_the_shell():
    bad = []
    for path in sorted(CORE.rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            shell = name.startswith("nexusd.") and not name.startswith(("nexusd.core", "nexusd.protocol"))
            if top in FORBIDDEN or shell:
                bad.append(f"{path.relative_to(CORE)}: {name}")
    assert bad == []


def test_importing_the_whole_core_loads_no_shell():
    mods = [m.name for m in pkgutil.walk_packages([str(CORE)], "nexusd.core.")]
    assert "nexusd.core.engine" in mods and "nexusd.core.classify.bash" in mods
    code = (
        "import sys\n"
        f"for m in {mods!r}: __import__(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anyio', 'asyncio', 'socket', 'nexusd')\n"
        "             and not m.startswith(('nexusd.core', 'nexusd.protocol')) and m != 'nexusd'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
