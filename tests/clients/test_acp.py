"""``nexus-acp``'s proxy: pass-through, the mapping of ACP tool calls, and fail-closed answers.

The decider is a plain function here (its real counterpart, the daemon, is exercised end to end against
the real ``gemini --experimental-acp`` in tests/e2e/test_e2e_acp.py); the JSON follows ACP's schema for
``session/request_permission`` (agentclientprotocol.com/protocol/tool-calls).
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from nexus_clients import acp

from nexusd.protocol import CallInfo, Decision

OPTIONS = [
    {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
]


def perm(tool_call: dict[str, Any], *, msg_id: Any = 7, sid: str = "s1", options: Any = OPTIONS) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": acp.PERMISSION,
        "params": {"sessionId": sid, "toolCall": tool_call, "options": options},
    }


EXEC = {
    "toolCallId": "c1",
    "status": "pending",
    "title": "rm -rf build",
    "content": [],
    "locations": [],
    "kind": "execute",
}


class Harness:
    def __init__(self, verdict: str | BaseException = "allow", *, on_no_ui: str = "deny", **decision: Any) -> None:
        self.client = io.BytesIO()
        self.agent = io.BytesIO()
        self.calls: list[CallInfo] = []
        self.logs: list[str] = []

        def decide(call: CallInfo) -> Decision:
            self.calls.append(call)
            if isinstance(verdict, BaseException):
                raise verdict
            return Decision(decision=verdict, reason="r", source="rule", **decision)  # type: ignore[arg-type]

        self.proxy = acp.Proxy(
            self.client, self.agent, decide, on_no_ui=on_no_ui, cwd="/bridge", agent_pid=9, log=self.logs.append
        )

    def agent_says(self, msg: Any) -> None:
        """One line from the agent (a message, or raw bytes), then wait for the answers it started."""
        self.proxy.from_agent(msg if isinstance(msg, bytes) else json.dumps(msg).encode() + b"\n")
        for w in self.proxy.workers:
            w.join(5)

    def replies(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.agent.getvalue().splitlines() if line.strip()]


def selected(reply: dict[str, Any]) -> str | None:
    outcome = reply["result"]["outcome"]
    return outcome.get("optionId") if outcome["outcome"] == "selected" else None


# --------------------------------------------------------------------------- pass-through


def test_everything_but_permission_requests_passes_through_byte_for_byte() -> None:
    h = Harness()
    lines = [
        b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\n',
        b'{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {}}}\n',
        b'{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{"path":"/a"}}\n',
    ]
    for line in lines:
        h.proxy.from_agent(line)
    assert h.client.getvalue() == b"".join(lines)
    h.proxy.from_client(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
    h.proxy.from_client(b"whatever the client sends, even garbage\n")
    assert h.agent.getvalue() == (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        b"whatever the client sends, even garbage\n"
    )
    assert h.calls == []


def test_allow_selects_allow_once_never_allow_always() -> None:
    h = Harness("allow")
    h.agent_says(perm(EXEC))
    assert h.client.getvalue() == b"", "the client never sees an answered request"
    [reply] = h.replies()
    assert reply["id"] == 7 and selected(reply) == "proceed_once"


@pytest.mark.parametrize("verdict", ["deny", "ask"])
def test_deny_and_unanswerable_ask_select_reject(verdict: str) -> None:
    h = Harness(verdict)
    h.agent_says(perm(EXEC))
    assert selected(h.replies()[0]) == "cancel"


def test_allow_without_a_one_time_option_is_a_reject() -> None:
    h = Harness("allow")
    h.agent_says(perm(EXEC, options=[OPTIONS[0], OPTIONS[2]]))
    assert selected(h.replies()[0]) == "cancel"
    h = Harness("allow")
    h.agent_says(perm(EXEC, options=[OPTIONS[0]]))
    assert h.replies()[0]["result"]["outcome"] == {"outcome": "cancelled"}


def test_reject_always_when_no_reject_once() -> None:
    h = Harness("deny")
    h.agent_says(perm(EXEC, options=[OPTIONS[1], {"optionId": "never", "name": "No", "kind": "reject_always"}]))
    assert selected(h.replies()[0]) == "never"


def test_sandbox_only_allow_is_a_reject() -> None:
    h = Harness("allow", updated_input={"command": "sandboxed rm -rf build"})
    h.agent_says(perm(EXEC))
    assert selected(h.replies()[0]) == "cancel"


@pytest.mark.parametrize("exc", [TimeoutError(), OSError("gone"), RuntimeError("boom"), KeyboardInterrupt()])
def test_decider_failures_reject(exc: BaseException) -> None:
    h = Harness(exc)
    h.agent_says(perm(EXEC))
    assert selected(h.replies()[0]) == "cancel"


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        {"toolCall": EXEC, "options": OPTIONS},
        {"sessionId": "s1", "options": OPTIONS},
        {"sessionId": "s1", "toolCall": "x", "options": OPTIONS},
        {"sessionId": "s1", "toolCall": {"kind": "execute", "title": ""}, "options": OPTIONS},
        {"sessionId": "s1", "toolCall": {"kind": 3}, "options": OPTIONS},
    ],
)
def test_malformed_requests_reject_without_asking(params: Any) -> None:
    h = Harness("allow")
    h.agent_says({"jsonrpc": "2.0", "id": 3, "method": acp.PERMISSION, "params": params})
    [reply] = h.replies()
    assert selected(reply) in ("cancel", None) and selected(reply) != "proceed_once"
    assert h.calls == []


@pytest.mark.parametrize("options", [None, "x", [], [{"kind": "allow_once"}], [{"optionId": 1, "kind": "allow_once"}]])
def test_unusable_options_never_allow(options: Any) -> None:
    h = Harness("allow")
    h.agent_says(perm(EXEC, options=options))
    assert h.replies()[0]["result"]["outcome"] == {"outcome": "cancelled"}


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session/request_permission","method":"session/update"}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"x":NaN}}\n',
        b'\xff{"jsonrpc":"2.0"}\n',
        b"not json at all\n",
    ],
)
def test_lines_that_are_not_strict_json_are_dropped(line: bytes) -> None:
    h = Harness("allow")
    h.proxy.from_agent(line)
    assert h.client.getvalue() == b"" and h.agent.getvalue() == b"" and h.calls == []


def test_a_batch_carrying_a_permission_request_is_rejected_not_forwarded() -> None:
    h = Harness("allow")
    h.agent_says([perm(EXEC, msg_id=1), {"jsonrpc": "2.0", "method": "session/update", "params": {}}])
    assert h.client.getvalue() == b""
    assert [selected(r) for r in h.replies()] == ["cancel"]


def test_a_permission_notification_is_dropped() -> None:
    h = Harness("allow")
    msg = perm(EXEC)
    del msg["id"]
    h.agent_says(msg)
    assert h.client.getvalue() == b"" and h.agent.getvalue() == b"" and h.calls == []


def test_ask_is_forwarded_to_the_editor_unchanged_when_configured() -> None:
    h = Harness("ask", on_no_ui="ask")
    raw = json.dumps(perm(EXEC)).encode() + b"\n"
    h.agent_says(raw)
    assert h.client.getvalue() == raw and h.agent.getvalue() == b""


# --------------------------------------------------------------------------- sessions and mapping


def test_session_cwd_and_mode_are_tracked() -> None:
    h = Harness("allow")
    h.proxy.from_client(
        json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/proj", "mcpServers": []}}
        ).encode()
        + b"\n"
    )
    h.proxy.from_agent(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"sessionId": "s1", "modes": {"currentModeId": "default", "availableModes": []}},
            }
        ).encode()
        + b"\n"
    )
    h.agent_says(perm(EXEC))
    assert (h.calls[-1].cwd, h.calls[-1].workspace, h.calls[-1].mode) == ("/proj", "/proj", "default")
    h.proxy.from_client(
        json.dumps(
            {"jsonrpc": "2.0", "id": 4, "method": "session/set_mode", "params": {"sessionId": "s1", "modeId": "yolo"}}
        ).encode()
        + b"\n"
    )
    h.proxy.from_agent(b'{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"no such mode"}}\n')
    h.agent_says(perm(EXEC, msg_id=7))
    assert h.calls[-1].mode == "default", "a mode change the agent refused does not count"
    h.proxy.from_client(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "session/set_mode",
                "params": {"sessionId": "s1", "modeId": "autoEdit"},
            }
        ).encode()
        + b"\n"
    )
    h.proxy.from_agent(b'{"jsonrpc":"2.0","id":5,"result":{}}\n')
    h.agent_says(perm(EXEC, msg_id=8))
    assert h.calls[-1].mode == "autoEdit"
    h.proxy.from_agent(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s1",
                    "update": {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
                },
            }
        ).encode()
        + b"\n"
    )
    h.agent_says(perm(EXEC, msg_id=9))
    assert h.calls[-1].mode == "plan"
    h.agent_says(perm(EXEC, msg_id=10, sid="unknown"))
    assert (h.calls[-1].cwd, h.calls[-1].mode) == ("/bridge", None)


def test_mapping_of_acp_tool_kinds() -> None:
    tool, inp = acp.tool_input(EXEC, "/p")
    assert (tool, inp["command"]) == ("Bash", "rm -rf build")
    tool, inp = acp.tool_input(EXEC | {"rawInput": {"command": ["git", "push", "--force"]}}, "/p")
    assert inp["command"] == "git push --force"
    new_file = {
        "kind": "edit",
        "title": "write",
        "locations": [{"path": "a.txt"}],
        "content": [{"type": "diff", "path": "/p/a.txt", "oldText": None, "newText": "hello"}],
    }
    tool, inp = acp.tool_input(new_file, "/p")
    assert (tool, inp["file_path"], inp["content"]) == ("Write", "/p/a.txt", "hello")
    change = new_file | {
        "content": [
            {"type": "diff", "path": "/p/a.txt", "oldText": "x", "newText": "y"},
            {"type": "diff", "path": "/p/.cursor/hooks.json", "oldText": "", "newText": "{}"},
        ]
    }
    tool, inp = acp.tool_input(change, "/p")
    assert tool == "Edit" and inp["file_path"] == "/p/a.txt" and inp["paths"] == ["/p/.cursor/hooks.json"]
    read = acp.tool_input({"kind": "read", "locations": [{"path": "/etc/shadow"}]}, "/p")
    assert read == ("Read", {"description": "", "file_path": "/etc/shadow"})
    assert acp.tool_input({"kind": "fetch", "title": "https://x.test/a"}, "/p")[1]["prompt"] == "https://x.test/a"
    assert acp.tool_input({"kind": "fetch", "rawInput": {"url": "https://y.test"}}, "/p")[1]["url"] == "https://y.test"
    assert acp.tool_input({"kind": "think"}, "/p")[0] == "acp:think"
    assert acp.tool_input({"title": "mystery"}, "/p")[0] == "acp:other"
    assert acp.tool_input({"kind": "switch_mode"}, "/p")[0] == "acp:switch_mode"


def test_calls_map_into_the_catalogue() -> None:
    """The canonical names the bridge sends are the catalogue's, so rules and classification apply."""
    from nexusd.core.model import ToolKind
    from nexusd.core.tools import extract, tool_info

    for kind, expected in (
        ("execute", ToolKind.SHELL),
        ("edit", ToolKind.EDIT),
        ("delete", ToolKind.EDIT),
        ("read", ToolKind.READ),
        ("search", ToolKind.READ),
        ("fetch", ToolKind.FETCH),
    ):
        assert tool_info(acp.ACP_TOOLS[kind]).kind is expected
    info = tool_info("acp:other")
    assert info.kind is ToolKind.OTHER and not info.known
    tool, inp = acp.tool_input({"kind": "delete", "locations": [{"path": "x"}]}, "/p")
    assert extract(tool_info(tool), inp).writes == ("/p/x",)


