"""``nexus-mcp``: an MCP stdio server with one tool, ``permission_prompt``, for Claude Code's
``--permission-prompt-tool mcp__nexus__permission_prompt``.

Why hand-written JSON-RPC rather than the ``mcp`` SDK's server: Claude Code gives an MCP server about
2 s in ``-p`` mode to answer ``initialize`` and ``tools/list`` before it reports the tool "not found",
and importing the SDK's server package alone costs about 0.9 s (plus pydantic and anyio) on the
machines we measured. This module imports the standard library, msgspec and nexusd's lean client, and
answers ``tools/list`` within tens of milliseconds of process start (measured by the benchmark; the
tests drive it with the official SDK's client to show conformance).

What it speaks (MCP's stdio transport: one JSON-RPC 2.0 message per line):
``initialize`` (protocol-version negotiation over the handshake-era revisions), the
``notifications/initialized`` notification, ``ping``, ``tools/list`` and ``tools/call``. Anything else
that expects an answer gets ``-32601 method not found`` (so a 2026-era client's ``server/discover``
probe falls back to the ``initialize`` handshake, as the SDK's client does).

The tool returns one text item holding ``{"behavior": "allow", "updatedInput": …}`` or
``{"behavior": "deny", "message": …}`` and never structured content (Claude rejects the result when
there is any). Every failure (daemon down, bad reply, malformed arguments, timeout) is a deny.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec

from nexus_clients.claude import HookInputError, call_from_prompt_tool, prompt_tool_deny, prompt_tool_result
from nexus_clients.options import HelpRequested, OptionError, UnknownArgument, long_options
from nexusd import __version__
from nexusd.protocol import CallInfo, Decision

SERVER_NAME = "nexus"
TOOL_NAME = "permission_prompt"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = HANDSHAKE_VERSIONS[-1]
DEFAULT_TIMEOUT = 60.0  # the daemon denies unanswered requests after 30 s; this only bounds a wedged daemon
SESSION_ENV = "NEXUS_SESSION"
MAX_LINE = 8 << 20

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

TOOL = {
    "name": TOOL_NAME,
    "title": "Ask nexusd",
    "description": (
        "Permission prompt for Claude Code: asks the nexusd permission daemon whether a tool call may run "
        "(its rules, or a person in nexus-tui) and answers allow or deny."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "description": "The tool Claude wants to run."},
            "input": {"type": "object", "description": "The tool's input."},
            "tool_use_id": {"type": "string", "description": "Claude's id for this tool use."},
        },
        "required": ["tool_name", "input"],
    },
}

Decide = Callable[[CallInfo], Decision]


def daemon_decider(socket_path: str | None, timeout: float) -> Decide:
    """Ask the daemon over a fresh connection per call (a dead daemon is noticed at the next call)."""

    def decide(call: CallInfo) -> Decision:
        from nexusd.client import Client

        with Client(socket_path=socket_path, role="agent", name="nexus-mcp", timeout=5.0) as client:
            return client.request(call, on_no_ui="deny", timeout=timeout)

    return decide


def text_result(payload: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    text = msgspec.json.encode(payload).decode()
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class Bridge:
    """The JSON-RPC state machine: feed it lines, it writes replies to ``out`` (thread-safe)."""

    def __init__(
        self,
        out: BinaryIO,
        decide: Decide,
        *,
        session: str,
        cwd: str,
        agent_pid: int | None,
        workspace: str | None,
    ) -> None:
        self.out = out
        self.decide = decide
        self.session = session
        self.cwd = cwd
        self.agent_pid = agent_pid
        self.workspace = workspace
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []

    # ------------------------------------------------------------------ framing

    def send(self, message: dict[str, Any]) -> None:
        data = msgspec.json.encode(message) + b"\n"
        with self._lock:
            self.out.write(data)
            self.out.flush()

    def reply(self, msg_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def error(self, msg_id: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError):
            self.error(None, PARSE_ERROR, "Parse error")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.error(message.get("id") if isinstance(message, dict) else None, INVALID_REQUEST, "Invalid Request")
            return
        method = message.get("method")
        msg_id = message.get("id")
        if method is None:
            return  # a response to something we never send (we make no requests): ignore
        if not isinstance(method, str) or (msg_id is not None and not isinstance(msg_id, str | int)):
            self.error(msg_id if isinstance(msg_id, str | int) else None, INVALID_REQUEST, "Invalid Request")
            return
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            if msg_id is not None:
                self.error(msg_id, INVALID_PARAMS, "params must be an object")
            return
        if "id" not in message:
            return  # notifications: initialized, cancelled, roots/list_changed ... need no answer
        self.dispatch(msg_id, method, params or {})

    # ------------------------------------------------------------------ methods

    def dispatch(self, msg_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in HANDSHAKE_VERSIONS else LATEST_VERSION
            self.reply(
                msg_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": SERVER_NAME, "title": "nexusd permission prompt", "version": __version__},
                    "instructions": f"Use {TOOL_NAME} as Claude Code's --permission-prompt-tool.",
                },
            )
        elif method == "ping":
            self.reply(msg_id, {})
        elif method == "tools/list":
            self.reply(msg_id, {"tools": [TOOL]})
        elif method == "tools/call":
            name = params.get("name")
            if name != TOOL_NAME:
                self.error(msg_id, INVALID_PARAMS, f"Unknown tool: {name!r}")
                return
            worker = threading.Thread(target=self.call_tool, args=(msg_id, params.get("arguments")), daemon=True)
            self._workers.append(worker)
            worker.start()
        else:
            self.error(msg_id, METHOD_NOT_FOUND, f"Method not found: {method}")

    def call_tool(self, msg_id: Any, arguments: Any) -> None:
        """Runs in a worker thread: a person may take up to the pending deadline to answer."""
        try:
            call = call_from_prompt_tool(
                arguments, session=self.session, cwd=self.cwd, agent_pid=self.agent_pid, workspace=self.workspace
            )
        except HookInputError as exc:
            self.reply(msg_id, text_result(prompt_tool_deny(f"malformed arguments: {exc}"), is_error=True))
            return
        try:
            decision = self.decide(call)
            result = prompt_tool_result(decision, call.input)
        except BaseException as exc:  # every failure is a deny
            result = prompt_tool_deny(describe(exc))
        with contextlib.suppress(OSError, ValueError):  # stdout gone: the agent went away; nothing was allowed
            self.reply(msg_id, text_result(result))

    def join(self, timeout: float | None = None) -> None:
        for worker in self._workers:
            worker.join(timeout)


def describe(exc: BaseException) -> str:
    from nexusd.client_errors import describe

    return describe(exc, "nexus-mcp")


USAGE = """usage: nexus-mcp [--socket PATH] [--timeout SECONDS] [--session ID]

