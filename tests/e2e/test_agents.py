"""End to end: the real Claude Code, Gemini CLI and Codex CLI, a fake model API, the real daemon, nexus-hook.

Each test runs one CLI in ``-p`` mode in a throwaway HOME and project directory. The fake API scripts one
tool call; we then check the effect on disk and what the model was told in the next request. Rule-based
scenarios need the policy engine's rules (``[permissions] allow/deny`` in the user layer).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir
from tests.e2e.answering import run_answering
from tests.e2e.conftest import CACHE as REPO_CACHE
from tests.e2e.conftest import AgentCLIs
from tests.e2e.fake_apis import FakeAPI, ToolCall, serve

pytestmark = pytest.mark.e2e

POLICY = """
[permissions]
allow = ["Bash(touch *)", "Write", "Edit", "Read", "run_shell_command(touch *)", "write_file"]
deny = ["Bash(rm *)", "run_shell_command(rm *)"]
"""
CLI_TIMEOUT = 120.0


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    api: FakeAPI
    project: Path
    prompts: list[protocol.PendingItem]
    agent_exes: list[str] = dataclasses.field(default_factory=list)  # each prompt's agent_pid, seen while asked

    def told(self) -> str:
        """Everything the model got back about its tool call."""
        return "\n".join(self.api.tool_results() + self.api.function_responses() + self.api.codex_outputs())

    def explain(self) -> str:
        return (
            f"rc={self.proc.returncode}\nstdout={self.proc.stdout[-600:]}\nstderr={self.proc.stderr[-1500:]}\n"
            f"paths={self.api.paths}\ntold={self.told()}"
        )


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    root = short_tmpdir()
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    yield home, project


def nexus_env(daemon: DaemonHandle | None) -> dict[str, str]:
    if daemon is not None:
        keys = ("NEXUS_SOCKET", "NEXUS_CONFIG_DIR", "NEXUS_STATE_DIR", "NEXUS_MANAGED_DIR")
        return {k: daemon.env[k] for k in keys}
    return {"NEXUS_SOCKET": str(short_tmpdir() / "no-daemon.sock")}


def base_env(home: Path, daemon: DaemonHandle | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "IS_SANDBOX": "1",  # Claude Code refuses some modes as root without it
        # the CLIs' own scratch (Claude Code's /tmp/claude-UID, Codex's, bun's native modules) in the test's
        # home: left in /tmp, every suite run added hundreds of directories there
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir(mode=0o700, exist_ok=True)
    if "PYTHONPATH" in os.environ:  # the hook and bridge must import the nexusd under test
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(nexus_env(daemon))
    return env


# --------------------------------------------------------------------------- Claude Code


def claude_run_args(
    clis: AgentCLIs, home: Path, project: Path, api: FakeAPI, daemon: DaemonHandle | None, path: str
) -> tuple[list[str], dict[str, str]]:
    env = base_env(home, daemon) | {
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "sk-e2e-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    settings: dict[str, Any] = {}
    argv = [str(clis.claude), "-p", "do the scripted thing", "--output-format", "json", "--permission-mode", "default"]
    if path == "hook":
        command = " ".join([*clis.hook, "claude", "--timeout", "50"])
        entry = [{"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": 60}]}]
        settings["hooks"] = {"PreToolUse": entry}
    else:
        config = {
            "mcpServers": {
                "nexus": {"type": "stdio", "command": clis.mcp[0], "args": clis.mcp[1:], "env": nexus_env(daemon)}
            }
        }
        config_file = home / "mcp.json"
        config_file.write_text(json.dumps(config))
        argv += ["--mcp-config", str(config_file), "--permission-prompt-tool", "mcp__nexus__permission_prompt"]
    (home / ".claude").mkdir(exist_ok=True)
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    return argv, env


# --------------------------------------------------------------------------- Gemini CLI


def gemini_run_args(
    clis: AgentCLIs, home: Path, project: Path, api: FakeAPI, daemon: DaemonHandle | None
) -> tuple[list[str], dict[str, str]]:
    env = base_env(home, daemon) | {"GOOGLE_GEMINI_BASE_URL": api.url, "GEMINI_API_KEY": "e2e-fake"}
    command = " ".join([*clis.hook, "gemini", "--timeout", "50"])
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "hooks": {
            "BeforeTool": [{"matcher": ".*", "hooks": [{"type": "command", "command": command, "timeout": 60000}]}]
        },
    }
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    argv = [
        str(clis.gemini),
        "-p",
        "do the scripted thing",
        "--approval-mode",
        "yolo",
        "--skip-trust",
        "--output-format",
        "json",
    ]
    return argv, env


# --------------------------------------------------------------------------- running, with a UI that answers


async def run_cli(
    argv: list[str],
    env: dict[str, str],
    project: Path,
    api: FakeAPI,
    daemon: DaemonHandle | None,
    answer: str | None = None,
    message: str | None = None,
) -> Run:
    """Run the CLI; with ``answer`` set, a UI client subscribes first and answers every prompt so."""
    exes: list[str] = []

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    try:
        if daemon is None or answer is None:
            proc = await anyio.to_thread.run_sync(run)
            return Run(proc, api, project, [])
        proc, prompts = await run_answering(
            run, daemon.socket, answer, message=message, on_prompt=lambda item: exes.append(_exe(item.call.agent_pid))
        )
        return Run(proc, api, project, prompts, exes)
    finally:
        api.stop()


def _exe(pid: int | None) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe") if pid else ""
    except OSError:
        return ""


def scenario(kind: str, tool: ToolCall | list[ToolCall]) -> FakeAPI:
    return serve(FakeAPI(tool), kind)


RunFn = Callable[..., Any]


# --------------------------------------------------------------------------- Claude: hook path


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["hook", "prompt_tool"])
async def test_claude_rule_allows_write(
    path: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    target = project / "hello.txt"
    api = scenario("claude", ToolCall("Write", {"file_path": str(target), "content": "written by claude\n"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, path)
    run = await run_cli(argv, env, project, api, daemon)
    assert target.exists() and target.read_text() == "written by claude\n", run.explain()


@pytest.mark.anyio
async def test_claude_hook_rule_allows_bash_edit_read(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    # Bash
    api = scenario("claude", ToolCall("Bash", {"command": "touch made-by-bash", "description": "touch"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    run = await run_cli(argv, env, project, api, daemon)
    assert (project / "made-by-bash").exists(), run.explain()
    # Edit: Claude refuses to edit a file it has not read in the session, so the model reads, then edits.
    notes = project / "notes.txt"
    notes.write_text("secret-free content 42\n")
    script = [
        ToolCall("Read", {"file_path": str(notes)}, id="toolu_e2e_read"),
        ToolCall("Edit", {"file_path": str(notes), "old_string": "42", "new_string": "43"}, id="toolu_e2e_edit"),
    ]
    api = scenario("claude", script)
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    run = await run_cli(argv, env, project, api, daemon)
    assert "secret-free content 42" in run.told(), run.explain()
    assert notes.read_text() == "secret-free content 43\n", run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["hook", "prompt_tool"])
async def test_claude_rule_denies_and_model_sees_why(
    path: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep.txt"
    victim.write_text("keep me\n")
    api = scenario("claude", ToolCall("Bash", {"command": f"rm {victim}", "description": "remove"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, path)
    run = await run_cli(argv, env, project, api, daemon)
    assert victim.exists(), run.explain()
    assert "nexusd" in run.told() and "rm *)" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "answer"), [("hook", "allow"), ("hook", "deny"), ("prompt_tool", "allow"), ("hook", "timeout")]
)
async def test_claude_person_answers(
    path: str, answer: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(pending_timeout=2.0)  # no rules: Bash needs a person
    target = project / "asked-for"
    api = scenario("claude", ToolCall("Bash", {"command": f"mkdir {target}", "description": "make a dir"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, path)
    run = await run_cli(argv, env, project, api, daemon, answer=answer, message="ask me tomorrow")
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert call.provider == "claude" and call.tool == "Bash" and call.input["command"] == f"mkdir {target}"
    if path == "hook":
        assert call.mode == "default" and call.agent_request_id == "toolu_e2e_01" and call.session
    if answer == "allow":
        assert target.is_dir(), run.explain()
    else:
        assert not target.exists(), run.explain()
        assert "nexusd" in run.told(), run.explain()
        if answer == "deny":
            assert "ask me tomorrow" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("on_no_ui", ["auto", "ask"])
async def test_claude_no_ui_hand_back_is_never_an_allow(
    on_no_ui: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    """No UI, no [notify]: the hook's default (auto) denies in -p runs (Claude's entrypoint there is not the
    interactive CLI's), and even a forced hand-back (``ask``) must not run the call: -p has no dialog to
    show it in (issue 18: an ask is never an allow)."""
    home, project = world
    daemon = daemon_factory()  # no rules: Bash needs a person, and none is connected
    target = project / "handed-back"
    api = scenario("claude", ToolCall("Bash", {"command": f"mkdir {target}", "description": "make a dir"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    run = await run_cli(argv, env | {"NEXUS_HOOK_ON_NO_UI": on_no_ui}, project, api, daemon)
    assert not target.exists(), run.explain()
    from nexusd.client import Client

    with Client(socket_path=str(daemon.socket), role="admin", name="e2e") as c:
        records = [r for r in c.call(protocol.Audit()).records if r.tool == "Bash"]
    assert records and records[-1].decision == ("ask" if on_no_ui == "ask" else "deny"), records
    assert "no nexusd UI is connected" in records[-1].reason, records[-1]
    print("no-UI decision:", records[-1].decision, records[-1].reason)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["hook", "prompt_tool"])
async def test_claude_daemon_down_denies(path: str, agent_clis: AgentCLIs, world: tuple[Path, Path]) -> None:
    home, project = world
    target = project / "never.txt"
    api = scenario("claude", ToolCall("Write", {"file_path": str(target), "content": "x"}))
    argv, env = claude_run_args(agent_clis, home, project, api, None, path)
    run = await run_cli(argv, env, project, api, None)
    assert not target.exists(), run.explain()
    assert "not reachable" in run.told(), run.explain()


# --------------------------------------------------------------------------- Gemini: BeforeTool hook in yolo mode


@pytest.mark.anyio
async def test_gemini_rule_allows_shell_and_write(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    api = scenario("gemini", ToolCall("run_shell_command", {"command": "touch made-by-gemini", "description": "touch"}))
    argv, env = gemini_run_args(agent_clis, home, project, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert (project / "made-by-gemini").exists(), run.explain()
    target = project / "g.txt"
    api = scenario("gemini", ToolCall("write_file", {"file_path": str(target), "content": "from gemini\n"}))
    argv, env = gemini_run_args(agent_clis, home, project, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert target.exists() and target.read_text() == "from gemini\n", run.explain()


@pytest.mark.anyio
async def test_gemini_rule_denies_and_model_sees_why(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep.txt"
    victim.write_text("keep\n")
    api = scenario("gemini", ToolCall("run_shell_command", {"command": f"rm {victim}", "description": "rm"}))
    argv, env = gemini_run_args(agent_clis, home, project, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert victim.exists(), run.explain()
    assert "nexusd" in run.told() and "rm *)" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_gemini_person_answers(
    answer: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    target = project / "asked-dir"
    api = scenario("gemini", ToolCall("run_shell_command", {"command": f"mkdir {target}", "description": "mkdir"}))
    argv, env = gemini_run_args(agent_clis, home, project, api, daemon)
    run = await run_cli(argv, env, project, api, daemon, answer=answer, message="not today")
    assert len(run.prompts) == 1, run.explain()
    assert run.prompts[0].call.provider == "gemini" and run.prompts[0].call.tool == "run_shell_command"
    if answer == "allow":
        assert target.is_dir(), run.explain()
    else:
        assert not target.exists(), run.explain()
        assert "not today" in run.told(), run.explain()


@pytest.mark.anyio
async def test_gemini_daemon_down_denies(agent_clis: AgentCLIs, world: tuple[Path, Path]) -> None:
    home, project = world
    target = project / "never"
    api = scenario("gemini", ToolCall("run_shell_command", {"command": f"touch {target}", "description": "touch"}))
    argv, env = gemini_run_args(agent_clis, home, project, api, None)
    run = await run_cli(argv, env, project, api, None)
    assert not target.exists(), run.explain()
    assert "not reachable" in run.told(), run.explain()


# --------------------------------------------------------------------------- Codex CLI: PreToolUse + PermissionRequest

CODEX_PROVIDER = """model = "gpt-fake"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "NEXUS_E2E_FAKE_KEY"
"""


@pytest.fixture
def codex_home() -> Iterator[Path]:
    """CODEX_HOME outside /tmp: Codex refuses to set up its sandbox helper under a temporary directory,
    and its workspace-write sandbox (``--approve-for-me``) cannot run without it."""
    import shutil
    import tempfile

    # the checkout itself may sit under /tmp (a CI clone): /var/tmp is not Codex's "temporary dir"
    base = REPO_CACHE if not str(REPO_CACHE.resolve()).startswith("/tmp/") else Path("/var/tmp")
    root = base / "nexusd-codex-homes"
    root.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="h", dir=root))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def codex_run_args(
    clis: AgentCLIs,
    home: Path,
    codex_home: Path,
    api: FakeAPI,
    daemon: DaemonHandle | None,
    *,
    approve_for_me: bool = False,
    hook_command: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Codex in ``exec`` mode with the provider pointed at the fake API and nexus-hook installed by the
    real ``nexusctl install codex`` (so its trust entries are what the real CLI checks): no
    ``--dangerously-bypass-hook-trust``. ``hook_command`` replaces the command (a broken install)."""
    env = base_env(home, daemon) | {"CODEX_HOME": str(codex_home), "NEXUS_E2E_FAKE_KEY": "sk-e2e-fake"}
    config = codex_home / "config.toml"
    config.write_text(CODEX_PROVIDER.format(url=api.url))
    if hook_command is None:
        proc = subprocess.run(
            [*_nexusctl(), "install", "codex"], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
    else:
        from nexus_clients import codex_settings

        _, text = codex_settings.plan_text(
            config, lambda d: codex_settings.install(d, config, hook_command, 60), [], restore=False
        )
        assert text is not None
        config.write_text(text)
    assert "trusted_hash" in config.read_text()
    argv = [str(clis.codex), "exec", "--skip-git-repo-check", "--color", "never"]
    argv += ["--approve-for-me"] if approve_for_me else ["-s", "danger-full-access"]
    return [*argv, "do the scripted thing"], env


def _nexusctl() -> list[str]:
    import sys

    script = Path(sys.executable).parent / "nexusctl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nexusd.cli.ctl"]


