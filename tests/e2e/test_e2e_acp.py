"""End to end: ``nexus-acp -- gemini --experimental-acp``, the real Gemini CLI as an ACP agent, a fake Gemini
API on loopback, the real daemon, and a small ACP client written here (what Zed would be).

The client speaks ACP over the bridge's stdin/stdout (initialize, session/new, session/prompt), answers
any ``session/request_permission`` that reaches it, and records every message. Gemini asks for
permission before a shell command in its default mode, so the scripted ``run_shell_command`` turns into
a ``session/request_permission`` that the bridge must answer through nexusd.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir
from tests.e2e.answering import run_answering
from tests.e2e.conftest import AgentCLIs
from tests.e2e.fake_apis import FakeAPI, ToolCall, serve
from tests.e2e.test_agents import base_env

pytestmark = pytest.mark.e2e

POLICY = """
[permissions]
allow = ["Bash(touch *)"]
deny = ["Bash(rm *)"]
"""
TIMEOUT = 90.0
PERMISSION = "session/request_permission"


@dataclass
class AcpRun:
    messages: list[dict[str, Any]] = field(default_factory=list)  # everything the client received
    sent: list[dict[str, Any]] = field(default_factory=list)
    forwarded: list[dict[str, Any]] = field(default_factory=list)  # permission requests that reached the client
    stop_reason: str | None = None
    error: Any = None
    stderr: str = ""
    prompts: list[protocol.PendingItem] = field(default_factory=list)

    def explain(self) -> str:
        return (
            f"stop={self.stop_reason} error={self.error}\nstderr={self.stderr[-2500:]}\nmessages={self.messages[-6:]}"
        )


def bridge_argv(clis: AgentCLIs, *extra: str) -> list[str]:
    script = Path(clis.hook[0]).with_name("nexus-acp")
    prefix = [str(script)] if script.exists() else [clis.hook[0], "-m", "nexus_clients.acp"]
    return [*prefix, *extra, "--", str(clis.gemini), "--experimental-acp"]


def acp_env(home: Path, api: FakeAPI, daemon: DaemonHandle | None) -> dict[str, str]:
    (home / ".gemini").mkdir(exist_ok=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return base_env(home, daemon) | {"GOOGLE_GEMINI_BASE_URL": api.url, "GEMINI_API_KEY": "e2e-fake"}


def drive(
    argv: list[str], env: dict[str, str], project: Path, answer_forwarded: Callable[[dict[str, Any]], Any] | None
) -> AcpRun:
    """One ACP session with one prompt; returns when the prompt's response arrives (or the deadline)."""
    run = AcpRun()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=project
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    replies: dict[int, dict[str, Any]] = {}
    got = threading.Condition()
    err_chunks: list[bytes] = []
    threading.Thread(target=lambda: err_chunks.extend(iter(proc.stderr.readline, b"")), daemon=True).start()

    def send(msg: dict[str, Any]) -> None:
        run.sent.append(msg)
        proc.stdin.write((json.dumps(msg) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def reader() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = json.loads(line)
            run.messages.append(msg)
            if msg.get("method") == PERMISSION:
                run.forwarded.append(msg)
                if answer_forwarded is not None:
                    send({"jsonrpc": "2.0", "id": msg["id"], "result": answer_forwarded(msg)})
            elif "id" in msg and "method" not in msg:
                with got:
                    replies[msg["id"]] = msg
                    got.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def request(msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        with got:
            while msg_id not in replies:
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    raise AssertionError(f"no reply to {method}: {run.explain()}")
                got.wait(min(left, 0.5))
            return replies[msg_id]

    try:
        caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
        request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        new = request(2, "session/new", {"cwd": str(project), "mcpServers": []})
        sid = new["result"]["sessionId"]
        reply = request(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "do it"}]})
        run.stop_reason = (reply.get("result") or {}).get("stopReason")
        run.error = reply.get("error")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        run.stderr = b"".join(err_chunks).decode(errors="replace")
    return run


