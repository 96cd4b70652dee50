"""``nexus-acp -- AGENT [ARGS...]``: an Agent Client Protocol proxy that answers the agent's permission
requests through nexusd.

An ACP client (Zed, any editor) starts ``nexus-acp -- gemini --experimental-acp`` instead of the agent.
The bridge starts the agent, and passes every message between the two unchanged (ACP's stdio transport:
one JSON-RPC 2.0 message per line) except the agent's ``session/request_permission`` requests, which it
answers itself after asking nexusd (agentclientprotocol.com/protocol/tool-calls#requesting-permission):

- the ``toolCall`` (``kind``, ``title``, ``locations``, ``content`` diffs, optional ``rawInput``) becomes
  the canonical call (``ACP_TOOLS``), so a rule written for ``Bash`` or ``Edit`` holds here too;
- allow selects the option of kind ``allow_once`` (never ``allow_always``: the agent would stop asking,
  and nexusd would not see the next call); deny selects ``reject_once`` (else ``reject_always``);
- when nexusd has no answer and ``--on-no-ui ask`` is set, the original request is forwarded to the
  client, whose person answers it in the editor (the reply passes through unchanged);
- everything else fails closed: daemon down, timeout, a malformed request, no ``allow_once`` option to
  select, an unparseable line from the agent (dropped) -> the reject option, else ``cancelled``.

The session's working directory (from ``session/new`` / ``session/load``) is the call's ``cwd`` and
workspace, and the session's mode (ACP session modes: Gemini's ``default``/``autoEdit``/``yolo``/``plan``,
Claude's ``acceptEdits`` ...) its ``mode``, looked up in nexusd's one mode table.

A shell call allowed only inside nexusd's sandbox cannot be honoured: ACP's answer cannot change the
command, so such an allow is a reject.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, Literal

import msgspec

from nexus_clients.options import HelpRequested, OptionError, UnknownArgument, long_options
from nexusd.protocol import CallInfo, Decision

PROVIDER = "acp"
PERMISSION = "session/request_permission"
MAX_LINE = 64 << 20
DEFAULT_TIMEOUT = 60.0  # bounds a wedged daemon; nexusd itself denies an unanswered ask after 30 s

# ACP tool kind -> canonical tool (nexusd.core.tools). Kinds not listed (think, switch_mode, other, and
# any later addition) are sent as "acp:<kind>": unknown tools need the highest level, so a person decides.
ACP_TOOLS: dict[str, str] = {
    "execute": "Bash",
    "edit": "Edit",
    "delete": "Delete",
    "move": "Move",
    "read": "Read",
    "search": "Grep",
    "fetch": "WebFetch",
}

Decide = Callable[[CallInfo], Decision]


class AcpInputError(ValueError):
    """A permission request we cannot map faithfully: reject rather than guess."""


# --------------------------------------------------------------------------- mapping (pure)


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def _abs(path: str, cwd: str) -> str:
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def tool_input(tool_call: dict[str, Any], cwd: str) -> tuple[str, dict[str, Any]]:  # noqa: C901 - one branch per ACP tool kind
    """(canonical tool, input) for an ACP ``ToolCallUpdate``."""
    kind = tool_call.get("kind") or "other"
    if not isinstance(kind, str):
        raise AcpInputError("toolCall.kind must be a string")
    title = tool_call.get("title")
    title = title if isinstance(title, str) else ""
    raw = tool_call.get("rawInput")
    raw = raw if isinstance(raw, dict) else {}
    paths: list[str] = []
    for loc in tool_call.get("locations") or []:
        if isinstance(loc, dict) and isinstance(loc.get("path"), str) and loc["path"]:
            paths.append(loc["path"])
    new_text: list[str] = []
    replaces = False
    for item in tool_call.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "diff":
            if isinstance(item.get("path"), str) and item["path"]:
                paths.append(item["path"])
            if isinstance(item.get("newText"), str):
                new_text.append(item["newText"])
            if isinstance(item.get("oldText"), str) and item["oldText"]:
                replaces = True
    for key in ("file_path", "path", "filePath", "absolute_path"):
        if isinstance(raw.get(key), str) and raw[key]:
            paths.append(raw[key])
    paths.extend(_strs(raw.get("paths")))
    paths = list(dict.fromkeys(_abs(p, cwd) for p in paths))
    tool = ACP_TOOLS.get(kind, f"acp:{kind}")
    out: dict[str, Any] = {"description": title}
    if tool == "Bash":
        command = raw.get("command")
        if isinstance(command, list) and all(isinstance(a, str) for a in command):
            import shlex

            command = shlex.join(command)
        if not isinstance(command, str) or not command:
            command = title  # Gemini CLI's shell tool titles the request with the exact command
        if not command:
            raise AcpInputError("an execute tool call names no command")
        out["command"] = command
    elif tool == "WebFetch":
        url = raw.get("url")
        if isinstance(url, str) and url:
            out["url"] = url
        else:
            out["prompt"] = title  # the URLs in the title are what is fetched
    elif tool == "Edit" and not replaces:
        tool = "Write"
    if tool in ("Edit", "Write", "Delete", "Move", "Read", "Grep"):
        if paths:
            out["file_path"] = paths[0]
            if len(paths) > 1:
                out["paths"] = paths[1:]
        if new_text:
            out["content"] = "".join(new_text)
    elif paths:
        out["paths"] = paths
    if raw:
        out["raw_input"] = raw
    return tool, out


class Session:
    __slots__ = ("cwd", "mode")

    def __init__(self, cwd: str, mode: str | None = None) -> None:
        self.cwd = cwd
        self.mode = mode


def choose(options: Any, decision: str) -> dict[str, Any]:
    """The RequestPermissionResponse ``result`` for nexusd's decision among the agent's offered options."""
    by_kind: dict[str, str] = {}  # the first option of each kind
    for o in options if isinstance(options, list) else []:
        if isinstance(o, dict) and isinstance(o.get("optionId"), str) and isinstance(o.get("kind"), str):
            by_kind.setdefault(o["kind"], o["optionId"])
    wanted = ("allow_once",) if decision == "allow" else ("reject_once", "reject_always")
    for kind in wanted:
        if kind in by_kind:
            return {"outcome": {"outcome": "selected", "optionId": by_kind[kind]}}
    if decision == "allow":  # no one-time allow on offer: fail closed
        return choose(options, "deny")
    return {"outcome": {"outcome": "cancelled"}}


# --------------------------------------------------------------------------- the proxy


def _reject_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse(line: bytes) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity, no duplicate keys (a client could read another value)."""
    import json

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line.decode("utf-8"), object_pairs_hook=_reject_dupes, parse_constant=no_constants)


