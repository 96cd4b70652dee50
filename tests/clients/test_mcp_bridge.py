"""``nexus-mcp`` driven by the official ``mcp`` SDK client over stdio, plus raw JSON-RPC edge cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from nexus_clients import mcp_bridge

from nexusd import protocol
from tests.conftest import DaemonHandle, short_tmpdir

pytestmark = pytest.mark.anyio
BRIDGE = [sys.executable, "-m", "nexus_clients.mcp_bridge"]


def params(env: dict[str, str], cwd: Path | None = None) -> StdioServerParameters:
    keep = {k: env[k] for k in ("NEXUS_SOCKET", "NEXUS_CONFIG_DIR", "NEXUS_STATE_DIR", "PYTHONPATH") if k in env}
    env = keep | {"NEXUS_SESSION": "mcp-test"}
    return StdioServerParameters(command=BRIDGE[0], args=BRIDGE[1:], env=env, cwd=cwd)


def payload(result: Any) -> dict[str, Any]:
    assert result.structured_content is None, "Claude rejects a prompt-tool result with structured content"
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


async def test_initialize_and_list(daemon: DaemonHandle) -> None:
    async with Client(params(daemon.env)) as client:
        assert client.server_info is not None and client.server_info.name == "nexus"
        assert client.protocol_version in mcp_bridge.HANDSHAKE_VERSIONS
        assert client.server_capabilities.tools is not None
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["permission_prompt"]
        assert tools[0].input_schema["required"] == ["tool_name", "input"]


async def test_call_allow_echoes_the_input(daemon: DaemonHandle, tmp_path: Path) -> None:
    # A read inside the directory the agent runs in: allowed without a person, under any engine.
    (tmp_path / "readme.txt").write_text("hello\n")
    tool_input = {"file_path": str(tmp_path / "readme.txt"), "offset": 3}
    async with Client(params(daemon.env, cwd=tmp_path)) as client:
        result = await client.call_tool(
            "permission_prompt", {"tool_name": "Read", "input": tool_input, "tool_use_id": "toolu_7"}
        )
    assert not result.is_error
    assert payload(result) == {"behavior": "allow", "updatedInput": tool_input}


async def test_call_deny_without_a_person(daemon: DaemonHandle) -> None:
    async with Client(params(daemon.env)) as client:
        result = await client.call_tool(
            "permission_prompt", {"tool_name": "Bash", "input": {"command": "rm -rf build"}, "tool_use_id": "t"}
        )
    body = payload(result)
    assert body["behavior"] == "deny" and body["message"].startswith("nexusd")
    assert "updatedInput" not in body


async def test_person_allows_through_ui(daemon: DaemonHandle) -> None:
    import anyio

    from nexusd.client import AsyncClient

    async with AsyncClient(socket_path=str(daemon.socket), role="ui", name="test-ui") as ui:
        events = ui.subscribe().__aiter__()
        assert isinstance(await events.__anext__(), protocol.Snapshot)
        async with Client(params(daemon.env)) as client, anyio.create_task_group() as tg:
            box: dict[str, Any] = {}

            async def call() -> None:
                box["r"] = await client.call_tool(
                    "permission_prompt",
                    {"tool_name": "Bash", "input": {"command": "mkdir -p build"}, "tool_use_id": "u1"},
                )

            tg.start_soon(call)
            with anyio.fail_after(20):
                async for event in events:
                    if isinstance(event, protocol.Prompt):
                        assert event.item.call.session == "mcp-test"
                        assert event.item.call.agent_request_id == "u1"
                        await ui.call(protocol.Answer(id=event.item.id, decision="allow"))
                        break
        assert payload(box["r"]) == {"behavior": "allow", "updatedInput": {"command": "mkdir -p build"}}


async def test_daemon_down_denies() -> None:
    env = {"NEXUS_SOCKET": str(short_tmpdir() / "absent.sock")}
    async with Client(params(env)) as client:
        result = await client.call_tool("permission_prompt", {"tool_name": "Read", "input": {"file_path": "/x"}})
    body = payload(result)
    assert body["behavior"] == "deny" and "not reachable" in body["message"]


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"tool_name": 5, "input": {}},
        {"tool_name": "Bash", "input": "ls"},
        {"tool_name": "Bash"},
        {"tool_name": "Bash", "input": {}, "tool_use_id": 9},
    ],
)
async def test_malformed_arguments_deny(arguments: dict[str, Any], daemon: DaemonHandle) -> None:
    async with Client(params(daemon.env)) as client:
        result = await client.call_tool("permission_prompt", arguments)
    assert result.is_error
    body = payload(result)
    assert body["behavior"] == "deny" and "malformed" in body["message"]


async def test_unknown_tool_is_an_error() -> None:
    from mcp.shared.exceptions import MCPError

    env = {"NEXUS_SOCKET": str(short_tmpdir() / "absent.sock")}
    async with Client(params(env)) as client:
        with pytest.raises(MCPError):
            await client.call_tool("approve_everything", {})


# --------------------------------------------------------------------------- raw JSON-RPC


def raw_exchange(lines: list[bytes]) -> list[dict[str, Any]]:
    env = dict(os.environ) | {"NEXUS_SOCKET": str(short_tmpdir() / "absent.sock")}
    proc = subprocess.run(
        BRIDGE, input=b"\n".join(lines) + b"\n", capture_output=True, env=env, timeout=20, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in proc.stdout.splitlines()]


def init(version: str, msg_id: int = 1) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        }
    ).encode()


def test_version_negotiation() -> None:
    replies = raw_exchange([init("2025-06-18", 1), init("1999-01-01", 2), init("2024-11-05", 3)])
    assert [r["result"]["protocolVersion"] for r in replies] == ["2025-06-18", mcp_bridge.LATEST_VERSION, "2024-11-05"]


def test_jsonrpc_errors() -> None:
    replies = raw_exchange(
        [
            b"{not json",
            b"[]",
            b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}',
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}',
            b'{"jsonrpc":"2.0","id":4,"method":"ping"}',
        ]
    )
    assert [r.get("error", {}).get("code") for r in replies] == [-32700, -32600, -32600, -32601, -32602, None]
    assert replies[-1] == {"jsonrpc": "2.0", "id": 4, "result": {}}
