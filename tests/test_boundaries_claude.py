"""Issue 34.3: Claude Code's sandbox settings are imported whole, with Claude's meaning, or each key that is
not is named in a warning (the daemon's start log, ``nexusctl policy validate``).

Real parts: the policy store reading a real ``~/.claude/settings.json``, real bubblewrap running the plan, the
real ``nexusctl`` program for ``policy validate``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexusd.policy.loader import parse_claude_settings
from nexusd.policy.sandbox_settings import sandbox_settings
from nexusd.policy.store import PolicyStore

FULL = {
    "enabled": True,
    "failIfUnavailable": False,
    "autoAllowBashIfSandboxed": True,
    "allowUnsandboxedCommands": False,
    "excludedCommands": ["docker *", "git push"],
    "enabledPlatforms": ["linux", "macos"],
    "network": {
        "allowedDomains": ["github.com", "*.npmjs.org"],
        "deniedDomains": ["evil.example"],
        "allowUnixSockets": ["/run/docker.sock"],
        "allowAllUnixSockets": True,
        "allowLocalBinding": True,
        "httpProxyPort": 3128,
        "socksProxyPort": 1080,
    },
    "filesystem": {
        "denyRead": ["~/secret"],
        "allowRead": ["~/secret/public"],
        "allowWrite": ["~/.cache/tool", "/var/tmp/build"],
        "denyWrite": ["./vendored"],
    },
}
UNSUPPORTED = {
    "ignoreViolations": {"*": ["/usr/bin"]},
    "enableWeakerNestedSandbox": True,
    "enableWeakerNetworkIsolation": True,
    "bwrapPath": "/opt/bwrap",
    "socatPath": "/opt/socat",
    "allowAppleEvents": False,
    "credentials": {"x": 1},
    "ripgrep": {"command": "rg"},
}


class World:
    def __init__(self, root: Path) -> None:
        self.root, self.home, self.ws, self.cfg = root, root / "home", root / "ws", root / "cfg"
        for d in (self.home / ".claude", self.home / "secret" / "public", self.ws / ".git", self.cfg):
            d.mkdir(parents=True, exist_ok=True)
        (self.home / "secret" / "key").write_text("DENIED-BY-CLAUDE")
        (self.home / "secret" / "public" / "ok").write_text("REOPENED")
        (self.cfg / "policy.toml").write_text(
            "[claude]\nimport_settings = true\nmanaged_settings = '/nonexistent.json'\n"
        )

    def claude(self, sandbox: dict[str, Any]) -> Path:
        path = self.home / ".claude" / "settings.json"
        path.write_text(json.dumps({"sandbox": sandbox}))
        return path

    def store(self) -> PolicyStore:
        store = PolicyStore(
            config_dir=self.cfg, state_dir=self.root / "state", managed_dir=self.root / "m", home=str(self.home)
        )
        assert not store.load(), store.errors
        return store


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxb3", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    monkeypatch.setenv("HOME", str(root / "home"))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


def test_every_claude_sandbox_key_is_imported_with_its_meaning(world: World):
    world.claude(FULL)
    s = sandbox_settings(world.store().policy)
    home = str(world.home)
    assert s.enabled and not s.fail_if_unavailable and s.auto_allow_bash_if_sandboxed
    assert not s.allow_unsandboxed_commands
    assert s.excluded_commands == ("docker *", "git push")
    assert s.enabled_platforms == ("linux", "macos")
    assert s.allowed_domains == ("github.com", "*.npmjs.org") and s.denied_domains == ("evil.example",)
    assert s.allow_unix_sockets == ("/run/docker.sock",) and s.allow_all_unix_sockets and s.allow_local_binding
    assert s.http_proxy_port == 3128 and s.socks_proxy_port == 1080
    assert s.deny_read == (f"{home}/secret",) and s.allow_read == (f"{home}/secret/public",)
    assert s.allow_write == (f"{home}/.cache/tool", "/var/tmp/build")
    assert s.deny_write == (f"{home}/.claude/vendored",)  # ./ is relative to the user's settings directory


@pytest.mark.parametrize(
    "sandbox",
    [
        {"enabled": True, "filesystem": {"denyRead": ["~/secret"]}},
        {"enabled": True, "filesystem": {"denyRead": ["~/secret/key"]}},
        {"enabled": True, "filesystem": {"denyRead": ["//{home}/secret"]}},
        {"enabled": True, "filesystem": {"denyRead": ["{home}/secret"]}},
    ],
)
def test_claude_deny_read_hides_the_file_inside_the_sandbox(world: World, sandbox: dict[str, Any]):
    from nexusd.sandbox.plan import plan_command
    from nexusd.sandbox.probe import probe
    from nexusd.sandbox.runner import execute

    found = probe()
    assert found.available and found.backend == "bwrap", found.reason
    text = json.dumps(sandbox).replace(
        "{home}", str(world.home).lstrip("/") if "//" in json.dumps(sandbox) else str(world.home)
    )
    world.claude(json.loads(text))
    store = world.store()
    cmd = f"cat {world.home}/secret/key 2>/dev/null; echo; cat {world.home}/secret/public/ok 2>/dev/null; true"
    plan = plan_command(cmd, str(world.ws), store, found, workspace=str(world.ws))
    assert plan.allowed, plan.reason
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
        out.seek(0)
        got = out.read().decode()
    assert "DENIED-BY-CLAUDE" not in got


def test_claude_enabled_and_auto_allow_reach_the_gate(world: World):
    """``enabled`` and ``autoAllowBashIfSandboxed`` from Claude's settings: a mode's ask for a shell call is
    allowed because it runs sandboxed, and the wrap runs it there."""
    import anyio

    from nexusd.core.model import Session
    from nexusd.policy.gate import decide
    from nexusd.protocol import CallInfo
    from nexusd.sandbox.plan import wrap_for_agent
    from nexusd.sandbox.probe import probe

    found = probe()
    world.claude({"enabled": True, "autoAllowBashIfSandboxed": True})
    store = world.store()
    call = CallInfo(
        "claude", "s", "Bash", {"command": "npm test"}, str(world.ws), mode="default", workspace=str(world.ws)
    )
    v = anyio.run(lambda: decide(call, store, Session(id="s", agent_mode="default"), sandbox=found))
    assert v.decision == "allow" and any(t.step == "sandbox" for t in v.trace), v
    assert wrap_for_agent(call, v, store, found) is not None


def test_claude_excluded_commands_take_a_command_out(world: World):
    from nexusd.core.disposition import command_disposition

    world.claude({"enabled": True, "excludedCommands": ["docker *"]})
    s = sandbox_settings(world.store().policy)
    assert command_disposition("docker build .", s) == "unsandboxed"
    assert command_disposition("docker build . && curl x", s) == "mixed"


def test_each_key_not_imported_is_named_in_a_warning(world: World):
    world.claude({**FULL, **UNSUPPORTED, "network": {**FULL["network"], "mystery": 1}, "filesystem": {"oddKey": []}})
    store = world.store()
    text = "\n".join(store.warnings)
    for key in (*UNSUPPORTED, "network.mystery", "filesystem.oddKey"):
        assert f"sandbox.{key}:" in text, (key, text)
    for key in ("enabled", "excludedCommands", "network.allowedDomains", "enabledPlatforms"):
        assert f"sandbox.{key}:" not in text, key


def test_managed_only_keys_are_honoured_in_managed_settings_only(world: World):
    path = world.claude(
        {"network": {"allowManagedDomainsOnly": True}, "filesystem": {"allowManagedReadPathsOnly": True}}
    )
    store = world.store()
    s = sandbox_settings(store.policy)
    assert not s.managed_domains_only and not s.allow_managed_read_paths_only
    assert any("allowManagedDomainsOnly" in w and "managed settings only" in w for w in store.warnings)
    managed = parse_claude_settings(path.read_text(), path, layer="claude-managed")
    assert not managed.errors and managed.sandbox == {
        "network": {"managed_domains_only": True},
        "filesystem": {"allow_managed_read_paths_only": True},
    }


def test_policy_validate_names_the_ignored_keys(world: World):
    """The real ``nexusctl policy validate FILE``: the file is valid (exit 0), and each key nexusd does not
    import is named on stderr."""
    path = world.claude({"enabled": True, **UNSUPPORTED})
    env = {**os.environ, "HOME": str(world.home)}
    r = subprocess.run(
        [sys.executable, "-m", "nexusd.cli.ctl", "policy", "validate", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    for key in UNSUPPORTED:
        assert f"sandbox.{key}:" in r.stderr, (key, r.stderr)
    assert "sandbox.enabled:" not in r.stderr


def test_a_claude_project_file_only_narrows(world: World):
    (world.ws / ".claude").mkdir()
    (world.ws / ".claude" / "settings.json").write_text(
        json.dumps({"sandbox": {"enabled": False, "filesystem": {"denyRead": ["./private"], "allowWrite": ["~"]}}})
    )
    world.claude({"enabled": True})
    store = world.store()
    store.trust("add", str(world.ws))
    pol = store.policy_for(str(world.ws))
    s = sandbox_settings(pol)
    assert s.enabled and s.allow_write == ()
    assert s.deny_read == (str(world.ws / "private"),)  # ./ is the project root for a project's settings
    assert len(pol.sandbox_ignored) == 2


def test_the_daemon_names_the_ignored_keys_when_it_starts(daemon_factory: Any, tmp_path: Path):
    """A real daemon, started with a Claude settings file holding keys nexusd has not: each is in its log."""
    import time

    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"sandbox": {"enabled": True, **UNSUPPORTED}}))
    policy = "[claude]\nimport_settings = true\nmanaged_settings = '/nonexistent.json'\n"
    # Claude Code's settings are read where Claude Code reads them (CLAUDE_CONFIG_DIR, which the test
    # environment points elsewhere)
    d = daemon_factory(policy=policy, env={"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "sandbox.ripgrep" not in d.log.read_text():
        time.sleep(0.1)
    log = d.log.read_text()
    for key in UNSUPPORTED:
        assert f"sandbox.{key}:" in log, (key, log[-2000:])
