"""A shell call whose only unknown is what it runs (``eval``, ``${F:-x}``, a substitution, a command word
from a variable) is auto-allowed sandbox-first when the sandbox enforces every rule its hidden part could
break, and asked (the safety check) otherwise (``nexusd.policy.shaping.dynamic_in_sandbox``,
``nexusd.policy.gate.sandbox_step``; issue 36). Real policy store, real probe, real bubblewrap for what
then runs."""

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
from nexusd.policy.shaping import allowed_because_sandboxed
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxProbe, Verdict
from nexusd.sandbox.plan import wrap_for_agent
from nexusd.sandbox.probe import probe

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- DYNAMIC-KEY-36"
ENV = "API_KEY=dynamic-env-36"

# each hides what it runs from the gate in its own way; each only reads the workspace when it runs
DYNAMIC_READS = [
    'eval "cat README.md"',
    "eval cat README.md",
    "cat ${F:-README.md}",
    'f=$(printf README.md); cat "$f"',
    "c=${CMD:-cat}; $c README.md",
    "cat README.md & wait",
    'x=$(cat README.md); echo "$x"',
    "echo `cat README.md`",
    "cat $(ls README*)",
    'bash -c "$(echo cat README.md)"',
]


@pytest.fixture(scope="module")
def found() -> SandboxProbe:
    p = probe()
    if not p.available:
        pytest.skip(f"no sandbox here: {p.reason}")
    return p


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.ws, self.cfg, self.outside = root / "home", root / "ws", root / "cfg", root / "outside"
        for d in (self.home / ".ssh", self.ws / ".git" / "hooks", self.cfg, self.outside):
            d.mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(KEY + "\n")
        (self.ws / "README.md").write_text("# demo\n")
        (self.ws / ".env").write_text(ENV + "\n")

    def store(self, policy: str = "", *, project: str | None = None, trust: bool = True) -> PolicyStore:
        (self.cfg / "policy.toml").write_text(policy)
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

    def call(self, command: str, mode: str = "default", **extra: object) -> CallInfo:
        return CallInfo(
            "claude", "s", "Bash", {"command": command, **extra}, str(self.ws), mode=mode, workspace=str(self.ws)
        )


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxdyn", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    monkeypatch.setenv("HOME", str(root / "home"))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


def _decide(store: PolicyStore, call: CallInfo, found: SandboxProbe | None, session: Session | None = None) -> Verdict:
    s = session or Session(id="s", agent_mode=call.mode)
    return anyio.run(lambda: decide(call, store, s, sandbox=found))


def _run(store: PolicyStore, call: CallInfo, verdict: Verdict, found: SandboxProbe) -> subprocess.CompletedProcess[str]:
    wrapped = wrap_for_agent(call, verdict, store, found)
    assert wrapped is not None, "an allow of a dynamic call must run sandboxed"
    return subprocess.run(
        ["/bin/bash", "-c", str(wrapped["command"])], capture_output=True, text=True, cwd=call.cwd, timeout=120
    )


def _asked_by_safety(v: Verdict) -> bool:
    return v.decision == "ask" and v.source == "safety"


@pytest.mark.parametrize("command", DYNAMIC_READS)
def test_a_dynamic_read_runs_sandboxed_without_asking(world: World, found: SandboxProbe, command: str) -> None:
    store = world.store()
    gate_only = _decide(store, world.call(command), None)
    assert _asked_by_safety(gate_only), gate_only  # the gate alone cannot know what it runs: a person
    v = _decide(store, world.call(command), found)
    assert v.decision == "allow" and v.source == "mode" and allowed_because_sandboxed(v), v
    assert "known only when it runs" in v.reason and found.backend in v.reason
    assert not v.suggestions  # nothing to learn: the allow is the sandbox's, not a rule's
    r = _run(store, world.call(command), v, found)
    assert r.returncode == 0 and "# demo" in r.stdout, r.stderr


@pytest.mark.parametrize(
    "command",
    [
        'eval "cat ~/.ssh/id_rsa"',
        "head -c 200 ${KEYFILE:-~/.ssh/id_rsa}",
        'eval "cat .env"',
        "cat ${F:-.env}",
        'x=$(cat ~/.ssh/id_rsa); echo "$x"',
    ],
)
def test_what_a_dynamic_call_hides_stays_hidden(world: World, found: SandboxProbe, command: str) -> None:
    """No deny rule here: the sandbox's own masks hide the key and the workspace's .env."""
    store = world.store()
    v = _decide(store, world.call(command), found)
    assert v.decision == "allow" and allowed_because_sandboxed(v), v
    r = _run(store, world.call(command), v, found)
    assert KEY not in r.stdout + r.stderr and ENV not in r.stdout + r.stderr


@pytest.mark.parametrize(
    "command",
    [
        'eval "touch ../outside/planted"',
        "d=../outside; touch $d/planted",
        'eval "echo planted > ~/planted"',
        "$(echo touch) ../outside/planted",
    ],
)
def test_a_dynamic_write_outside_fails_inside(world: World, found: SandboxProbe, command: str) -> None:
    store = world.store()
    v = _decide(store, world.call(command), found)
    assert v.decision == "allow" and allowed_because_sandboxed(v), v
    _run(store, world.call(command), v, found)  # fails, or writes the sandbox's own home, which goes with it
    assert not (world.outside / "planted").exists() and not (world.home / "planted").exists()


