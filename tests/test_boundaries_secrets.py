"""Issue 34.4: the gate and the sandbox agree about secrets and protected places: one list, used by both; what
the sandbox hides is never allowed to a tool by a mode alone, bypass included (a person is asked; a mode that
never asks denies).

Real parts: the policy store on real files, the gate with its real classification and file system; real
bubblewrap for the sandbox half, with a fake home (``$HOME``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd.core.classify import paths
from nexusd.core.model import Context, Session
from nexusd.policy.gate import decide
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, Verdict
from nexusd.sandbox import plan as sandbox_plan

SECRET_FILES = {
    ".ssh/id_rsa": "SSH-KEY",
    ".ssh/id_ed25519": "SSH-KEY-2",
    ".aws/credentials": "AWS-SECRET",
    ".config/gcloud/credentials.db": "GCLOUD",
    ".netrc": "NETRC",
    ".docker/config.json": "DOCKER",
    ".kube/config": "KUBE",
    ".git-credentials": "GITCRED",
}


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.ws, self.cfg = root / "home", root / "ws", root / "cfg"
        for rel, text in SECRET_FILES.items():
            (self.home / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.home / rel).write_text(text)
        for d in (self.ws / "sub" / "deep", self.ws / ".git", self.cfg):
            d.mkdir(parents=True, exist_ok=True)
        (self.ws / ".env").write_text("API_KEY=ENV-SECRET")
        (self.ws / ".env.local").write_text("LOCAL")
        (self.ws / "sub" / ".env.production").write_text("PROD")
        (self.ws / ".env.example").write_text("API_KEY=placeholder")
        (self.ws / "README.md").write_text("readme")
        (self.ws / "sub" / "deep" / "code.py").write_text("x = 1")

    def store(self, user: str = "", project: str | None = None, trust: bool = False) -> PolicyStore:
        (self.cfg / "policy.toml").write_text(user)
        if project is not None:
            (self.ws / ".nexus").mkdir(exist_ok=True)
            (self.ws / ".nexus" / "policy.toml").write_text(project)
        store = PolicyStore(
            config_dir=self.cfg, state_dir=self.root / "state", managed_dir=self.root / "m", home=str(self.home)
        )
        assert not store.load(), store.errors
        if trust:
            store.trust("add", str(self.ws))
        return store

    def decide(
        self, store: PolicyStore, tool: str, inp: dict[str, Any], mode: str, provider: str = "claude"
    ) -> Verdict:
        call = CallInfo(provider, "s", tool, inp, str(self.ws), mode=mode, workspace=str(self.ws))
        return anyio.run(lambda: decide(call, store, Session(id="s", provider=provider, agent_mode=mode)))


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxb4", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    monkeypatch.setenv("HOME", str(root / "home"))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ one list


def test_the_sandbox_binds_every_place_the_classifier_protects() -> None:
    """Every protected name and home place of the classifier is bound read-only by the sandbox (or masked as
    a credential), and everything the sandbox binds is protected for the classifier: one list."""
    home = "/home/u"
    ctx = Context(cwd="/w", workspace_roots=("/w",), home=home)
    creds = tuple(paths.CREDENTIAL_PATHS)
    bound_home = set(sandbox_plan.HOME_FILES) | set(sandbox_plan.AGENT_DIRS)
    for rel in paths.PROTECTED_HOME:
        assert rel in bound_home or any(rel == c or rel.startswith(c + "/") for c in creds), rel
    for name in (paths.PROTECTED_DIR_NAMES | paths.PROTECTED_FILE_NAMES) - {".git"}:
        assert name in sandbox_plan.AGENT_DIRS, name
        assert name in bound_home, name
    for parent, child in paths.PROTECTED_SUBPATHS:
        assert f"{parent}/{child}" in sandbox_plan.AGENT_DIRS
    for rel in (*sandbox_plan.HOME_FILES, *sandbox_plan.AGENT_DIRS):
        assert paths.is_protected(f"{home}/{rel}", ctx), rel
        assert paths.is_protected(f"/w/{rel}", ctx) or rel in paths.PROTECTED_HOME, rel


@pytest.mark.parametrize(
    "rel",
    [".config/pip/pip.conf", ".local/share/applications/evil.desktop", ".config/powershell/profile.ps1", ".mcp.json"],
)
def test_a_sandboxed_command_cannot_write_a_home_place_the_gate_protects(world: World, rel: str) -> None:
    """Even with the home directory writable (``allow_write = ["~"]``), what the gate protects stays
    read-only inside: the sandbox's list is the classifier's."""
    from nexusd.sandbox.probe import probe
    from nexusd.sandbox.runner import execute

    found = probe()
    assert found.available and found.backend == "bwrap", found.reason
    target = world.home / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("ORIGINAL")
    store = world.store('[sandbox]\nenabled = true\n[sandbox.filesystem]\nallow_write = ["~"]\n')
    cmd = f"echo PWNED > {target}; echo PWNED > {world.home}/plain.txt; true"
    plan = sandbox_plan.plan_command(cmd, str(world.ws), store, found, workspace=str(world.ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
    assert target.read_text() == "ORIGINAL"
    assert (world.home / "plain.txt").read_text().strip() == "PWNED"  # control: the home is writable


# ------------------------------------------------------------------ the gate: no mode reads what the sandbox hides

ENV_READS = [
    ("Read", {"file_path": ".env"}),
    ("Read", {"file_path": "./.env"}),
    ("Read", {"file_path": "{ws}/.env"}),
    ("Read", {"file_path": "{ws}/sub/../.env"}),
    ("Read", {"file_path": ".env.local"}),
    ("Read", {"file_path": "sub/.env.production"}),
    ("Grep", {"pattern": "API_KEY"}),
    ("Grep", {"pattern": "API_KEY", "path": "."}),
    ("Grep", {"pattern": "API_KEY", "path": "{ws}"}),
    ("Grep", {"pattern": "PROD", "path": "sub"}),
    ("Grep", {"pattern": "API_KEY", "glob": ".env"}),
    ("read_file", {"file_path": ".env"}),
    ("NotebookRead", {"notebook_path": ".env"}),
]


def _fill(inp: dict[str, Any], world: World) -> dict[str, Any]:
    return {k: v.replace("{ws}", str(world.ws)) if isinstance(v, str) else v for k, v in inp.items()}


@pytest.mark.parametrize(("tool", "inp"), ENV_READS, ids=[f"{t}:{i}" for t, i in ENV_READS])
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
def test_file_tools_do_not_read_a_workspace_env_file_by_mode(world: World, tool: str, inp: dict[str, Any], mode: str):
    v = world.decide(world.store(), tool, _fill(inp, world), mode)
    assert v.decision == "ask", v
    assert "secret_read" in v.flags and "sandbox hides" in v.reason


@pytest.mark.parametrize(("tool", "inp"), ENV_READS[:3])
def test_a_mode_that_never_asks_denies_them(world: World, tool: str, inp: dict[str, Any]):
    v = world.decide(world.store(), tool, _fill(inp, world), "dontAsk")
    assert v.decision == "deny", v


@pytest.mark.parametrize(
    ("tool", "inp"),
    [
        ("Read", {"file_path": ".env.example"}),
        ("Read", {"file_path": "README.md"}),
        ("Grep", {"pattern": "x", "path": "sub/deep"}),
    ],
)
def test_controls_stay_allowed(world: World, tool: str, inp: dict[str, Any]):
    v = world.decide(world.store(), tool, inp, "default")
    assert v.decision == "allow", v


CREDENTIAL_READS = [
    ("Read", "~/.aws/credentials"),
    ("Read", "~/.ssh/id_rsa"),
    ("Read", "{home}/.ssh/id_ed25519"),
    ("Read", "{home}/.ssh/../.ssh/id_rsa"),
    ("Read", "~/.config/gcloud/credentials.db"),
    ("Read", "~/.netrc"),
    ("Read", "~/.docker/config.json"),
    ("Read", "~/.kube/config"),
    ("Read", "~/.git-credentials"),
    ("Grep", "~/.ssh"),
    ("Grep", "~"),
    ("Edit", "~/.aws/credentials"),
]


@pytest.mark.parametrize(("tool", "path"), CREDENTIAL_READS)
@pytest.mark.parametrize("provider", ["claude", "gemini", "codex"])
def test_bypass_does_not_read_credentials(world: World, tool: str, path: str, provider: str):
    path = path.replace("{home}", str(world.home))
    if tool == "Read":
        inp: dict[str, Any] = {"file_path": path}
    elif tool == "Grep":
        inp = {"pattern": "KEY", "path": path}
    else:
        inp = {"file_path": path, "old_string": "AWS", "new_string": "AWS"}
    store = world.store("[providers.gemini]\nauto_approval = true\n")
    v = world.decide(store, tool, inp, "bypassPermissions", provider=provider)
    assert v.decision == "ask", v
    assert "secret_read" in v.flags


@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.ssh/id_rsa",
        "cat $HOME/.aws/credentials",
        "head -c 100 ~/.netrc",
        "grep -r KEY ~/.ssh",
        "cat .env",
        "less .env.local",
        "grep -rn API_KEY .",
        "rg API_KEY",
        "cp .env /tmp/x",
    ],
)
def test_an_unsandboxed_shell_does_not_read_them_by_mode_either(world: World, command: str):
    """No sandbox here (none enabled): bypass would run these on the host, where the secrets are."""
    v = world.decide(world.store(), "Bash", {"command": command}, "bypassPermissions")
    assert v.decision == "ask", v
    assert "secret_read" in v.flags


def test_the_persons_own_rule_allows_a_projects_does_not(world: World):
    store = world.store('[permissions]\nallow = ["Read(~/.aws/credentials)"]\n')
    assert world.decide(store, "Read", {"file_path": "~/.aws/credentials"}, "default").decision == "allow"
    store = world.store(project='[permissions]\nallow = ["Read(~/.aws/credentials)", "Read(./.env)"]\n', trust=True)
    for path in ("~/.aws/credentials", ".env"):
        assert world.decide(store, "Read", {"file_path": path}, "bypassPermissions").decision == "ask"


def test_the_sandbox_deny_read_is_hidden_from_file_tools_too(world: World):
    (world.home / "private").mkdir()
    (world.home / "private" / "notes").write_text("x")
    store = world.store('[sandbox.filesystem]\ndeny_read = ["~/private"]\n')
    v = world.decide(store, "Read", {"file_path": "~/private/notes"}, "bypassPermissions")
    assert v.decision == "ask" and "deny_read" in v.reason, v


def test_the_daemons_own_directories_are_hidden_from_file_tools(world: World):
    store = world.store()
    (world.root / "state").mkdir(exist_ok=True)
    (world.root / "state" / "learned.toml").write_text("")
    v = world.decide(store, "Read", {"file_path": str(world.root / "state" / "learned.toml")}, "bypassPermissions")
    assert v.decision == "ask" and "secret_read" in v.flags, v


@pytest.mark.parametrize(
    ("tool", "inp", "planted"),
    [
        ("Grep", {"pattern": "KEY", "path": "sub/deep"}, "sub/deep/.env"),
        ("Bash", {"command": "grep -rn KEY sub/deep"}, "sub/deep/.env.staging"),
        ("Bash", {"command": "rg KEY sub/deep"}, "sub/deep/pkg/.env"),
    ],
)
def test_a_remembered_allow_does_not_outlive_a_new_env_file(world: World, tool: str, inp: dict[str, Any], planted: str):
    """The decision memo replays the file-system questions of the first decision: an .env file planted
    below a search's directory afterwards makes the same call a person's question again."""
    from nexusd.policy.memo import DecisionMemo

    memo = DecisionMemo()
    store = world.store()
    call = CallInfo("claude", "s", tool, inp, str(world.ws), mode="default", workspace=str(world.ws))
    session = Session(id="s", agent_mode="default")

    def again() -> Verdict:
        return anyio.run(lambda: decide(call, store, session, memo=memo))

    assert again().decision == "allow"
    assert again().decision == "allow" and memo.hits >= 1
    (world.ws / planted).parent.mkdir(parents=True, exist_ok=True)
    (world.ws / planted).write_text("KEY=x")
    v = again()
    assert v.decision == "ask" and "secret_read" in v.flags, v
