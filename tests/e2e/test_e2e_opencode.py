"""End to end: the real OpenCode (npm ``opencode-ai``) with nexusd's plugin installed by ``nexusctl install
opencode --project``, a fake OpenAI-compatible model on loopback (``tests.e2e.fake_openai``), the real daemon.

``opencode run`` scripts one tool call; we check the effect on disk and what the model was told. OpenCode
fetches its plugin SDK and the ``@ai-sdk/openai-compatible`` provider from the npm registry on first start;
one HOME per module keeps that to one download.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from nexus_clients import agent_settings

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir
from tests.e2e.answering import run_answering
from tests.e2e.fake_apis import FakeAPI, ToolCall, serve, tool_messages
from tests.e2e.npm_tools import npm_cli
from tests.e2e.test_agents import base_env

pytestmark = pytest.mark.e2e

VERSION = "1.18.33"
POLICY = """
[permissions]
allow = ["Bash(touch *)", "Write"]
deny = ["Bash(rm *)"]
"""


@dataclass
class OcRun:
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
def opencode() -> Path:
    return npm_cli("opencode-ai", VERSION, "npm-opencode", "opencode")


@pytest.fixture(scope="module")
def oc_home() -> Path:
    home = short_tmpdir() / "home"
    home.mkdir()
    return home


@pytest.fixture
def project(oc_home: Path) -> Iterator[Path]:
    """A fresh project. OpenCode installs its plugin's packages into each project's ``.opencode`` on first
    start (~12 s from the registry): the first project's install is kept beside the module's HOME and
    hard-linked into the next ones (the plugin file itself is not: each test installs its own)."""
    root = short_tmpdir() / "project"
    root.mkdir()
    warm = oc_home.parent / "warm-dot-opencode"
    if warm.is_dir():
        shutil.copytree(warm, root / ".opencode", symlinks=True, copy_function=os.link)
    yield root
    if not warm.is_dir() and (root / ".opencode" / "node_modules").is_dir():
        shutil.copytree(
            root / ".opencode",
            warm,
            symlinks=True,
            ignore=lambda d, names: ["plugins"] if Path(d) == root / ".opencode" else [],
        )


def setup_project(project: Path, api: FakeAPI, plugin_text: str | None = None) -> None:
    """opencode.json naming the fake model, and nexusd's plugin (installed the way a user would)."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": api.url + "/v1", "apiKey": "e2e-fake"},
                "models": {"fake-model": {"name": "fake-model"}},
            }
        },
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
    }
    (project / "opencode.json").write_text(json.dumps(config))
    if plugin_text is None:
        ctl = [sys.executable, "-c", "from nexusd.cli.ctl import main; main()"]
        subprocess.run(
            [*ctl, "install", "opencode", "--project", str(project)], check=True, capture_output=True, timeout=60
        )
        assert agent_settings.opencode_plugin_path(project).is_file()
    else:
        path = agent_settings.opencode_plugin_path(project)
        path.parent.mkdir(parents=True)
        path.write_text(plugin_text)


async def run_opencode(
    cli: Path,
    home: Path,
    project: Path,
    api: FakeAPI,
    daemon: DaemonHandle | None,
    answer: str | None = None,
    extra: tuple[str, ...] = (),
) -> OcRun:

    # no models.dev fetch (no network here: it only fails, after ~2 s)
    # (base_env's TMPDIR in the home: bun extracts its native modules, ~5.5 MB each, there and never removes them)
    env = base_env(home, daemon) | {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}

    def go() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cli), "run", *extra, "do the scripted thing"],
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
            return OcRun(await anyio.to_thread.run_sync(go), api, [])
        proc, prompts = await run_answering(go, daemon.socket, answer, message="not today")
        return OcRun(proc, api, prompts)
    finally:
        api.stop()


def scripted(name: str, args: dict[str, Any]) -> FakeAPI:
    return serve(FakeAPI(ToolCall(name, args, id="call_e2e_1")), "openai")


@pytest.mark.anyio
async def test_opencode_rule_allows_shell_and_write(
    opencode: Path, oc_home: Path, project: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory(policy=POLICY)
    target = project / "made-by-opencode"
    api = scripted("bash", {"command": f"touch {target}", "description": "touch"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon)
    assert target.exists(), run.explain()
    written = project / "written.txt"
    api = scripted("write", {"filePath": str(written), "content": "from opencode\n"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon)
    assert written.read_text() == "from opencode\n", run.explain()


@pytest.mark.anyio
async def test_opencode_rule_denies_and_model_sees_why(
    opencode: Path, oc_home: Path, project: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep-me"
    victim.write_text("precious")
    api = scripted("bash", {"command": f"rm {victim}", "description": "rm"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon)
    assert victim.exists(), run.explain()
    assert "nexusd" in run.told() and "Bash(rm *)" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_opencode_person_answers(
    answer: str, opencode: Path, oc_home: Path, project: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory(pending_timeout=20.0)
    target = project / "asked-dir"
    api = scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon, answer=answer)
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert (call.provider, call.tool, call.session != "") == ("opencode", "bash", True), call
    assert call.cwd == str(project), call
    assert target.is_dir() == (answer == "allow"), run.explain()
    if answer == "deny":
        assert "not today" in run.told(), run.explain()


@pytest.mark.anyio
async def test_opencode_asked_with_no_ui_denies(
    opencode: Path, oc_home: Path, project: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory()
    target = project / "nobody-watches"
    api = scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon)
    assert not target.exists(), run.explain()
    assert "nexusd" in run.told(), run.explain()


@pytest.mark.anyio
async def test_opencode_daemon_down_denies(opencode: Path, oc_home: Path, project: Path) -> None:
    target = project / "never"
    api = scripted("bash", {"command": f"touch {target}", "description": "touch"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, None)
    assert not target.exists(), run.explain()
    assert "not reachable" in run.told(), run.explain()


@pytest.mark.anyio
async def test_opencode_hook_missing_denies(opencode: Path, oc_home: Path, project: Path, daemon_factory: Any) -> None:
    """The plugin's nexus-hook is gone (a removed venv): the call is blocked, even one a rule allows."""
    daemon = daemon_factory(policy=POLICY)
    target = project / "never"
    api = scripted("bash", {"command": f"touch {target}", "description": "touch"})
    missing = str(short_tmpdir() / "gone" / "nexus-hook")
    setup_project(project, api, agent_settings.opencode_plugin_text([missing, "opencode", "--timeout", "20"], 20))
    run = await run_opencode(opencode, oc_home, project, api, daemon)
    assert not target.exists(), run.explain()
    assert "nexus-hook could not" in run.told(), run.explain()
    assert os.path.exists(agent_settings.opencode_plugin_path(project))


@pytest.mark.anyio
async def test_opencodes_agents_are_its_modes(
    opencode: Path, oc_home: Path, project: Path, daemon_factory: Any
) -> None:
    """The default build agent is sent as mode build (nexusd's default); the plan agent as plan, which
    nexusd keeps read-only: a write is denied without asking, even with a person ready to allow."""
    daemon = daemon_factory(pending_timeout=20.0)
    target = project / "asked-dir"
    api = scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon, answer="deny")
    assert [p.call.mode for p in run.prompts] == ["build"], run.explain()
    api = scripted("bash", {"command": f"mkdir {target}", "description": "mkdir"})
    setup_project(project, api)
    run = await run_opencode(opencode, oc_home, project, api, daemon, answer="allow", extra=("--agent", "plan"))
    assert not target.exists(), run.explain()
    assert run.prompts == [], run.explain()
    assert "plan" in run.told(), run.explain()
