"""The layers hold: every import-linter contract in pyproject.toml ([tool.importlinter]) is kept.

The contracts state who may import whom (the core imports nothing of the shell nor the OS, the wire types
import nothing, clients never reach daemon internals, nexusd's packages form layers); a broken one fails
here with lint-imports' own report of the offending import chain.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# lint-imports, run by this interpreter (the venv of the suite, whatever its layout)
LINT_IMPORTS = [sys.executable, "-c", "import sys, importlinter.cli as c; sys.exit(c.lint_imports_command())"]


def _contracts() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [c["id"] for c in config["tool"]["importlinter"]["contracts"]]


def _lint(*ids: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LINT_IMPORTS, "--no-cache", "--no-logo", *(f"--contract={i}" for i in ids)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_contract_is_kept():
    enforced = _contracts()
    assert {
        "core-pure",
        "protocol-alone",
        "clients-outside",
        "nexusd-layers",
        "tui-app-on-top",
        "daemon-acyclic",
    } <= set(enforced)
    out = _lint(*enforced)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(enforced)} kept, 0 broken." in out.stdout, out.stdout


def test_a_broken_contract_fails(tmp_path: Path):
    """The check can fail: a contract the code breaks (the daemon does import the wire types) is reported."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_packages = ["nexusd"]\n\n[[tool.importlinter.contracts]]\n'
        'id = "x"\nname = "the daemon without the wire"\ntype = "forbidden"\n'
        'source_modules = ["nexusd.daemon"]\nforbidden_modules = ["nexusd.protocol"]\n',
        encoding="utf-8",
    )
    out = subprocess.run(
        [*LINT_IMPORTS, "--no-cache", "--no-logo", f"--config={config}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout + out.stderr
