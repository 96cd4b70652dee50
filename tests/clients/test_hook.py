"""``nexus-hook`` as agents run it: a fresh process per call, stdin in, answer out, every failure a deny.

The daemon is the real one (``daemon_factory``). Faults a real daemon will not produce on demand (garbage
replies, a peer that never answers) come from tiny socket servers in this file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from nexus_clients import agent_settings

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir

HOOK = agent_settings.hook_launcher_argv()  # as the installers write it: python -IS …/nexus-hook.py


def claude_input(event: str = "PreToolUse", tool: str = "Bash", tool_input: dict | None = None) -> dict:
    data: dict[str, Any] = {
        "session_id": "sess-hook",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": "/tmp",
        "hook_event_name": event,
        "permission_mode": "default",
        "tool_name": tool,
        "tool_input": tool_input if tool_input is not None else {"command": "mkdir -p build/out"},
    }
    if event == "PreToolUse":
        data["tool_use_id"] = "toolu_1"
    return data


def gemini_input(tool: str = "run_shell_command", tool_input: dict | None = None) -> dict:
    return {
        "session_id": "sess-gem",
        "transcript_path": "/tmp/x.json",
        "cwd": "/tmp",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-01-01T00:00:00Z",
        "tool_name": tool,
        "tool_input": tool_input if tool_input is not None else {"command": "mkdir -p build/out"},
    }


def run_hook(
    args: list[str], stdin: bytes | dict, env: dict[str, str], timeout: float = 30.0
) -> subprocess.CompletedProcess[bytes]:
    data = json.dumps(stdin).encode() if isinstance(stdin, dict) else stdin
    return subprocess.run([*HOOK, *args], input=data, env=env, capture_output=True, timeout=timeout, check=False)


def no_daemon_env() -> dict[str, str]:
    env = dict(os.environ)
    env["NEXUS_SOCKET"] = str(short_tmpdir() / "absent.sock")
    return env


def pre_decision(proc: subprocess.CompletedProcess[bytes]) -> tuple[str, str]:
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse"
    return spec["permissionDecision"], spec["permissionDecisionReason"]


# --------------------------------------------------------------------------- faulty peers


@pytest.fixture
def fake_server(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A Unix socket that misbehaves as ``request.param`` says: garbage | silent | close | error."""
    mode = request.param
    path = short_tmpdir() / "fake.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen()
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)
            if mode == "close":
                conn.close()
            elif mode == "garbage":
                conn.sendall(b'\x00\xffthis is not json\n{"type": "welcome"\n')
            elif mode == "error":
                welcome = protocol.Welcome(proto=protocol.PROTOCOL_VERSION, version="0", role="agent")
                conn.sendall(protocol.encode(welcome))
                conn.sendall(b'{"type":"decision","decision":"allow"}\n')  # missing fields: must not be an allow

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    env = dict(os.environ)
    env["NEXUS_SOCKET"] = str(path)
    yield env
    stop.set()
    t.join()
    srv.close()
    for c in conns:
        c.close()


# --------------------------------------------------------------------------- claude: failures deny


def test_claude_daemon_down_denies() -> None:
    proc = run_hook(["claude"], claude_input(), no_daemon_env())
    decision, reason = pre_decision(proc)
    assert decision == "deny" and "not reachable" in reason


def test_claude_permission_request_daemon_down_denies() -> None:
    proc = run_hook(["claude"], claude_input("PermissionRequest"), no_daemon_env())
    assert proc.returncode == 0
    body = json.loads(proc.stdout)["hookSpecificOutput"]
    assert body["hookEventName"] == "PermissionRequest"
    assert body["decision"]["behavior"] == "deny" and "not reachable" in body["decision"]["message"]


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1,2]", b"\xff\xfe", json.dumps({"hook_event_name": "Stop"}).encode()],
)
def test_claude_bad_stdin_blocks_with_exit_2(stdin: bytes) -> None:
    proc = run_hook(["claude"], stdin, no_daemon_env())
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert b"nexusd denied" in proc.stderr


def test_claude_bad_tool_input_of_known_event_denies_in_shape() -> None:
    proc = run_hook(["claude"], claude_input(tool_input=None) | {"tool_input": "rm -rf /"}, no_daemon_env())
    decision, reason = pre_decision(proc)
    assert decision == "deny" and "tool_input" in reason


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["codex"],
        ["claude", "--timeout", "soon"],
        ["claude", "--on-no-ui", "allow"],
        ["claude", "--bogus"],
        ["claude", "--timeout", "0.5"],
    ],
)
def test_misconfigured_hook_blocks(args: list[str]) -> None:
    proc = run_hook(args, claude_input(), no_daemon_env())
    assert proc.returncode == 2 and b"nexusd denied" in proc.stderr


