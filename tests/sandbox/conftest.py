"""A sandbox world per test: workspace, a directory outside it, a fake home, the daemon's dirs, and a
policy carrying ``[sandbox]`` layers.

Every test of the world runs twice: through ``nexusctl run``'s runner (``execute``), and through the
command text the daemon hands an agent (``wrap_for_agent``: the generated ``sh`` wrapper, run by bash
from another cwd, as the agent's shell does).

The policy loader (another issue) is what puts ``sandbox_layers`` on the Policy; until the tests can
load real files through it, ``World.policy`` is a plain stand-in object with exactly those attributes.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from nexusd.policy.sandbox_settings import parse_sandbox_layer
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxPlanReply, SandboxProbe, Verdict
from nexusd.sandbox.plan import plan_command, wrap_for_agent
from nexusd.sandbox.probe import probe
from nexusd.sandbox.runner import execute


@pytest.fixture(scope="session")
def real_probe() -> SandboxProbe:
    result = probe()
    if not result.available or result.backend not in ("bwrap", "seatbelt"):  # seatbelt: on a Mac
        pytest.fail(f"these tests need a working bubblewrap (scripts/bootstrap installs it): {result}")
    return result


@dataclass
class Result:
    rc: int
    out: str
    err: str
    plan: SandboxPlanReply


@dataclass
class World:
    root: Path
    probe: SandboxProbe
    sandbox: dict[str, Any] = field(default_factory=dict)
    deny_read: list[str] = field(default_factory=list)
    deny_write: list[str] = field(default_factory=list)
    extra_rules: list[Any] = field(default_factory=list)  # permission rules (Read/Edit deny join the sandbox)
    via: str = "runner"  # runner | wrapper

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def store(self) -> PolicyStore:
        s = PolicyStore(
            config_dir=self.root / "cfg",
            state_dir=self.root / "state",
            managed_dir=self.root / "managed",
            protected_dirs=(str(self.root / "run"),),
        )
        layer = parse_sandbox_layer(self.sandbox, self.root / "cfg" / "policy.toml", home=str(self.home))
        s.policy = SimpleNamespace(
            sandbox_layers=[layer],
            sandbox_deny_read=self.deny_read,
            sandbox_deny_write=self.deny_write,
            rules=self.extra_rules,
            ask_new_sessions=False,  # planning only: the new-session trust question is the gate's
        )  # type: ignore[assignment]
        return s

    def plan(self, command: str, cwd: Path | None = None, backend: str | None = None) -> SandboxPlanReply:
        pr = self.probe if backend is None else msgspec.structs.replace(self.probe, backend=backend)
        return plan_command(command, str(cwd or self.ws), self.store(), pr, workspace=str(self.ws))

    def run(
        self, command: str, cwd: Path | None = None, backend: str | None = None, prefix: tuple[str, ...] = ()
    ) -> Result:
        plan = self.plan(command, cwd, backend)
        if self.via == "wrapper":
            pr = self.probe if backend is None else msgspec.structs.replace(self.probe, backend=backend)
            return run_wrapped(
                self.store(),
                pr,
                command,
                cwd or self.ws,
                self.ws,
                prefix=prefix,
                run_cwd=self.root,
                enable=True,
                plan=plan,
            )
        if prefix:
            plan = msgspec.structs.replace(plan, argv=[*prefix, *plan.argv])
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
            rc = execute(plan, stdout=out, err=err)  # type: ignore[arg-type]
            out.seek(0)
            err.seek(0)
            return Result(rc, out.read().decode(errors="replace"), err.read(), plan)


def agent_text(
    store: PolicyStore, probe: SandboxProbe | None, command: str, cwd: Path, ws: Path, *, enable: bool = False
) -> str | None:
    """The command text the daemon hands the agent for an allowed Bash call (None: run it as is)."""
    if enable:
        store.policy.sandbox_layers.append(parse_sandbox_layer({"enabled": True}, Path("/enable.toml")))
    call = CallInfo(
        provider="claude", session="s", tool="Bash", cwd=str(cwd), workspace=str(ws), input={"command": command}
    )
    out = wrap_for_agent(call, Verdict(decision="allow", reason="test", source="rule"), store, probe)
    return None if out is None else str(out["command"])


def wrapper_script(text: str) -> str:
    """The generated script an agent's text runs (``nexusd.sandbox.wrapper.wrapper_words``)."""
    from nexusd.sandbox.wrapper import wrapper_words

    words = wrapper_words(text)
    assert words is not None, text
    return words[1]


def run_wrapped(
    store: PolicyStore,
    probe: SandboxProbe | None,
    command: str,
    cwd: Path,
    ws: Path,
    *,
    prefix: tuple[str, ...] = (),
    run_cwd: Path | str = "/",
    enable: bool = False,
    plan: SandboxPlanReply | None = None,
) -> Result:
    """Run what the agent would run, with bash, from ``run_cwd`` (not the workspace)."""
    text = agent_text(store, probe, command, cwd, ws, enable=enable)
    argv = [*prefix, "/bin/bash", "-c", text if text is not None else command]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        rc = subprocess.run(argv, stdout=out, stderr=err, cwd=run_cwd if text is not None else cwd).returncode
        out.seek(0)
        err.seek(0)
        return Result(rc, out.read().decode(errors="replace"), err.read(), plan or SandboxPlanReply(allowed=False))


@pytest.fixture(params=["runner", "wrapper"])
def world(real_probe: SandboxProbe, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="nxsb", dir="/tmp"))
    for d in ("ws", "outside", "home", "cfg", "state", "managed", "run"):
        (root / d).mkdir()
    (root / "cfg" / "policy.toml").write_text('[permissions]\nallow = ["Bash(secret-policy-marker)"]\n')
    (root / "home" / ".bashrc").write_text("# real rc\n")
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("NEXUS_CONFIG_DIR", str(root / "cfg"))
    monkeypatch.setenv("NEXUS_STATE_DIR", str(root / "state"))
    monkeypatch.setenv("NEXUS_SOCKET", str(root / "run" / "nexusd.sock"))
    monkeypatch.setenv("NEXUS_MANAGED_DIR", str(root / "managed"))
    yield World(root, real_probe, via=str(request.param))
    subprocess.run(["chmod", "-R", "u+rwX", str(root)], check=False)
    subprocess.run(["rm", "-rf", str(root)], check=False)