class Proxy:
    """Two pumps (client -> agent, agent -> client) and a worker thread per permission request."""

    def __init__(
        self,
        client_out: IO[bytes],
        agent_in: IO[bytes],
        decide: Decide,
        *,
        on_no_ui: str = "deny",
        cwd: str,
        agent_pid: int | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.client_out = client_out
        self.agent_in = agent_in
        self.decide = decide
        self.on_no_ui = on_no_ui
        self.cwd = cwd
        self.agent_pid = agent_pid
        self.log = log or (lambda text: None)
        self.sessions: dict[str, Session] = {}
        self._new_session_requests: dict[Any, Session] = {}
        self._mode_requests: dict[Any, tuple[str, str]] = {}  # set_mode request id -> (session, mode)
        self._client_lock = threading.Lock()
        self._agent_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self.workers: list[threading.Thread] = []

    # ------------------------------------------------------------------ writing

    def to_client(self, data: bytes) -> None:
        with self._client_lock:
            self.client_out.write(data)
            self.client_out.flush()

    def to_agent(self, data: bytes) -> None:
        with self._agent_lock:
            self.agent_in.write(data)
            self.agent_in.flush()

    def answer_agent(self, msg_id: Any, result: dict[str, Any]) -> None:
        reply = {"jsonrpc": "2.0", "id": msg_id, "result": result}
        with contextlib.suppress(OSError, ValueError):  # the agent is gone: nothing ran
            self.to_agent(msgspec.json.encode(reply) + b"\n")

    # ------------------------------------------------------------------ client -> agent

    def from_client(self, line: bytes) -> None:
        """Forward unchanged; note the sessions' working directories and modes on the way."""
        with contextlib.suppress(Exception):
            msg = parse(line)
            if isinstance(msg, dict):
                self._note_client(msg)
        self.to_agent(line)

    def _note_client(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params")
        if not isinstance(params, dict):
            return
        cwd = params.get("cwd")
        with self._state_lock:
            if method == "session/new" and isinstance(cwd, str) and os.path.isabs(cwd) and "id" in msg:
                self._new_session_requests[_key(msg["id"])] = Session(cwd)
            elif method == "session/load" and isinstance(params.get("sessionId"), str):
                if isinstance(cwd, str) and os.path.isabs(cwd):
                    self.sessions[params["sessionId"]] = Session(cwd)
            elif method == "session/set_mode" and isinstance(params.get("sessionId"), str) and "id" in msg:
                mode = params.get("modeId")
                if isinstance(mode, str):  # it holds once the agent answers with a result, not an error
                    self._mode_requests[_key(msg["id"])] = (params["sessionId"], mode)

    # ------------------------------------------------------------------ agent -> client

    def from_agent(self, line: bytes) -> None:
        if not line.strip():
            self.to_client(line)
            return
        try:
            msg = parse(line)
        except Exception:
            # Not strict JSON: a client's lenient parser might still read a permission answer into it.
            self.log("nexus-acp: dropped a line from the agent that is not strict JSON")
            return
        items = msg if isinstance(msg, list) else [msg]
        asks = [m for m in items if isinstance(m, dict) and m.get("method") == PERMISSION]
        if asks:
            if isinstance(msg, list):  # a batch carrying a permission request: answer none of it with allow
                self.log("nexus-acp: dropped a batch holding a permission request; rejecting it")
                for m in asks:
                    if "id" in m:
                        self.answer_agent(
                            m["id"],
                            choose(
                                (m.get("params") or {}).get("options") if isinstance(m.get("params"), dict) else None,
                                "deny",
                            ),
                        )
                return
            if "id" not in msg:
                return  # a notification cannot be answered; nothing may run on it
            worker = threading.Thread(target=self.permission, args=(msg, line), daemon=True)
            self.workers.append(worker)
            worker.start()
            return
        for m in items:
            if isinstance(m, dict):
                self._note_agent(m)
        self.to_client(line)

    def _note_agent(self, msg: dict[str, Any]) -> None:
        result = msg.get("result")
        with self._state_lock:
            if "id" in msg and "method" not in msg:
                changed = self._mode_requests.pop(_key(msg["id"]), None)
                if changed is not None and "result" in msg and changed[0] in self.sessions:
                    self.sessions[changed[0]].mode = changed[1]
            if "id" in msg and isinstance(result, dict):
                pending = self._new_session_requests.pop(_key(msg["id"]), None)
                if pending is not None and isinstance(result.get("sessionId"), str):
                    modes = result.get("modes")
                    if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
                        pending.mode = modes["currentModeId"]
                    self.sessions[result["sessionId"]] = pending
            params = msg.get("params")
            if msg.get("method") == "session/update" and isinstance(params, dict):
                update = params.get("update")
                sid = params.get("sessionId")
                if (
                    isinstance(update, dict)
                    and update.get("sessionUpdate") == "current_mode_update"
                    and isinstance(update.get("currentModeId"), str)
                    and sid in self.sessions
                ):
                    self.sessions[sid].mode = update["currentModeId"]

    # ------------------------------------------------------------------ permission requests

    def call_for(self, params: Any) -> CallInfo:
        if not isinstance(params, dict):
            raise AcpInputError("params must be an object")
        sid = params.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise AcpInputError("sessionId must be a non-empty string")
        tool_call = params.get("toolCall")
        if not isinstance(tool_call, dict):
            raise AcpInputError("toolCall must be an object")
        with self._state_lock:
            session = self.sessions.get(sid)
            cwd = session.cwd if session else self.cwd
            mode = session.mode if session else None
        tool, inp = tool_input(tool_call, cwd)
        call_id = tool_call.get("toolCallId")
        return CallInfo(
            provider=PROVIDER,
            session=sid,
            tool=tool,
            input=inp,
            cwd=cwd,
            mode=mode,
            agent_request_id=call_id if isinstance(call_id, str) and call_id else None,
            agent_pid=self.agent_pid,
            workspace=cwd,
        )

    def permission(self, msg: dict[str, Any], line: bytes) -> None:
        """Runs in a worker: a person may take until nexusd's pending deadline."""
        params = msg.get("params")
        options = params.get("options") if isinstance(params, dict) else None
        try:
            call = self.call_for(params)
            decision = self.decide(call)
            kind = decision.decision
            if kind == "allow" and decision.updated_input is not None:
                self.log("nexus-acp: nexusd allows this only rewritten (sandboxed); ACP cannot rewrite it: rejected")
                kind = "deny"
            if kind == "ask" and self.on_no_ui == "ask":
                with contextlib.suppress(OSError, ValueError):
                    self.to_client(line)  # the editor's person answers; the reply passes through unchanged
                return
            result = choose(options, "allow" if kind == "allow" else "deny")
            self.log(f"nexus-acp: {call.tool} {kind}: {decision.reason}")
        except BaseException as exc:  # every failure is a reject
            self.log(f"nexus-acp: rejected ({describe(exc)})")
            result = choose(options, "deny")
        self.answer_agent(msg["id"], result)


def _key(msg_id: Any) -> str:
    return f"{type(msg_id).__name__}:{msg_id}"


def describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if isinstance(exc, AcpInputError):
        return f"malformed permission request: {exc}"
    if name == "DaemonUnreachable":
        return "the nexusd daemon is not reachable (is nexusd running?)"
    if name in ("ReplyTimeout",) or isinstance(exc, TimeoutError):
        return "no decision from nexusd in time"
    if name == "BadReply":
        return "nexusd sent a reply nexus-acp could not understand"
    if name == "ClientError":
        return f"nexusd refused the request: {getattr(exc, 'message', exc)}"
    return f"nexus-acp failed ({name})"


def daemon_decider(socket_path: str | None, timeout: float, on_no_ui: Literal["deny", "ask"], name: str) -> Decide:
    def decide(call: CallInfo) -> Decision:
        from nexusd.client import Client

        with Client(socket_path=socket_path, role="agent", name=name, timeout=5.0) as client:
            return client.request(call, on_no_ui=on_no_ui, timeout=timeout)

    return decide


# --------------------------------------------------------------------------- command line

USAGE = """usage: nexus-acp [--socket PATH] [--timeout SECONDS] [--on-no-ui deny|ask] -- AGENT [ARGS...]

Runs the ACP agent AGENT (e.g. gemini --experimental-acp) and sits between it and the ACP client on
stdin/stdout: every message passes unchanged except the agent's session/request_permission, which nexusd
answers (allow -> the agent's allow_once option, anything else -> its reject option). --on-no-ui ask
forwards a request nobody answered in nexusd to the client's own dialog; the default rejects it."""


def parse_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    if "--" not in argv:
        raise SystemExit(f"{USAGE}\n\nnexus-acp: put the agent command after --")
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1 :]
    try:
        given = long_options(own, ("--socket", "--timeout", "--on-no-ui"), help_flags=True)
    except HelpRequested:
        print(USAGE)
        sys.exit(0)
    except UnknownArgument as e:
        raise SystemExit(f"{USAGE}\n\nnexus-acp: {e}") from None
    except OptionError as e:
        raise SystemExit(f"nexus-acp: {e}") from None
    opts = {name[2:]: value for name, value in given}
    if not command:
        raise SystemExit(f"{USAGE}\n\nnexus-acp: no agent command after --")
    if opts.get("on-no-ui", "deny") not in ("deny", "ask"):
        raise SystemExit("nexus-acp: --on-no-ui must be deny or ask")
    return opts, command


def _pump(read: Callable[[], bytes], handle: Callable[[bytes], None]) -> None:
    with contextlib.suppress(OSError, ValueError):
        while True:
            line = read()
            if not line:
                return
            handle(line)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        sys.exit(0)
    opts, command = parse_args(args)
    try:
        timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
    except ValueError:
        raise SystemExit("nexus-acp: --timeout must be a number of seconds") from None
    on_no_ui: Literal["deny", "ask"] = "ask" if opts.get("on-no-ui") == "ask" else "deny"  # parse_args checked it
    try:
        agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    except OSError as exc:
        raise SystemExit(f"nexus-acp: cannot start {command[0]!r}: {exc}") from None
    assert agent.stdin is not None and agent.stdout is not None

    def log(text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    proxy = Proxy(
        sys.stdout.buffer,
        agent.stdin,
        daemon_decider(opts.get("socket"), timeout, on_no_ui, f"nexus-acp {os.path.basename(command[0])}"),
        on_no_ui=on_no_ui,
        cwd=os.getcwd(),
        agent_pid=agent.pid,
        log=log,
    )
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, lambda s, f: agent.send_signal(s))
    stdin, agent_in, agent_out = sys.stdin.buffer, agent.stdin, agent.stdout

    def client_side() -> None:
        _pump(lambda: stdin.readline(MAX_LINE), proxy.from_client)
        with contextlib.suppress(OSError):
            agent_in.close()  # the client is gone: the agent sees EOF and ends

    threading.Thread(target=client_side, daemon=True).start()
    _pump(lambda: agent_out.readline(MAX_LINE), proxy.from_agent)
    code = agent.wait()
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