@pytest.mark.parametrize("fake_server", ["garbage", "close", "error"], indirect=True)
def test_claude_bad_peer_denies(fake_server: dict[str, str]) -> None:
    decision, _ = pre_decision(run_hook(["claude", "--timeout", "4"], claude_input(), fake_server))
    assert decision == "deny"


@pytest.mark.parametrize("fake_server", ["silent"], indirect=True)
def test_claude_slow_daemon_denies_inside_the_timeout(fake_server: dict[str, str]) -> None:
    started = time.monotonic()
    proc = run_hook(["claude", "--timeout", "3"], claude_input(), fake_server, timeout=10)
    elapsed = time.monotonic() - started
    decision, _ = pre_decision(proc)
    assert decision == "deny"
    # A loose bound (the agent would wait 60 s for a hook configured with 55): it did not wait for the default.
    assert elapsed < 8


# --------------------------------------------------------------------------- gemini: failures exit 2


@pytest.mark.parametrize("stdin", [b"", b"{", b"null", json.dumps({"hook_event_name": "AfterTool"}).encode()])
def test_gemini_bad_stdin_exits_2(stdin: bytes) -> None:
    proc = run_hook(["gemini"], stdin, no_daemon_env())
    assert proc.returncode == 2 and b"nexusd denied" in proc.stderr


def test_gemini_daemon_down_exits_2() -> None:
    proc = run_hook(["gemini"], gemini_input(), no_daemon_env())
    assert proc.returncode == 2 and b"not reachable" in proc.stderr


@pytest.mark.parametrize("fake_server", ["garbage", "silent", "error"], indirect=True)
def test_gemini_bad_peer_exits_2(fake_server: dict[str, str]) -> None:
    proc = run_hook(["gemini", "--timeout", "3"], gemini_input(), fake_server, timeout=10)
    assert proc.returncode == 2 and b"nexusd denied" in proc.stderr


# --------------------------------------------------------------------------- the real daemon


def test_claude_safe_tool_allowed(daemon: DaemonHandle) -> None:
    proc = run_hook(["claude"], claude_input(tool="Read", tool_input={"file_path": "/tmp/x"}), daemon.env)
    assert pre_decision(proc)[0] == "allow"


def test_claude_no_ui_denies_or_asks_where_configured(daemon: DaemonHandle) -> None:
    base = {k: v for k, v in daemon.env.items() if k != "CLAUDE_CODE_ENTRYPOINT"}  # not a Claude CLI: auto denies
    assert pre_decision(run_hook(["claude"], claude_input(), base))[0] == "deny"
    assert pre_decision(run_hook(["claude", "--on-no-ui", "ask"], claude_input(), base))[0] == "ask"
    env = base | {"NEXUS_HOOK_ON_NO_UI": "ask"}
    proc = run_hook(["claude"], claude_input("PermissionRequest"), env)
    assert proc.returncode == 0 and proc.stdout.strip() == b"", "no output: Claude's own dialog takes over"


