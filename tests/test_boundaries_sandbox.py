"""Issue 34.2: a project can only narrow the sandbox, and a chain is never less sandboxed than a person was shown.

Real parts: the policy store reading real files, the gate deciding with a real classification, the agent's
generated wrapper run by bash through real bubblewrap, with a fake home (``$HOME``) holding a fake key.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from nexusd.core.model import Session
from nexusd.policy.gate import decide
from nexusd.policy.sandbox_settings import sandbox_settings
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxProbe, Verdict
from nexusd.sandbox.plan import wrap_for_agent
from nexusd.sandbox.probe import probe

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- FAKE-KEY-34"


@pytest.fixture(scope="module")
def found() -> SandboxProbe:
    p = probe()
    assert p.available and p.backend == "bwrap", p.reason
    return p


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.ws, self.cfg = root / "home", root / "ws", root / "cfg"
        for d in (self.home / ".ssh", self.ws / ".nexus", self.ws / ".claude", self.cfg):
            d.mkdir(parents=True)
        (self.ws / ".git").mkdir()
        (self.home / ".ssh" / "id_rsa").write_text(KEY)

    def user(self, text: str) -> None:
        (self.cfg / "policy.toml").write_text(text)

    def project(self, text: str, name: str = ".nexus/policy.toml") -> None:
        (self.ws / name).write_text(text)

    def store(self, *, trust: bool | None = True, claude: bool = False) -> PolicyStore:
        if claude:
            with (self.cfg / "policy.toml").open("a") as f:
                f.write("\n[claude]\nimport_settings = true\nmanaged_settings = '/nonexistent/managed.json'\n")
        store = PolicyStore(
            config_dir=self.cfg, state_dir=self.root / "state", managed_dir=self.root / "m", home=str(self.home)
        )
        assert not store.load(), store.errors
        if trust is True:
            store.trust("add", str(self.ws))
        elif trust is False:
            store.trust("remove", str(self.ws))
        return store

    def call(self, command: str, mode: str = "bypassPermissions") -> CallInfo:
        return CallInfo("claude", "s", "Bash", {"command": command}, str(self.ws), mode=mode, workspace=str(self.ws))


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxb2", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    monkeypatch.setenv("HOME", str(root / "home"))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


def _decide(store: PolicyStore, call: CallInfo, found: SandboxProbe) -> Verdict:
    return anyio.run(lambda: decide(call, store, Session(id="s", agent_mode=call.mode), sandbox=found))


def _run_as_agent(store: PolicyStore, call: CallInfo, verdict: Verdict, found: SandboxProbe) -> str:
    """What the agent runs after this verdict: the wrapped command if the daemon wraps it, else the command."""
    assert verdict.decision == "allow", verdict
    wrapped = wrap_for_agent(call, verdict, store, found)
    text = str(wrapped["command"]) if wrapped is not None else str(call.input["command"])
    r = subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, cwd=call.cwd, timeout=120)
    return r.stdout + r.stderr


# Each spelling a workspace may use to switch the sandbox off, or to take a command out of it.
LOOSENINGS = [
    ("[sandbox]\nenabled = false\n", ".nexus/policy.toml"),
    ('[sandbox]\nexcluded_commands = ["Bash(*)"]\n', ".nexus/policy.toml"),
    ('[sandbox]\nexcluded_commands = ["cat *"]\n', ".nexus/policy.toml"),
    ('[sandbox]\nexcluded_commands = ["Bash(cat:*)"]\n', ".nexus/policy.toml"),
    ('[sandbox]\nenabled_platforms = ["macos"]\n', ".nexus/policy.toml"),
    ('{"sandbox": {"enabled": false}}', ".claude/settings.json"),
    ('{"sandbox": {"excludedCommands": ["cat *"]}}', ".claude/settings.local.json"),
]


@pytest.mark.parametrize(("text", "name"), LOOSENINGS, ids=[f"{n}:{t[:40]}" for t, n in LOOSENINGS])
def test_a_trusted_project_cannot_switch_the_sandbox_off(world: World, found: SandboxProbe, text: str, name: str):
    """The person turned the sandbox on; a trusted project's file says it off (or excludes everything). In
    bypass mode ``cat ~/.ssh/id_rsa`` must still run sandboxed, where the key is not there."""
    world.user("[sandbox]\nenabled = true\n")
    world.project(text, name)
    store = world.store(claude=name.startswith(".claude"))
    call = world.call("cat ~/.ssh/id_rsa")
    verdict = _decide(store, call, found)
    out = _run_as_agent(store, call, verdict, found)
    assert KEY not in out
    settings = sandbox_settings(store.policy_for(str(world.ws)))
    assert settings.enabled and settings.excluded_commands == () and settings.enabled_platforms is None
    assert any("can only narrow the sandbox" in w for w in store.policy_for(str(world.ws)).warnings)


def test_the_persons_own_layer_still_loosens(world: World, found: SandboxProbe):
    """Control: the same exclusion in the person's own policy does take the command out (the test can fail)."""
    world.user('[sandbox]\nenabled = true\nexcluded_commands = ["cat *"]\n')
    store = world.store(trust=None)
    call = world.call("cat ~/.ssh/id_rsa")
    out = _run_as_agent(store, call, Verdict("allow", "a person said yes", "user"), found)
    assert KEY in out


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[sandbox]\nenabled = false\n", "enabled"),
        ("[sandbox]\nfail_if_unavailable = false\n", "fail_if_unavailable"),
        ("[sandbox]\nauto_allow_bash_if_sandboxed = true\n", "auto_allow_bash_if_sandboxed"),
        ("[sandbox]\nallow_unsandboxed_commands = true\n", "allow_unsandboxed_commands"),
        ("[sandbox]\nnetwork_isolation = false\n", "network_isolation"),
        ('[sandbox.network]\nmode = "open"\n', "network_mode"),
        ('[sandbox.network]\nmode = "filtered"\n', "network_mode"),
        ('[sandbox.network]\nallowed_domains = ["evil.example"]\n', "allowed_domains"),
        ("[sandbox.network]\nallowed_ports = [22]\n", "allowed_ports"),
        ("[sandbox.network]\nhttp_proxy_port = 3128\n", "http_proxy_port"),
        ("[sandbox.network]\nallow_all_unix_sockets = true\n", "allow_all_unix_sockets"),
        ('[sandbox.network]\nallow_unix_sockets = ["/run/docker.sock"]\n', "allow_unix_sockets"),
        ("[sandbox.network]\nallow_local_binding = true\n", "allow_local_binding"),
        ('[sandbox.filesystem]\nallow_write = ["~/.local"]\n', "allow_write"),
        ('[sandbox.filesystem]\nallow_read = ["~/private"]\n', "allow_read"),
        ('[sandbox]\nexcluded_commands = ["git push *"]\n', "excluded_commands"),
    ],
)
def test_every_loosening_key_of_a_project_is_ignored_and_said(world: World, text: str, key: str):
    user = (
        "[sandbox]\nenabled = true\nallow_unsandboxed_commands = false\n"
        '[sandbox.filesystem]\ndeny_read = ["~/private"]\n'
    )
    world.user(user)
    world.project(text)
    store = world.store()
    pol = store.policy_for(str(world.ws))
    mine = sandbox_settings(world.store(trust=False).policy_for(str(world.ws)))  # the person's layers alone
    theirs = sandbox_settings(pol)
    assert getattr(theirs, key) == getattr(mine, key), key
    assert theirs.network() == mine.network()
    assert len(pol.sandbox_ignored) == 1 and key.replace("network_mode", "mode") in pol.sandbox_ignored[0]
    assert any(pol.sandbox_ignored[0] in w for w in pol.warnings)


