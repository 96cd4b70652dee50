"""The real agent CLIs (Claude Code, Gemini CLI, Codex CLI: its npm package brings its native binary as an
optional dependency), installed once per machine from the npm registry into ``.e2e-cache/`` (git-ignored).

A session fixture installs the pinned versions when they are missing (under a file lock, so xdist
workers share one install) and skips only when node or npm is not on the machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("NEXUS_E2E_CACHE", REPO / ".e2e-cache"))
PREFIX = CACHE / "npm"
PACKAGES = {"@anthropic-ai/claude-code": "2.1.330", "@google/gemini-cli": "0.61.0", "@openai/codex": "0.169.0"}


@dataclass(frozen=True)
class AgentCLIs:
    claude: Path
    gemini: Path
    codex: Path
    hook: list[str]  # argv prefix of nexus-hook
    mcp: list[str]  # argv of nexus-mcp


def _installed_version(package: str) -> str | None:
    manifest = PREFIX / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _console_script(name: str, module: str) -> list[str]:
    script = Path(sys.executable).parent / name
    return [str(script)] if script.exists() else [sys.executable, "-m", module]


@pytest.fixture(scope="session")
def agent_clis() -> AgentCLIs:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed: the end-to-end tests drive the real Claude Code and Gemini CLIs")
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [f"{p}@{v}" for p, v in PACKAGES.items() if _installed_version(p) != v]
        if missing:
            manifest = {"name": "nexusd-e2e-agents", "private": True, "dependencies": PACKAGES}
            (PREFIX / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
            proc = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(PREFIX)],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if proc.returncode != 0:
                pytest.fail(f"npm install {' '.join(missing)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    bin_dir = PREFIX / "node_modules" / ".bin"
    clis = AgentCLIs(
        claude=bin_dir / "claude",
        gemini=bin_dir / "gemini",
        codex=bin_dir / "codex",
        hook=_console_script("nexus-hook", "nexus_clients.hook"),
        mcp=_console_script("nexus-mcp", "nexus_clients.mcp_bridge"),
    )
    for cli in (clis.claude, clis.gemini, clis.codex):
        proc = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            pytest.fail(f"{cli} --version failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return clis


# a real agent CLI's run took 81 s alone, and over 120 s (the suite's default) on a loaded 2-core machine
E2E_TIMEOUT = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Real agent CLIs get a timeout that holds under load; a test's own ``timeout`` mark still wins."""
    for item in items:
        if item.get_closest_marker("e2e") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))
