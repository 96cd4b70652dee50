"""The core stays sans-I/O: importing all of ``nexusd.core`` loads no shell, socket or event loop (the real
file system is injected). What each core module may import is the ``core-pure`` contract in pyproject.toml,
checked by tests/test_layers.py."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import nexusd.core

CORE = Path(nexusd.core.__file__).parent


def test_importing_the_whole_core_loads_no_shell():
    mods = [m.name for m in pkgutil.walk_packages([str(CORE)], "nexusd.core.")]
    assert {"nexusd.core.engine", "nexusd.core.classify.bash", "nexusd.core.policy.rules"} <= set(mods)
    code = (
        "import sys\n"
        f"for m in {mods!r}: __import__(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anyio', 'asyncio', 'socket', 'nexusd')\n"
        "             and not m.startswith(('nexusd.core', 'nexusd.protocol')) and m != 'nexusd'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