@pytest.mark.parametrize(
    ("policy", "why"),
    [
        ('[permissions]\ndeny = ["Bash(git push:*)"]\n', "a command rule: the sandbox cannot enforce it"),
        ('[permissions]\nask = ["Bash(npm publish:*)"]\n', "an ask rule of a command"),
        ('[permissions]\nask = ["Read(./docs/**)"]\n', "an ask rule of a path: the sandbox never asks"),
        ('[permissions]\ndeny = ["Read(**/*.pem)"]\n', "a glob: no mount expresses it"),
        ('[permissions]\ndeny = ["Read(.env)"]\n', "a bare name matches at any depth; only one is masked"),
        ('[permissions]\ndeny = ["Edit(*.lock)"]\n', "a glob of an edit rule"),
        ('[permissions]\ndeny = ["Edit(./src/generated/**)"]\n', "an edit rule: only what exists is bound"),
        ("[sandbox]\nenabled = false\n", "no sandbox: the gate alone"),
        ("[sandbox]\nauto_allow_bash_if_sandboxed = false\n", "the person asked to be asked"),
    ],
)
def test_the_ask_stands_when_a_rule_it_could_break_is_not_the_sandboxs(
    world: World, found: SandboxProbe, policy: str, why: str
) -> None:
    store = world.store(policy)
    for command in ('eval "cat README.md"', "cat ${F:-README.md}", "c=${CMD:-cat}; $c README.md"):
        v = _decide(store, world.call(command), found)
        assert _asked_by_safety(v), (why, command, v)


@pytest.mark.parametrize(
    "policy",
    [
        '[permissions]\ndeny = ["Read(./.env)", "Read(~/.ssh/**)", "Read(//etc/shadow)"]\n',
        '[permissions]\ndeny = ["WebFetch(domain:example.com)"]\nallow = ["Bash(git status:*)"]\n',
    ],
)
def test_rules_the_sandbox_enforces_do_not_stop_it(world: World, found: SandboxProbe, policy: str) -> None:
    """Anchored Read denies are masks; a domain rule is the proxy's; an allow rule never narrows."""
    store = world.store(policy)
    v = _decide(store, world.call('eval "cat README.md"'), found)
    assert v.decision == "allow" and allowed_because_sandboxed(v), v


def test_a_session_answer_to_deny_keeps_the_ask(world: World, found: SandboxProbe) -> None:
    store = world.store()
    session = Session(id="s", agent_mode="default", deny_rules=("Bash(git push:*)",))
    v = _decide(store, world.call('eval "cat README.md"'), found, session)
    assert _asked_by_safety(v), v
    timed = Session(id="s", agent_mode="default", grant_rules=(("deny", "Bash(curl:*)", "g1"),))
    assert _asked_by_safety(_decide(store, world.call('eval "cat README.md"'), found, timed))


@pytest.mark.parametrize(
    "command",
    [
        'eval "cat README.md" > .git/hooks/pre-commit',  # a protected path: its own safety check
        'LD_PRELOAD=/x.so eval "cat README.md"',  # a dangerous environment
        'eval "cat README.md" | nexusctl mode bypass',  # the gate's own controls
        'eval "cat README.md"\u200b',  # a hidden character
    ],
)
def test_another_unknown_beside_it_keeps_the_ask(world: World, found: SandboxProbe, command: str) -> None:
    store = world.store()
    v = _decide(store, world.call(command), found)
    assert v.decision != "allow", v


def test_an_escape_request_is_still_a_persons(world: World, found: SandboxProbe) -> None:
    store = world.store()
    v = _decide(store, world.call('eval "cat README.md"', dangerouslyDisableSandbox=True), found)
    assert v.decision == "ask" and "OUTSIDE the sandbox" in v.reason, v


def test_an_untrusted_project_policy_still_asks_for_trust(world: World, found: SandboxProbe) -> None:
    store = world.store(project="[permissions]\nallow = []\n", trust=False)
    v = _decide(store, world.call('eval "cat README.md"'), found)
    assert v.decision == "ask" and v.source == "safety", v


def test_a_rule_that_asks_for_what_it_shows_still_asks(world: World, found: SandboxProbe) -> None:
    """The engine runs again on what the call shows: an ask rule matching the visible command asks (the
    rule check happened before the safety check anyway), and a deny rule denies."""
    store = world.store('[permissions]\ndeny = ["Read(./.env)"]\n')
    v = _decide(store, world.call('cat .env; eval "cat README.md"'), found)
    assert v.decision == "deny", v


@pytest.mark.parametrize("command", ['eval "$(printf "touch x")"', "c=${C:-touch}; $c x", 'eval "cat README.md"'])
def test_a_mode_that_does_not_run_commands_still_refuses(world: World, found: SandboxProbe, command: str) -> None:
    """Plan mode runs nothing: a dynamic call is refused there as a static write is, sandbox or not."""
    store = world.store()
    assert _decide(store, world.call("touch x", mode="plan"), found).decision == "deny"
    v = _decide(store, world.call(command, mode="plan"), found)
    assert v.decision == "deny", v
