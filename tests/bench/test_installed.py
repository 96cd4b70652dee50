"""``nexusctl bench`` from a plain wheel install, run away from the source tree (issue 21).

The wheel is built from a copy of the project's files and installed without dependencies into a fresh
virtualenv; the dependencies come from the test environment's site-packages through a ``.pth`` path line
(such a line adds the directory only: the editable install's finder there is not loaded, so ``nexusd``
can only come from the wheel). Building goes through pip's isolated build, which needs setuptools from
pip's cache or the package index.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _copy_project(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "node_modules")
    for name in ("nexusd", "clients"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bench_runs_from_a_wheel_install_with_its_default_scenarios(tmp_path: Path) -> None:
    src, dist, env = tmp_path / "src", tmp_path / "dist", tmp_path / "venv"
    _copy_project(src)
    _pip("wheel", "-q", "--no-deps", "-w", str(dist), str(src))
    (wheel,) = dist.glob("nexusd-*.whl")
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    _pip("--python", str(python), "install", "-q", "--no-deps", str(wheel))
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([str(python), "-c", purelib], text=True).strip())
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.check_output(
        [str(python), "-c", "import nexusd.bench; print(nexusd.bench.__file__)"], cwd=work, text=True
    ).strip()
    assert Path(where).is_relative_to(env), where  # the wheel's copy, not the source tree
    out_file = work / "bench.json"
    proc = subprocess.run(
        [
            str(env / "bin" / "nexusctl"),
            "bench",
            "--clients",
            "1",
            "--requests",
            "30",
            "--warmup",
            "2",
            "--out",
            str(out_file),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(out_file.read_text())
    assert [c["scenario"] for c in out["cells"]] == ["agent", "allow", "deny", "prompt", "mix"]
    for cell in out["cells"]:
        assert cell["nexusd"]["requests"] == 30 and cell["nexusd"]["errors"] == 0
    agent = out["cells"][0]
    assert agent["memo"]["lookups"] >= 30  # the memo counters of the cell are reported
    assert "agent" in proc.stdout and "memo hit %" in proc.stdout
