"""One npm package per prefix under ``.e2e-cache/`` (git-ignored), installed once per machine under a file
lock: the agents this issue added (OpenCode, Copilot CLI) live beside the shared ``npm`` prefix."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import CACHE


def npm_cli(package: str, version: str, prefix_name: str, binary: str) -> Path:
    """The installed ``binary`` of ``package@version`` (skips when node/npm are missing)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"node/npm are not installed: this test drives the real {package}")
    prefix = CACHE / prefix_name
    prefix.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"install-{prefix_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = prefix / "node_modules" / package / "package.json"
        try:
            installed = json.loads(manifest.read_text())["version"]
        except (OSError, ValueError, KeyError):
            installed = None
        if installed != version:
            deps = {"name": f"nexusd-e2e-{prefix_name}", "private": True, "dependencies": {package: version}}
            (prefix / "package.json").write_text(json.dumps(deps, indent=2) + "\n")
            proc = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix)],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if proc.returncode != 0:
                pytest.fail(f"npm install {package}@{version} failed:\n{proc.stderr[-3000:]}")
    cli = prefix / "node_modules" / ".bin" / binary
    proc = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{binary} --version failed: {proc.stderr[-2000:]}")
    return cli