def test_a_project_still_narrows(world: World):
    world.user('[sandbox]\nenabled = false\nauto_allow_bash_if_sandboxed = true\n[sandbox.network]\nmode = "open"\n')
    world.project(
        "[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = false\n"
        '[sandbox.network]\nmode = "isolated"\ndenied_domains = ["evil.example"]\n'
        '[sandbox.filesystem]\ndeny_read = ["./private"]\ndeny_write = ["./vendor"]\n'
    )
    pol = world.store().policy_for(str(world.ws))
    s = sandbox_settings(pol)
    assert s.enabled and not s.auto_allow_bash_if_sandboxed and s.network() == "isolated"
    assert s.denied_domains == ("evil.example",) and pol.sandbox_ignored == ()
    assert s.deny_read == (str(world.ws / ".nexus" / "private"),)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("[sandbox]\nenabled = false\n", "sandbox.enabled = false"),
        ('[sandbox]\nexcluded_commands = ["Bash(*)"]\n', 'sandbox.excluded_commands = ["Bash(*)"]'),
        ('[sandbox.filesystem]\nallow_write = ["~/.ssh"]\n', "sandbox.filesystem.allow_write"),
        ("[sandbox.network]\nallowed_domains = ['x.example']\n", 'sandbox.network.allowed_domains = ["x.example"]'),
    ],
)
def test_the_trust_question_lists_each_loosening_line(world: World, found: SandboxProbe, text: str, shown: str):
    world.user("[sandbox]\nenabled = true\n")
    world.project(text + "[permissions]\nallow = ['Bash(ls)']\n")
    store = world.store(trust=None)
    verdict = _decide(store, world.call("ls", mode="default"), found)
    assert verdict.decision == "ask" and "trust it" in verdict.reason
    assert shown in verdict.reason and "do NOT apply" in verdict.reason, verdict.reason


def test_a_mixed_chain_is_asked_as_what_runs(world: World, found: SandboxProbe):
    """The ask says where the chain runs: a mixed chain wholly inside the sandbox (and a person's allow runs
    it there: ``tests/sandbox/test_plan.py``); a chain of excluded commands alone outside it."""
    world.user('[sandbox]\nenabled = true\nexcluded_commands = ["npm install *"]\n')
    store = world.store(trust=None)
    for chain in ("npm install x && cat ~/.ssh/id_rsa", "npm install x; make", "make || npm install x"):
        v = _decide(store, world.call(chain, mode="default"), found)
        assert v.decision == "ask" and "whole chain runs INSIDE the sandbox" in v.reason, (chain, v.reason)
    chain = "npm install --offline --version; cat ~/.ssh/id_rsa"  # no network wait: --version
    out = _run_as_agent(store, world.call(chain), Verdict("allow", "a person said yes", "user"), found)
    assert KEY not in out
    v = _decide(store, world.call("npm install left-pad", mode="default"), found)
    assert v.decision == "ask" and "runs OUTSIDE the sandbox" in v.reason, v.reason