def test_gemini_safe_tool_allowed_and_no_ui_denied(daemon: DaemonHandle) -> None:
    proc = run_hook(["gemini"], gemini_input("read_file", {"file_path": "/tmp/x"}), daemon.env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["decision"] == "allow"
    proc = run_hook(["gemini"], gemini_input(), daemon.env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["decision"] == "deny"


async def answer_next(
    daemon: DaemonHandle, start: Any, decision: str | None, message: str | None = None, abort: bool = False
) -> Any:
    """Subscribe as a UI, run ``start()`` (which launches the hook), answer its prompt, return its result."""
    from nexusd.client import AsyncClient

    async with AsyncClient(socket_path=str(daemon.socket), role="ui", name="test-ui") as ui:
        events = ui.subscribe().__aiter__()
        first = await events.__anext__()
        assert isinstance(first, protocol.Snapshot)
        proc = start()
        with anyio.fail_after(20):
            async for event in events:
                if isinstance(event, protocol.Prompt):
                    seen = event.item
                    if decision is not None:
                        await ui.call(protocol.Answer(id=seen.id, decision=decision, message=message, abort=abort))
                    break
        out, err = await anyio.to_thread.run_sync(proc.communicate)
        return seen, proc.returncode, out, err


def popen_hook(args: list[str], stdin: dict, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [*HOOK, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(stdin).encode())
    proc.stdin.close()
    proc.stdin = None
    return proc


@pytest.mark.anyio
async def test_claude_person_allows_through_ui(daemon: DaemonHandle) -> None:
    start = lambda: popen_hook(["claude"], claude_input(), daemon.env)  # noqa: E731
    item, rc, out, err = await answer_next(daemon, start, "allow")
    assert rc == 0, err
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "allow"
    # What the hook passed on reached the person intact.
    assert item.call.provider == "claude" and item.call.session == "sess-hook" and item.call.tool == "Bash"
    assert item.call.agent_request_id == "toolu_1" and item.call.mode == "default"
    assert item.call.agent_pid == os.getpid(), "the hook's parent (here: this test) is the agent"


@pytest.mark.anyio
async def test_claude_permission_request_person_denies_with_message(daemon: DaemonHandle) -> None:
    start = lambda: popen_hook(["claude"], claude_input("PermissionRequest"), daemon.env)  # noqa: E731
    _, rc, out, err = await answer_next(daemon, start, "deny", "use the Makefile")
    assert rc == 0, err
    body = json.loads(out)["hookSpecificOutput"]["decision"]
    assert body["behavior"] == "deny" and "use the Makefile" in body["message"]


@pytest.mark.anyio
async def test_gemini_person_denies(daemon: DaemonHandle) -> None:
    start = lambda: popen_hook(["gemini"], gemini_input(), daemon.env)  # noqa: E731
    item, rc, out, err = await answer_next(daemon, start, "deny", "not now")
    assert rc == 0, err
    answer = json.loads(out)
    assert answer["decision"] == "deny" and "not now" in answer["reason"]
    assert item.call.provider == "gemini" and item.call.tool == "run_shell_command"


@pytest.mark.anyio
@pytest.mark.parametrize("agent", ["claude", "gemini"])
async def test_a_person_stops_the_agent(daemon: DaemonHandle, agent: str) -> None:
    """Abort: deny, and the hook tells the agent to end its turn (the hooks' common continue: false)."""
    stdin = claude_input() if agent == "claude" else gemini_input()
    start = lambda: popen_hook([agent], stdin, daemon.env)  # noqa: E731
    _, rc, out, err = await answer_next(daemon, start, "deny", "you are looping", abort=True)
    assert rc == 0, err
    answer = json.loads(out)
    assert answer["continue"] is False and "you are looping" in answer["stopReason"]
    kind = answer["hookSpecificOutput"]["permissionDecision"] if agent == "claude" else answer["decision"]
    assert kind == "deny"


@pytest.mark.anyio
async def test_pending_timeout_denies(daemon_factory: Any) -> None:
    daemon = daemon_factory(pending_timeout=1.0)
    start = lambda: popen_hook(["claude"], claude_input(), daemon.env)  # noqa: E731
    _, rc, out, err = await answer_next(daemon, start, None)
    assert rc == 0, err
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"


# --------------------------------------------------------------------------- lean import path


def test_hook_import_path_is_lean() -> None:
    """What `nexus-hook` imports, in a fresh interpreter: the standard library and our lean modules only."""
    code = (
        "import sys, nexus_clients.hook, nexus_clients.claude, nexus_clients.gemini, nexus_clients.codex\n"
        "import nexus_clients.wire_lean\n"
        "import nexusd.sockpath\n"
        "bad = {'msgspec', 'anyio', 'click', 'structlog', 'tree_sitter', 'tree_sitter_bash', 'psutil',"
        " 'platformdirs', 'textual', 'mcp', 'pydantic', 'tomlkit', 'pathspec'}\n"
        "ours = sorted(m for m in sys.modules if m.startswith(('nexusd', 'nexus_clients')))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad)); print(ours)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).parent
    )
    forbidden, ours = proc.stdout.splitlines()
    assert forbidden == "[]"
    allowed = {
        "nexusd",
        "nexusd.leanos",
        "nexusd.sockpath",
        "nexusd.client_errors",
        "nexusd.linesocket",
        "nexusd.conversation",
        "nexusd.protocol_version",
        "nexusd.channel",
        "nexus_clients",
        "nexus_clients.hook",
        "nexus_clients.options",
        "nexus_clients.claude",
        "nexus_clients.gemini",
        "nexus_clients.codex",
        "nexus_clients.wire_lean",
        "nexus_clients.leanjson",
    }
    assert set(eval(ours)) <= allowed


@pytest.mark.parametrize(
    "args", [["--help"], ["-h"], ["claude", "--help"], ["gemini", "-h"], ["claude", "--timeout", "5", "--help"]]
)
def test_help_is_help_not_a_misconfiguration(args: list[str]) -> None:
    r = run_hook(args, b"", dict(os.environ))
    assert r.returncode == 0 and b"usage" in r.stdout.lower() and b"misconfigured" not in r.stdout + r.stderr


# --------------------------------------------------------------------------- no UI connected (issue 18)


@pytest.mark.parametrize(
    ("entrypoint", "mode", "expected"),
    [
        ("cli", "default", "ask"),  # Claude Code's terminal CLI shows its own dialog
        ("cli", "acceptEdits", "ask"),
        ("cli", "plan", "ask"),
        ("cli", "bypassPermissions", "deny"),  # modes where an "ask" has run the tool unprompted
        ("cli", "dontAsk", "deny"),
        ("cli", "auto", "deny"),
        ("cli", None, "deny"),
        ("sdk-ts", "default", "deny"),  # headless SDK runs: no dialog
        ("sdk-py", "default", "deny"),
        ("claude-vscode", "default", "deny"),
        ("CLI", "default", "deny"),
        (None, "default", "deny"),  # unknown: never hand back
    ],
)
def test_claude_no_ui_choice(entrypoint: str | None, mode: str | None, expected: str) -> None:
    from nexus_clients import claude

    env = {"CLAUDE_CODE_ENTRYPOINT": entrypoint} if entrypoint else {}
    payload = claude_input() | {"permission_mode": mode}
    assert claude.no_ui_choice(payload, env) == expected


@pytest.mark.parametrize(
    ("entrypoint", "mode", "expected"),
    [
        ("cli", "default", "ask"),
        ("cli", "acceptEdits", "ask"),
        ("sdk-ts", "default", "deny"),
        (None, "default", "deny"),
    ],
)
def test_claude_no_ui_auto_over_the_wire(
    daemon: DaemonHandle, entrypoint: str | None, mode: str, expected: str
) -> None:
    env = {k: v for k, v in daemon.env.items() if k not in ("CLAUDE_CODE_ENTRYPOINT", "NEXUS_HOOK_ON_NO_UI")}
    if entrypoint:
        env["CLAUDE_CODE_ENTRYPOINT"] = entrypoint
    stdin = claude_input(tool_input={"command": "npm install left-pad"}) | {"permission_mode": mode}
    decision, reason = pre_decision(run_hook(["claude"], stdin, env))
    assert decision == expected and "no nexusd UI is connected" in reason


def test_claude_no_ui_policy_deny_everywhere(daemon_factory: Any) -> None:
    daemon = daemon_factory(policy='[notify]\nno_ui = "deny"\n')
    env = daemon.env | {"CLAUDE_CODE_ENTRYPOINT": "cli"}
    decision, reason = pre_decision(run_hook(["claude", "--on-no-ui", "ask"], claude_input(), env))
    assert decision == "deny" and "no nexusd UI is connected" in reason


def test_gemini_no_ui_auto_denies(daemon: DaemonHandle) -> None:
    proc = run_hook(["gemini"], gemini_input(), daemon.env | {"NEXUS_HOOK_ON_NO_UI": "auto"})
    assert proc.returncode == 0 and json.loads(proc.stdout)["decision"] == "deny"


@pytest.mark.anyio
async def test_claude_session_end_ends_the_sessions_grants(daemon: DaemonHandle) -> None:
    """Claude Code's SessionEnd hook: "allow for this session" ends with the session (issue: grants)."""
    from nexusd.client import AsyncClient

    env = {**daemon.env, "NEXUS_HOOK_ON_NO_UI": "deny"}
    async with AsyncClient(socket_path=str(daemon.socket), role="ui", name="test-ui") as ui:
        events = ui.subscribe().__aiter__()
        assert isinstance(await events.__anext__(), protocol.Snapshot)
        proc = popen_hook(["claude"], claude_input(), env)
        with anyio.fail_after(20):
            async for event in events:
                if isinstance(event, protocol.Prompt):
                    assert event.item.verdict.suggestions, event.item.verdict
                    await ui.call(protocol.Answer(id=event.item.id, decision="allow", scope="session"))
                    break
        out, err = await anyio.to_thread.run_sync(proc.communicate)
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "allow", err

    def decided() -> str:
        proc = run_hook(["claude"], claude_input(), env)
        return json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"]

    assert decided() == "allow"  # the session's grant, no person (no UI is connected now)
    end = run_hook(
        ["claude"],
        {
            "session_id": "sess-hook",
            "transcript_path": "/tmp/x.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "SessionEnd",
            "reason": "exit",
        },
        env,
    )
    assert end.returncode == 0 and end.stdout == b"", end.stderr
    assert decided() == "deny"  # asked again, and nobody is there
    # a SessionEnd with nothing to end, or the daemon gone, is no error for Claude Code: exit 0, no output
    gone = run_hook(["claude"], {"hook_event_name": "SessionEnd", "session_id": "x"}, no_daemon_env())
    assert gone.returncode == 0 and gone.stdout == b"" and b"could not end" in gone.stderr
