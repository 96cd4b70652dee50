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

import pytest

ROOT = Path(__file__).resolve().parent.parent
# lint-imports, run by this interpreter (the venv of the suite, whatever its layout)
LINT_IMPORTS = [sys.executable, "-c", "import sys, importlinter.cli as c; sys.exit(c.lint_imports_command())"]

# Contracts written down but still broken on this branch, each with the cycle that breaks it. They are
# checked to be broken still: once the cycle is gone, the test below fails and says to move the contract
# out of here (so it is enforced from then on).
PENDING = {
    "tui-app-on-top": "tui/screens.py reaches into the app instead of returning results (issue 20)",
}


def _contracts() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [c["id"] for c in config["tool"]["importlinter"]["contracts"]]


def _lint(*ids: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LINT_IMPORTS, "--no-cache", "--no-logo", *(f"--contract={i}" for i in ids)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_every_contract_is_kept():
    enforced = [c for c in _contracts() if c not in PENDING]
    assert {"core-pure", "protocol-alone", "clients-outside", "nexusd-layers"} <= set(enforced)
    out = _lint(*enforced)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(enforced)} kept, 0 broken." in out.stdout, out.stdout


@pytest.mark.parametrize("contract", sorted(PENDING))
def test_pending_contract_is_still_broken(contract: str):
    assert contract in _contracts()
    out = _lint(contract)
    assert "BROKEN" in out.stdout and out.returncode != 0, (
        f"contract {contract} is kept now: remove it from PENDING in {Path(__file__).name} so it is enforced"
    )