An MCP stdio server for Claude Code's --permission-prompt-tool mcp__nexus__permission_prompt."""


def parse_args(argv: list[str]) -> dict[str, str]:
    try:
        given = long_options(argv, ("--socket", "--timeout", "--session"), help_flags=True)
    except HelpRequested:
        print(USAGE)
        sys.exit(0)
    except UnknownArgument as e:
        raise SystemExit(f"{USAGE}\n\nnexus-mcp: {e}") from None
    except OptionError as e:
        raise SystemExit(f"nexus-mcp: {e}") from None
    return {name[2:]: value for name, value in given}


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
    except ValueError:
        raise SystemExit("nexus-mcp: --timeout must be a number of seconds") from None
    agent_pid = os.getppid()
    # The prompt tool is not told Claude's session id; one bridge serves one Claude process.
    session = (
        opts.get("session")
        or os.environ.get(SESSION_ENV)
        or os.environ.get("CLAUDE_CODE_SESSION_ID")
        or f"claude-pid-{agent_pid}"
    )
    bridge = Bridge(
        sys.stdout.buffer,
        daemon_decider(opts.get("socket"), timeout),
        session=session,
        cwd=os.getcwd(),
        agent_pid=agent_pid,
        workspace=os.environ.get("CLAUDE_PROJECT_DIR") or None,
    )
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline(MAX_LINE)
        if not line:
            break
        if not line.endswith(b"\n") and len(line) >= MAX_LINE:
            bridge.error(None, INVALID_REQUEST, "message too long")
            break
        bridge.handle_line(line)
    # stdin closed: the client is gone. In-flight calls are abandoned (their daemon connections close with
    # us, which cancels the pending requests); nothing can turn into an allow later.


if __name__ == "__main__":
    main()
