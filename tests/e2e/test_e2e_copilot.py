"""End to end: the real GitHub Copilot CLI (npm ``@github/copilot``) in BYOK offline mode
(``COPILOT_PROVIDER_BASE_URL`` at a fake OpenAI-compatible model on loopback, ``COPILOT_OFFLINE=true``: no
GitHub account, nothing leaves the machine), nexusd's ``preToolUse`` hook installed by ``nexusctl install
copilot`` into a throwaway HOME, the real daemon.

``copilot -p … --allow-all-tools`` gives Copilot's own permission prompts nothing to ask, so the hook is
the only gate: what runs is what nexusd allowed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir
from tests.e2e.answering import run_answering
from tests.e2e.fake_apis import FakeAPI, ToolCall, serve, tool_messages
from tests.e2e.npm_tools import npm_cli
from tests.e2e.test_agents import base_env

pytestmark = pytest.mark.e2e

VERSION = "1.0.102"
POLICY = """
[permissions]
allow = ["Bash(touch *)", "Write"]
deny = ["Bash(rm *)"]
"""


@dataclass
class CpRun:
    proc: subprocess.CompletedProcess[str]
    api: FakeAPI
    prompts: list[protocol.PendingItem]

    def told(self) -> str:
        return "\n".join(tool_messages(self.api))

    def explain(self) -> str:
        return (
            f"rc={self.proc.returncode}\nstdout={self.proc.stdout[-800:]}\nstderr={self.proc.stderr[-1500:]}\n"
            f"paths={self.api.paths}\ntold={self.told()}"
        )


@pytest.fixture(scope="module")
def copilot() -> Path:
    return npm_cli("@github/copilot", VERSION, "npm-copilot", "copilot")


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    root = short_tmpdir()
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    ctl = [sys.executable, "-c", "from nexusd.cli.ctl import main; main()"]
    subprocess.run(
        [*ctl, "install", "copilot"],
        check=True,
        capture_output=True,
        timeout=60,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert (home / ".copilot" / "hooks" / "nexusd.json").is_file()
    yield home, project


async def run_copilot(
    cli: Path, home: Path, project: Path, api: FakeAPI, daemon: DaemonHandle | None, answer: str | None = None
) -> CpRun:

    env = base_env(home, daemon) | {
        "COPILOT_PROVIDER_BASE_URL": api.url + "/v1",
        "COPILOT_PROVIDER_API_KEY": "e2e-fake",
        # a model id Copilot offers its create/edit tools to (for gpt-4o it offers a freeform apply_patch)
        "COPILOT_MODEL": "claude-sonnet-4",
        "COPILOT_OFFLINE": "true",
    }

    def go() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cli), "-p", "do the scripted thing", "--allow-all-tools"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    try:
        if daemon is None or answer is None:
            return CpRun(await anyio.to_thread.run_sync(go), api, [])
        proc, prompts = await run_answering(go, daemon.socket, answer, message="not today")
        return CpRun(proc, api, prompts)
    finally:
        api.stop()


def scripted(name: str, args: dict[str, Any]) -> FakeAPI:
    return serve(FakeAPI(ToolCall(name, args, id="call_e2e_1")), "openai")


@pytest.mark.anyio
async def test_copilot_rule_allows_shell_and_create(
    copilot: Path, world: tuple[Path, Path], daemon_factory: Any
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    target = project / "made-by-copilot"
    run = await run_copilot(
        copilot, home, project, scripted("bash", {"command": f"touch {target}", "description": "touch"}), daemon
    )
    assert target.exists(), run.explain()
    created = project / "created.txt"
    run = await run_copilot(
        copilot, home, project, scripted("create", {"path": str(created), "file_text": "from copilot\n"}), daemon
    )
    assert created.read_text().startswith("from copilot"), run.explain()


@pytest.mark.anyio
async def test_copilot_rule_denies_and_model_sees_why(
    copilot: Path, world: tuple[Path, Path], daemon_factory: Any
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep-me"
    victim.write_text("precious")
    run = await run_copilot(
        copilot, home, project, scripted("bash", {"command": f"rm {victim}", "description": "rm"}), daemon
    )
    assert victim.exists(), run.explain()
    assert "Bash(rm *)" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_copilot_person_answers(
    answer: str, copilot: Path, world: tuple[Path, Path], daemon_factory: Any
) -> None:
    home, project = world
    daemon = daemon_factory(pending_timeout=20.0)
    target = project / "asked-dir"
    run = await run_copilot(
        copilot,
        home,
        project,
        scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"}),
        daemon,
        answer=answer,
    )
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert (call.provider, call.tool, call.cwd) == ("copilot", "bash", str(project)), call
    assert target.is_dir() == (answer == "allow"), run.explain()
    if answer == "deny":
        assert "not today" in run.told(), run.explain()


@pytest.mark.anyio
async def test_copilot_no_ui_denies(copilot: Path, world: tuple[Path, Path], daemon_factory: Any) -> None:
    home, project = world
    daemon = daemon_factory()
    target = project / "nobody-watches"
    run = await run_copilot(
        copilot, home, project, scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"}), daemon
    )
    assert not target.exists(), run.explain()


@pytest.mark.anyio
async def test_copilot_daemon_down_denies(copilot: Path, world: tuple[Path, Path]) -> None:
    home, project = world
    target = project / "never"
    run = await run_copilot(
        copilot, home, project, scripted("bash", {"command": f"touch {target}", "description": "touch"}), None
    )
    assert not target.exists(), run.explain()
    assert "not reachable" in run.told(), run.explain()


@pytest.mark.anyio
async def test_copilot_hook_missing_denies(copilot: Path, world: tuple[Path, Path], daemon_factory: Any) -> None:
    """A removed venv: Copilot fails a preToolUse command hook closed (exit 127 is a non-zero exit)."""
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    hooks = home / ".copilot" / "hooks" / "nexusd.json"
    config = json.loads(hooks.read_text())
    config["hooks"]["preToolUse"][0]["bash"] = f"{short_tmpdir()}/gone/nexus-hook copilot --timeout 20"
    hooks.write_text(json.dumps(config))
    target = project / "never"
    run = await run_copilot(
        copilot, home, project, scripted("bash", {"command": f"touch {target}", "description": "touch"}), daemon
    )
    assert not target.exists(), run.explain()