def codex_call(command: str, call_id: str = "call_e2e_01", **extra: Any) -> ToolCall:
    return ToolCall("exec_command", {"cmd": command, **extra}, id=call_id)


@pytest.mark.anyio
async def test_codex_rule_allows_shell(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    api = scenario("codex", codex_call("touch made-by-codex"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert (project / "made-by-codex").exists(), run.explain()


@pytest.mark.anyio
async def test_codex_rule_denies_and_model_sees_why(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep.txt"
    victim.write_text("keep\n")
    api = scenario("codex", codex_call(f"rm {victim}"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert victim.exists(), run.explain()
    assert "nexusd" in run.told() and "rm *)" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_codex_person_answers(
    answer: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """``--approve-for-me`` runs Codex with approval on-request (hooks see ``default``): no rule covers
    mkdir, so nexusd asks, and the UI's answer decides."""
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    target = project / "asked-dir"
    api = scenario("codex", codex_call(f"mkdir {target}"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon, approve_for_me=True)
    run = await run_cli(argv, env, project, api, daemon, answer=answer, message="not today")
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert call.provider == "codex" and call.tool == "Bash" and call.input["command"] == f"mkdir {target}"
    assert call.mode == "on-request" and call.agent_request_id == "call_e2e_01" and call.session
    assert call.workspace == str(project), "the workspace comes from the session, not the model's workdir"
    if answer == "allow":
        assert target.is_dir(), run.explain()
    else:
        assert not target.exists(), run.explain()
        assert "not today" in run.told(), run.explain()


@pytest.mark.anyio
async def test_codex_asked_with_no_ui_denies(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    target = project / "nobody-asked"
    api = scenario("codex", codex_call(f"mkdir {target}"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon, approve_for_me=True)
    run = await run_cli(argv, env, project, api, daemon)
    assert not target.exists(), run.explain()
    assert "nexusd" in run.told(), run.explain()


@pytest.mark.anyio
async def test_codex_exec_never_asks(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """``codex exec`` runs with approval "never", which Codex tells hooks as bypassPermissions: nexusd
    must take it for dont_ask (deny what would be asked), not for bypass (allow everything), and say so in
    Codex's terms (its approval policy), with no stray ".." after Codex adds its own period."""
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    target = project / "never-asked"
    api = scenario("codex", codex_call(f"mkdir {target}"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon)
    run = await run_cli(argv, env, project, api, daemon, answer="allow")
    assert not run.prompts and not target.exists(), run.explain()
    told = run.told()
    assert 'approval policy "never"' in told and "dont_ask" not in told, run.explain()
    assert ".." not in told.replace("...", ""), run.explain()


@pytest.mark.anyio
async def test_codex_permission_request_reaches_the_queue(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """A command that asks Codex for escalation (outside its workspace-write sandbox) raises Codex's
    PermissionRequest after PreToolUse: both reach nexusd's queue, and the allow lets Codex run it."""
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    outside = codex_home / "outside-the-sandbox"
    call = codex_call(f"touch {outside}", sandbox_permissions="require_escalated", justification="needs out")
    api = scenario("codex", call)
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon, approve_for_me=True)
    run = await run_cli(argv, env, project, api, daemon, answer="allow")
    assert [p.call.input.get("description") for p in run.prompts] == [None, "needs out"], run.explain()
    assert outside.exists(), run.explain()


@pytest.mark.anyio
async def test_codex_daemon_down_denies(agent_clis: AgentCLIs, world: tuple[Path, Path], codex_home: Path) -> None:
    home, project = world
    target = project / "never"
    api = scenario("codex", codex_call(f"touch {target}"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, None)
    run = await run_cli(argv, env, project, api, None)
    assert not target.exists(), run.explain()
    assert "not reachable" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("broken", ["missing", "crashing"])
async def test_codex_broken_hook_denies(
    broken: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """Codex runs the call when a hook exits with anything but 2. The installed command ends in
    ``|| exit 2``: a removed venv (command not found, 127) and an interpreter that dies before nexus-hook
    answers (a shadowed package: ImportError, exit 1) both block."""
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    target = project / "made-by-broken"
    api = scenario("codex", codex_call(f"touch {target}"))
    from nexus_clients import agent_settings

    if broken == "missing":
        command = agent_settings.hook_command("codex", 55, executable=str(home / "gone" / "nexus-hook")) + " || exit 2"
        argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon, hook_command=command)
    else:  # the interpreter dies before the hook answers (exit 1). The installed command runs python -I, so
        # a PYTHONPATH planted by the agent no longer shadows our package: the crash is the command's own.
        import shlex
        import sys

        crash = [sys.executable, "-IS", "-c", "raise RuntimeError('broken install')", "codex"]
        argv, env = codex_run_args(
            agent_clis, home, codex_home, api, daemon, hook_command=shlex.join(crash) + " || exit 2"
        )
    run = await run_cli(argv, env, project, api, daemon)
    assert not target.exists(), run.explain()
    assert run.told(), run.explain()


# --------------------------------------------------------------------------- Claude: PermissionRequest and onFailure


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_claude_permission_request_reaches_the_queue(
    answer: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    """Only the PermissionRequest hook installed: the ask Claude Code raises itself (no rule allows mkdir
    in default mode) is decided in nexusd's queue instead of a dialog nobody watches."""
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    target = project / "asked-by-claude"
    api = scenario("claude", ToolCall("Bash", {"command": f"mkdir {target}", "description": "make a dir"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    settings["hooks"] = {"PermissionRequest": settings["hooks"]["PreToolUse"]}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    run = await run_cli(argv, env, project, api, daemon, answer=answer, message="not from here")
    assert len(run.prompts) == 1, run.explain()
    assert run.prompts[0].call.provider == "claude" and run.prompts[0].call.tool == "Bash"
    if answer == "allow":
        assert target.is_dir(), run.explain()
    else:
        assert not target.exists(), run.explain()
        assert "not from here" in run.told(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("on_failure", ["block", None])
async def test_claude_missing_hook_blocks_only_with_on_failure(
    on_failure: str | None, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    """A removed venv: the hook command is not found (exit 127). Claude Code (2.1.330 here, in acceptEdits,
    where it would not ask itself) lets the call through by default; with ``"onFailure": "block"``, which
    ``nexusctl install claude`` writes for 2.1.295 and later, the call is blocked."""
    from nexus_clients import agent_settings

    home, project = world
    daemon = daemon_factory(policy=POLICY)
    target = project / "through-a-broken-hook.txt"
    api = scenario("claude", ToolCall("Write", {"file_path": str(target), "content": "x\n"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    argv[argv.index("--permission-mode") + 1] = "acceptEdits"  # Claude itself would let the Write run
    command = agent_settings.hook_command("claude", 50, executable=str(home / "removed-venv" / "nexus-hook"))
    settings = agent_settings.claude_install({}, command, on_failure_block=on_failure == "block")
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    version = agent_settings.claude_version(str(agent_clis.claude))
    assert version is not None and version >= agent_settings.ON_FAILURE_SINCE
    run = await run_cli(argv, env, project, api, daemon)
    if on_failure == "block":
        assert not target.exists(), run.explain()
    else:
        assert target.exists(), "Claude Code fails open without onFailure: " + run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["notes.txt", ".codex/config.toml"])
async def test_codex_apply_patch_files_are_checked(
    target: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """The model types ``apply_patch <<'EOF' …`` into Codex's shell tool; Codex applies it itself and its hook
    says Bash. nexusd sees the patch's files: an ApplyPatch rule lets a plain file through, while the
    project's Codex config is a protected path that no rule opens (codex exec never asks: denied)."""
    home, project = world
    daemon = daemon_factory(policy='[permissions]\nallow = ["ApplyPatch"]\n')
    (project / ".codex").mkdir()
    patch = f"*** Begin Patch\n*** Add File: {target}\n+written by a patch\n*** End Patch"
    api = scenario("codex", codex_call(f"apply_patch <<'EOF'\n{patch}\nEOF\n"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    if target == "notes.txt":
        assert (project / target).read_text() == "written by a patch\n", run.explain()
    else:
        assert not (project / target).exists(), run.explain()
        assert "nexusd" in run.told(), run.explain()


@pytest.mark.anyio
async def test_claude_subagent_call_is_attributed(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    """The model starts a subagent (Agent tool); the subagent's Bash call reaches nexusd with Claude Code's
    ``agent_id`` / ``agent_type`` as the call's subagent attribution, shown to the UI that answers it."""
    home, project = world
    daemon = daemon_factory(policy='[permissions]\nallow = ["Agent", "Task"]\n', pending_timeout=10.0)
    target = project / "made-by-subagent"
    script = [
        ToolCall("Agent", {"description": "make a dir", "prompt": "make the dir", "subagent_type": "general-purpose"},
                 id="toolu_e2e_agent"),
        ToolCall("Bash", {"command": f"mkdir {target}", "description": "mkdir"}, id="toolu_e2e_sub",
                 first_message_has="make the dir"),
    ]  # fmt: skip
    api = scenario("claude", script)
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    run = await run_cli(argv, env, project, api, daemon, answer="allow")
    asked = [p.call for p in run.prompts if p.call.tool == "Bash"]
    assert len(asked) == 1, run.explain()
    assert asked[0].subagent_id and asked[0].subagent_type == "general-purpose", asked[0]
    assert target.is_dir(), run.explain()


@pytest.mark.anyio
async def test_codex_workspace_is_not_the_models_workdir(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """The model sets ``workdir: "/"`` (Codex's hook cwd follows it) in an ``--ephemeral`` session, which
    has no transcript: the workspace is still the directory Codex runs in (its process's cwd)."""
    home, project = world
    daemon = daemon_factory(pending_timeout=5.0)
    api = scenario("codex", codex_call("mkdir made-at-root-by-a-model", workdir="/"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon, approve_for_me=True)
    argv.insert(argv.index("exec") + 1, "--ephemeral")
    run = await run_cli(argv, env, project, api, daemon, answer="deny")
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert call.cwd == "/" and call.workspace == str(project), call
    assert run.agent_exes[0].endswith("/codex"), run.agent_exes  # the queue names Codex, not the hook's shell
    assert not Path("/made-at-root-by-a-model").exists()


@pytest.mark.anyio
async def test_codex_runs_allowed_shell_calls_in_nexusd_sandbox(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path], codex_home: Path
) -> None:
    """With ``[sandbox] enabled``, nexusd allows a shell call by rewriting it to run in bubblewrap; Codex
    takes the rewrite (PreToolUse ``allow`` + ``updatedInput``) and runs the sandbox wrapper the deciding
    daemon wrote: its session record shows the rewritten command, and the command's effect inside the
    workspace happens."""
    home, project = world
    daemon = daemon_factory(policy='[permissions]\nallow = ["Bash(touch *)"]\n\n[sandbox]\nenabled = true\n')
    api = scenario("codex", codex_call("touch inside-the-sandbox"))
    argv, env = codex_run_args(agent_clis, home, codex_home, api, daemon)
    run = await run_cli(argv, env, project, api, daemon)
    assert (project / "inside-the-sandbox").exists(), run.explain()
    rollouts = "".join(p.read_text() for p in (codex_home / "sessions").rglob("*.jsonl"))
    assert "/bin/sh " in rollouts and "/sandbox/" in rollouts and ".sh " in rollouts, run.explain()