async def run_acp(
    argv: list[str],
    env: dict[str, str],
    project: Path,
    daemon: DaemonHandle | None,
    *,
    answer: str | None = None,
    answer_forwarded: Callable[[dict[str, Any]], Any] | None = None,
) -> AcpRun:
    """``drive`` in a thread; with ``answer`` a nexusd UI subscribes first and answers every prompt so."""

    def go() -> AcpRun:
        return drive(argv, env, project, answer_forwarded)

    if daemon is None or answer is None:
        return await anyio.to_thread.run_sync(go)
    run, prompts = await run_answering(go, daemon.socket, answer)
    run.prompts = prompts
    return run


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    root = short_tmpdir()
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    yield home, project


def shell(command: str) -> FakeAPI:
    return serve(FakeAPI(ToolCall("run_shell_command", {"command": command, "description": "scripted"})), "gemini")


@pytest.mark.anyio
async def test_acp_rule_allows_and_the_client_never_sees_the_request(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    target = project / "made-over-acp"
    api = shell(f"touch {target}")
    try:
        run = await run_acp(bridge_argv(agent_clis), acp_env(home, api, daemon), project, daemon)
    finally:
        api.stop()
    assert target.exists(), run.explain()
    assert run.forwarded == [], run.explain()
    assert run.stop_reason == "end_turn", run.explain()
    # every other message passed through: the prompt's session updates reached the client
    assert any(m.get("method") == "session/update" for m in run.messages), run.explain()


@pytest.mark.anyio
async def test_acp_rule_denies(agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    victim = project / "keep-me"
    victim.write_text("precious")
    api = shell(f"rm {victim}")
    try:
        run = await run_acp(bridge_argv(agent_clis), acp_env(home, api, daemon), project, daemon)
    finally:
        api.stop()
    assert victim.exists(), run.explain()
    assert run.forwarded == [], run.explain()
    assert "cancel" in json.dumps(api.function_responses()).lower(), run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow", "deny"])
async def test_acp_person_answers_in_nexusd(
    answer: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(pending_timeout=20.0)  # no rules: a shell call needs a person
    target = project / "asked-dir"
    api = shell(f"mkdir {target}")
    try:
        run = await run_acp(bridge_argv(agent_clis), acp_env(home, api, daemon), project, daemon, answer=answer)
    finally:
        api.stop()
    assert len(run.prompts) == 1, run.explain()
    call = run.prompts[0].call
    assert (call.provider, call.tool, call.mode) == ("acp", "Bash", "default"), call
    assert call.input["command"] == f"mkdir {target}" and call.cwd == str(project), call
    assert target.is_dir() == (answer == "allow"), run.explain()
    assert run.forwarded == [], run.explain()


@pytest.mark.anyio
async def test_acp_daemon_down_rejects(agent_clis: AgentCLIs, world: tuple[Path, Path]) -> None:
    home, project = world
    target = project / "never"
    api = shell(f"touch {target}")
    try:
        run = await run_acp(bridge_argv(agent_clis), acp_env(home, api, None), project, None)
    finally:
        api.stop()
    assert not target.exists(), run.explain()
    assert run.forwarded == [], run.explain()
    assert "not reachable" in run.stderr, run.explain()


@pytest.mark.anyio
@pytest.mark.parametrize("client_says", ["proceed_once", "cancel"])
async def test_acp_no_ui_ask_forwards_to_the_editor(
    client_says: str, agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    """--on-no-ui ask: nobody watches nexusd, so the editor's own dialog (our client) decides."""
    home, project = world
    daemon = daemon_factory()
    target = project / "editor-decides"
    api = shell(f"mkdir {target}")

    def editor(msg: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": client_says}}

    try:
        argv = bridge_argv(agent_clis, "--on-no-ui", "ask")
        run = await run_acp(argv, acp_env(home, api, daemon), project, daemon, answer_forwarded=editor)
    finally:
        api.stop()
    assert len(run.forwarded) == 1, run.explain()
    assert run.forwarded[0]["params"]["toolCall"]["kind"] == "execute"
    assert target.is_dir() == (client_says == "proceed_once"), run.explain()


@pytest.mark.anyio
async def test_acp_asked_with_no_ui_rejects(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory()  # no rules, nobody watching: the default --on-no-ui deny
    target = project / "nobody-watches"
    api = shell(f"mkdir {target}")
    try:
        run = await run_acp(bridge_argv(agent_clis), acp_env(home, api, daemon), project, daemon)
    finally:
        api.stop()
    assert not target.exists(), run.explain()
    assert run.forwarded == [], run.explain()