def test_answers_are_one_line_each_and_concurrent_requests_keep_their_ids() -> None:
    h = Harness("allow")
    for i in range(5):
        h.proxy.from_agent(json.dumps(perm(EXEC, msg_id=f"r{i}")).encode() + b"\n")
    deadline = time.monotonic() + 5
    for w in h.proxy.workers:
        w.join(max(0.0, deadline - time.monotonic()))
    assert sorted(r["id"] for r in h.replies()) == [f"r{i}" for i in range(5)]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session\\/request_permission","params":PARAMS}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"session/request\\u005fpermission","params":PARAMS}\n',
        b' \t{"params":PARAMS,"method":"session/request_permission","jsonrpc":"2.0","id":1}  \n',
    ],
)
def test_escaped_spellings_of_the_method_are_still_intercepted(line: bytes) -> None:
    """The client decodes JSON escapes; so does the bridge: every spelling the client reads as a permission
    request is answered by nexusd and never forwarded."""
    h = Harness("deny")
    params = json.dumps({"sessionId": "s1", "toolCall": EXEC, "options": OPTIONS}).encode()
    h.agent_says(line.replace(b"PARAMS", params))
    assert h.client.getvalue() == b"" and selected(h.replies()[0]) == "cancel" and len(h.calls) == 1
