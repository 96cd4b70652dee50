"""Credentials are unreadable inside the sandbox by default (real bubblewrap, a fake home).

Masked: well-known credential locations in the home directory and the workspace root's ``.env*`` files.
No ``allow_read`` re-opens them (user, managed or project): reading one takes a person's allow of a call
outside the sandbox. ``allow_read`` re-opens only inside the user's own ``deny_read``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.sandbox.plan import plan_command
from nexusd.sandbox.probe import probe
from nexusd.sandbox.runner import execute
from tests.sandbox.conftest import run_wrapped

SECRETS = {
    ".ssh/id_ed25519": "SSH-PRIVATE-KEY",
    ".aws/credentials": "AWS-SECRET",
    ".config/gcloud/credentials.db": "GCLOUD-SECRET",
    ".netrc": "NETRC-PASSWORD",
    ".docker/config.json": "DOCKER-AUTH",
    ".kube/config": "KUBE-TOKEN",
    ".git-credentials": "GIT-CREDENTIAL",
}


@pytest.fixture(scope="module")
def found():
    p = probe()
    assert p.available and p.backend == "bwrap", p.reason
    return p


@pytest.fixture
def world(monkeypatch) -> Iterator[tuple[Path, Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix="nxse", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    home, ws = root / "home", root / "ws"
    for rel, text in SECRETS.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    (home / "notes.txt").write_text("PLAIN-NOTE")
    ws.mkdir()
    (ws / ".env").write_text("API_KEY=ENV-SECRET")
    (ws / ".env.local").write_text("ENV-LOCAL-SECRET")
    (ws / "packages/api").mkdir(parents=True)
    (ws / "packages/api/.env.production").write_text("NESTED-ENV-SECRET")
    (ws / ".env.example").write_text("API_KEY=TEMPLATE-VALUE")
    (ws / "README.md").write_text("PLAIN-README")
    (root / "cfg").mkdir()
    monkeypatch.setenv("HOME", str(home))
    yield root, home, ws
    shutil.rmtree(root, ignore_errors=True)


VIA = {"now": "runner"}


@pytest.fixture(autouse=True, params=["runner", "wrapper"])
def via(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs through ``nexusctl run``'s runner and through the agent's generated wrapper."""
    VIA["now"] = str(request.param)
    yield VIA["now"]
    VIA["now"] = "runner"


def run(root: Path, ws: Path, found, command: str, policy: str = "", trust: bool = False) -> str:
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n" + policy)
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    if trust:
        store.trust("add", str(ws))
    if VIA["now"] == "wrapper":
        r = run_wrapped(store, found, command, ws, ws)
        return r.out
    plan = plan_command(command, str(ws), store, found, workspace=str(ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        out.seek(0)
        return out.read().decode(errors="replace")


def cat_all(home: Path, ws: Path) -> str:
    files = [str(home / rel) for rel in SECRETS] + [
        str(ws / ".env"),
        str(ws / ".env.local"),
        str(home / "notes.txt"),
        str(ws / "README.md"),
        str(ws / "packages/api/.env.production"),
        str(ws / ".env.example"),
    ]
    return "cat " + " ".join(files) + " 2>/dev/null; true"


def test_credentials_and_env_files_are_masked(world, found):
    root, home, ws = world
    out = run(root, ws, found, cat_all(home, ws))
    for secret in (*SECRETS.values(), "ENV-SECRET", "ENV-LOCAL-SECRET", "NESTED-ENV-SECRET"):
        assert secret not in out, secret
    # everything else stays readable, .env templates included
    assert "PLAIN-NOTE" in out and "PLAIN-README" in out and "TEMPLATE-VALUE" in out


def test_no_allow_read_reopens_a_credential_mask(world, found):
    """Deliberate (security first): sandboxed calls run without a person, so the user's and the managed
    policy's allow_read do not re-open a built-in credential mask either, nor anything inside one.
    Reading a credential takes a person's allow of a call outside the sandbox (an escape)."""
    root, home, ws = world
    (root / "m").mkdir(exist_ok=True)
    (root / "m" / "policy.toml").write_text('[sandbox.filesystem]\nallow_read = ["~/.ssh/id_ed25519"]\n')
    out = run(
        root,
        ws,
        found,
        cat_all(home, ws),
        policy=f'[sandbox.filesystem]\nallow_read = ["~/.aws", "~/.netrc", "{ws}/.env", "~/.kube/config"]\n',
    )
    for secret in ("AWS-SECRET", "NETRC-PASSWORD", "ENV-SECRET", "KUBE-TOKEN", "SSH-PRIVATE-KEY"):
        assert secret not in out, secret
    assert "PLAIN-NOTE" in out  # the rest of the home stays readable


def test_allow_read_reopens_inside_the_users_own_deny_read(world, found):
    root, home, ws = world
    (home / "work").mkdir()
    (home / "work" / "private.txt").write_text("PRIVATE")
    (home / "work" / "shared.txt").write_text("SHARED")
    policy = '[sandbox.filesystem]\ndeny_read = ["~/work"]\nallow_read = ["~/work/shared.txt"]\n'
    out = run(root, ws, found, f"cat {home}/work/private.txt {home}/work/shared.txt 2>/dev/null; true", policy=policy)
    assert "SHARED" in out and "PRIVATE" not in out


def test_a_trusted_projects_allow_read_cannot_reopen_them(world, found):
    root, home, ws = world
    (ws / ".nexus").mkdir()
    (ws / ".nexus" / "policy.toml").write_text(
        f'[sandbox.filesystem]\nallow_read = ["{home}/.ssh", "{home}/.aws/credentials", "../.env"]\n'
    )
    out = run(root, ws, found, cat_all(home, ws), trust=True)
    assert "SSH-PRIVATE-KEY" not in out and "AWS-SECRET" not in out and "ENV-SECRET" not in out


def test_masked_env_file_cannot_be_overwritten_either(world, found):
    root, _, ws = world
    run(root, ws, found, "echo PWNED > .env; true")
    assert (ws / ".env").read_text() == "API_KEY=ENV-SECRET"
