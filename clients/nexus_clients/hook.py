"""``nexus-hook claude|gemini|codex|cursor|copilot|opencode``: the command hook agents spawn before every tool call.

It reads the agent's hook JSON on stdin, asks nexusd, and prints the agent's answer. Both agents let a
call through when a hook crashes, prints garbage or runs past its timeout, so this module is built to
always answer deny itself when anything goes wrong:

- Only the standard library is imported, at module level and on the whole path: the wire is spoken by
  ``wire_lean`` (json + socket, a strict reader of the Decision) because importing msgspec alone cost
  15-17 ms of a ~25 ms process. Our own modules are imported inside the guarded block, so even a broken
  install ends in a deny.
- A SIGALRM watchdog interrupts whatever is blocking shortly before ``--timeout`` (which must be below
  the timeout the agent gives the hook) and answers deny; a second alarm exits hard.
- Claude: failures print a deny JSON and exit 0; if even that fails (or the event is unknown, so the
  right JSON shape is unknown), exit 2 with the reason on stderr, which Claude treats as a block.
- Gemini: failures exit 2 with the reason on stderr (exit 1 and non-JSON would be an allow).
- Codex: likewise exit 2 with the reason on stderr, for both of its events (any other exit, a timeout
  or JSON it does not accept lets the call run).

- Cursor, Copilot CLI, OpenCode (our plugin): failures print a deny JSON and exit 2 (a block in all three).

Agents run it as ``python -I -S …/nexus_clients/nexus-hook.py PROVIDER`` (``agent_settings.hook_argv``):
no ``site``, no agent-chosen PYTHON* variables. The import path is the C halves of json, socket and
signal (``_json`` through ``leanjson``, ``_socket``, ``_signal``) + nexus_clients.{hook,leanjson,options,
wire_lean, the agent's adapter} + nexusd.{leanos,sockpath,client_errors,protocol_version,conversation,
channel,linesocket}: never os (``leanos`` calls the built-in ``posix``), typing, re, json, enum, pathlib,
socket, contextlib or msgspec, each of which cost the hook 1-4 ms per tool call.
``tests/clients/test_hook_speed.py`` holds every agent's real call to that budget; ``nexusctl bench
--scenario hook`` times it against ``python -I -S -c pass``.
"""

import sys
import time

from nexus_clients import leanjson
from nexus_clients.options import OptionError, long_options
from nexusd import leanos

TYPE_CHECKING = False  # typing costs the hook ~2 ms of import time; mypy reads this name as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

if TYPE_CHECKING:
    import signal as _sig
else:
    try:  # the C module behind ``signal``, which adds an enum import the hook does not need
        import _signal as _sig
    except ImportError:  # pragma: no cover - not CPython
        import signal as _sig

DEFAULT_TIMEOUT = 55.0  # seconds; both agents default to 60 s per hook
CONNECT_TIMEOUT = 5.0
MARGIN = 1.5  # seconds kept back from --timeout for mapping, writing and process exit
MAX_STDIN = 32 << 20  # a Write over seed 000's 10 MB still reaches nexusd, which refuses it with its size
ON_NO_UI_ENV = "NEXUS_HOOK_ON_NO_UI"
TIMEOUT_ENV = "NEXUS_HOOK_TIMEOUT"
PROVIDERS = ("claude", "gemini", "codex", "cursor", "copilot", "opencode")

USAGE = f"""usage: nexus-hook {{{"|".join(PROVIDERS)}}} [--timeout SECONDS] [--on-no-ui auto|deny|ask] [--socket PATH]

Answers a Claude Code (PreToolUse, PermissionRequest), Gemini CLI (BeforeTool), Codex CLI (PreToolUse,
PermissionRequest), Cursor (beforeShellExecution, beforeMCPExecution, beforeReadFile) or Copilot CLI
(preToolUse) command hook, or nexusd's OpenCode plugin, by asking nexusd. --timeout (default
{DEFAULT_TIMEOUT:g}, env {TIMEOUT_ENV}) must stay below the hook timeout configured in the agent. --on-no-ui
(env {ON_NO_UI_ENV}) says what happens to an ask when no nexusd UI is connected and no [notify] channel is
configured: ask hands it back to the agent's own dialog (for Codex, its PermissionRequest only: its
PreToolUse cannot ask), deny denies it; auto (the default) hands it back only where the agent's dialog is
known to be shown (Claude Code's terminal CLI in default, acceptEdits or plan mode) and denies everywhere
else."""


class HookDeadline(BaseException):  # BaseException so no `except Exception` in a library eats it
    """The watchdog fired: answer deny now."""


class UsageError(Exception):
    pass


class InputTooLarge(Exception):
    """The hook input is too large to read; the call is refused with this message."""


class Options:
    __slots__ = ("env", "on_no_ui", "provider", "socket", "timeout")

    def __init__(
        self, provider: str, timeout: float, on_no_ui: str, socket: str | None, env: "Mapping[str, str]"
    ) -> None:
        self.env = env  # the hook's environment, decoded once (``leanos.environ``)
        self.provider = provider
        self.timeout = timeout
        self.on_no_ui = on_no_ui
        self.socket = socket


def parse_args(argv: list[str], env: "Mapping[str, str]") -> "Options":
    """Hand-rolled (argparse costs import time and exits 2 by itself with usage on stderr)."""
    if not argv or argv[0] not in PROVIDERS:
        raise UsageError(f"first argument must be one of {', '.join(PROVIDERS)}")
    provider, rest = argv[0], argv[1:]
    timeout_text = env.get(TIMEOUT_ENV) or str(DEFAULT_TIMEOUT)
    on_no_ui = env.get(ON_NO_UI_ENV) or "auto"
    socket: str | None = None
    try:
        given = long_options(rest, ("--timeout", "--on-no-ui", "--socket"))
    except OptionError as e:
        raise UsageError(str(e)) from None
    for name, value in given:
        if name == "--timeout":
            timeout_text = value
        elif name == "--on-no-ui":
            on_no_ui = value
        else:
            socket = value
    try:
        timeout = float(timeout_text)
    except ValueError:
        raise UsageError(f"--timeout must be a number of seconds, not {timeout_text!r}") from None
    if not 2.0 <= timeout <= 3600.0:
        raise UsageError("--timeout must be between 2 and 3600 seconds")
    if on_no_ui not in ("auto", "deny", "ask"):
        raise UsageError("--on-no-ui must be auto, deny or ask")
    return Options(provider, timeout, on_no_ui, socket, env)


def describe(exc: BaseException, timeout: float) -> str:
    """A reason fit for the model and the user: what failed, never a traceback or a secret.

    By type: an error class is only looked up if its module was imported (a failure may come before), so
    describing never imports anything; client errors say themselves (``nexusd.client_errors.describe``)."""
    if isinstance(exc, HookDeadline):
        return f"no decision from nexusd within {timeout:g} s"
    if isinstance(exc, UsageError):
        return f"nexus-hook is misconfigured: {exc}"
    if isinstance(exc, InputTooLarge):
        return str(exc)
    claude = sys.modules.get("nexus_clients.claude")
    if claude is not None and isinstance(exc, claude.HookInputError):
        return f"unreadable hook input: {exc}"
    if isinstance(exc, leanjson.JSONError | UnicodeDecodeError):
        return f"unreadable hook input: {exc}"
    errors = sys.modules.get("nexusd.client_errors")
    if errors is not None:
        return str(errors.describe(exc, "nexus-hook", timeout))
    if isinstance(exc, TimeoutError):
        return f"no decision from nexusd within {timeout:g} s"
    return f"nexus-hook failed ({type(exc).__name__})"


def _arm_watchdog(seconds: float) -> None:
    state = {"fired": False}

    def on_alarm(signum: int, frame: "Any") -> None:
        if state["fired"]:
            # The first alarm could not unwind in time: block the call without further ado.
            leanos.write(2, b"nexus-hook: no decision in time; blocking the tool call\n")
            leanos._exit(2)
        state["fired"] = True
        _sig.setitimer(_sig.ITIMER_REAL, 0.5)
        raise HookDeadline()

    _sig.signal(_sig.SIGALRM, on_alarm)
    _sig.setitimer(_sig.ITIMER_REAL, max(seconds, 0.1))


def _disarm_watchdog() -> None:
    _sig.setitimer(_sig.ITIMER_REAL, 0)


def _read_stdin() -> bytes:
    data = sys.stdin.buffer.read(MAX_STDIN + 1)
    if len(data) > MAX_STDIN:
        raise InputTooLarge(
            f"the tool call's input is larger than {MAX_STDIN >> 20} MiB: refused "
            "(nexusd reviews writes of at most 10 MB)"
        )
    return data


def _ask_daemon(call: "dict[str, Any]", opts: "Options", started: float) -> "Any":
    """Hello, Request, [Pending], Decision over the lean wire; returns a validated ``LeanDecision``."""
    from nexus_clients.wire_lean import AgentConnection
    from nexusd.sockpath import socket_path_text

    remaining = opts.timeout - (time.monotonic() - started) - MARGIN
    if remaining <= 0.1:
        raise HookDeadline()
    path = socket_path_text(opts.socket)
    with AgentConnection(path, timeout=min(CONNECT_TIMEOUT, remaining)) as conn:
        conn.connect(f"nexus-hook {opts.provider}")
        remaining = opts.timeout - (time.monotonic() - started) - MARGIN
        if remaining <= 0.1:
            raise HookDeadline()
        # "auto" that no adapter resolved (an agent whose own dialog is not known to be shown): deny
        on_no_ui = "deny" if opts.on_no_ui == "auto" else opts.on_no_ui
        return conn.request(call, on_no_ui=on_no_ui, timeout=remaining)


def _write_json(obj: "Any") -> None:
    sys.stdout.buffer.write(leanjson.dumps(obj).encode("ascii") + b"\n")
    sys.stdout.buffer.flush()


def _block(reason: str, prefix: str = "nexusd denied this tool call: ") -> int:
    """Exit 2 with the reason on stderr: every agent treats this as a block."""
    try:  # not contextlib.suppress: its import costs the hook ~1.5 ms; exit 2 alone blocks
        sys.stderr.write(f"{prefix}{reason}\n")
        sys.stderr.flush()
    except BaseException:
        pass
    return 2


def run_claude(opts: "Options", started: float) -> int:
    event: str | None = None
    try:
        from nexus_clients import claude

        payload = _decode(_read_stdin())
        if isinstance(payload, dict) and payload.get("hook_event_name") == claude.SESSION_END:
            return _session_end(payload, opts, started)
        event = claude.event_of(payload)
        call = claude.call_fields_from_hook(
            payload, env=opts.env, agent_pid=leanos.getppid(), fallback_cwd=leanos.getcwd()
        )
        if opts.on_no_ui == "auto":
            opts.on_no_ui = claude.no_ui_choice(payload, opts.env)
        decision = _ask_daemon(call, opts, started)
        answer = claude.hook_answer(event, decision, ask_allowed=opts.on_no_ui == "ask")
        _disarm_watchdog()
        if answer is not None:
            _write_json(answer)
        return 0
    except BaseException as exc:  # every failure must end in a deny
        _disarm_watchdog()
        reason = describe(exc, opts.timeout)
        if event is None:
            return _block(reason)
        try:
            from nexus_clients import claude

            _write_json(claude.hook_deny(event, reason))
            return 0
        except BaseException:
            return _block(reason)


def _session_end(payload: "dict[str, Any]", opts: "Options", started: float) -> int:
    """Claude Code's SessionEnd: the daemon ends the session's allow grants. Nothing is gated here (the
    session is over), so a failure only says so on stderr; exit 0 either way."""
    from nexus_clients.wire_lean import AgentConnection
    from nexusd.sockpath import socket_path_text

    session = payload.get("session_id")
    _disarm_watchdog()
    if not isinstance(session, str) or not session:
        print("nexus-hook: SessionEnd without a session_id", file=sys.stderr)
        return 0
    try:
        with AgentConnection(socket_path_text(opts.socket), timeout=CONNECT_TIMEOUT) as conn:
            conn.connect("nexus-hook claude")
            conn.session_end(session, timeout=CONNECT_TIMEOUT)
    except Exception as exc:
        print(
            f"nexus-hook: could not end the session's grants in nexusd: {describe(exc, opts.timeout)}", file=sys.stderr
        )
    return 0


def run_gemini(opts: "Options", started: float) -> int:
    try:
        from nexus_clients import gemini

        payload = _decode(_read_stdin())
        call = gemini.call_fields_from_hook(
            payload, env=opts.env, agent_pid=leanos.getppid(), fallback_cwd=leanos.getcwd()
        )
        if opts.on_no_ui == "auto":
            opts.on_no_ui = "deny"  # Gemini CLI's hook ask is not a dialog everywhere (headless -p): deny
        decision = _ask_daemon(call, opts, started)
        answer = gemini.answer(decision, ask_allowed=opts.on_no_ui == "ask")
        _disarm_watchdog()
        _write_json(answer)
        return 0
    except BaseException as exc:  # every failure must end in a deny
        _disarm_watchdog()
        return _block(describe(exc, opts.timeout))


def run_codex(opts: "Options", started: float) -> int:
    try:
        from nexus_clients import codex

        payload = _decode(_read_stdin())
        event = codex.event_of(payload)
        call = codex.call_fields_from_hook(
            payload, env=opts.env, agent_pid=leanos.getppid(), fallback_cwd=leanos.getcwd()
        )
        if opts.on_no_ui == "auto":
            opts.on_no_ui = "deny"  # Codex's dialog is not known to be shown everywhere (codex exec): deny
        decision = _ask_daemon(call, opts, started)
        answer = codex.hook_answer(event, decision, ask_allowed=opts.on_no_ui == "ask")
        _disarm_watchdog()
        if answer.block is not None:
            return _block(answer.block, prefix="")
        if answer.out is not None:
            _write_json(answer.out)
        return 0
    except BaseException as exc:  # every failure must end in a deny: Codex runs the call on any other exit
        _disarm_watchdog()
        return _block(describe(exc, opts.timeout))


def _adapter(provider: str) -> "Any":
    """One adapter module, imported alone (the other two would cost every call their import)."""
    __import__(f"nexus_clients.{provider}")
    return sys.modules[f"nexus_clients.{provider}"]


def run_other(opts: "Options", started: float) -> int:
    """Cursor, Copilot CLI and OpenCode: the answer JSON and exit 0, or a deny JSON and exit 2 on any
    failure (exit 2 blocks in all three, whatever stdout says; stdout still tells the model why)."""
    event: str | None = None
    try:
        adapter = _adapter(opts.provider)
        payload = _decode(_read_stdin())
        env, pid, cwd = opts.env, leanos.getppid(), leanos.getcwd()
        if opts.provider == "cursor":
            event = adapter.event_of(payload)
        call = adapter.call_fields_from_hook(payload, env=env, agent_pid=pid, fallback_cwd=cwd)
        decision = _ask_daemon(call, opts, started)
        ask_allowed = opts.on_no_ui == "ask"
        if opts.provider == "cursor":
            answer = adapter.answer(event or "", decision, ask_allowed=ask_allowed)
        elif opts.provider == "copilot":
            answer = adapter.answer(decision, ask_allowed=ask_allowed)
        else:
            answer = adapter.answer(decision)
        _disarm_watchdog()
        _write_json(answer)
        return 0
    except BaseException as exc:  # every failure must end in a deny
        _disarm_watchdog()
        reason = describe(exc, opts.timeout)
        try:  # exit 2 below blocks the call whatever stdout holds
            adapter = _adapter(opts.provider)
            _write_json(adapter.deny(event, reason) if opts.provider == "cursor" else adapter.deny(reason))
        except BaseException:
            pass
        return _block(reason)


RUNNERS = {
    "claude": run_claude,
    "gemini": run_gemini,
    "codex": run_codex,
    "cursor": run_other,
    "copilot": run_other,
    "opencode": run_other,
}


def _decode(raw: bytes) -> "Any":
    """Strict JSON as msgspec read it before: UTF-8 only, no NaN/Infinity (ValueError otherwise)."""
    return leanjson.loads(raw.decode("utf-8"))


def run(argv: list[str]) -> int:
    """The whole hook: answer on stdout/stderr and return the exit code (every failure is a block)."""
    started = time.monotonic()
    if "-h" in argv or "--help" in argv:  # `nexus-hook claude --help` too: help is never a misconfiguration
        print(USAGE)
        return 0
    try:
        opts = parse_args(argv, leanos.environ())
    except UsageError as exc:
        sys.stderr.write(f"{USAGE}\n\nnexus-hook: {exc}\n")
        return _block(f"nexus-hook is misconfigured: {exc}")
    try:
        _arm_watchdog(opts.timeout - (time.monotonic() - started) - MARGIN / 3)
        return RUNNERS[opts.provider](opts, started)
    except BaseException as exc:  # e.g. the watchdog firing between two statements above
        return _block(describe(exc, opts.timeout))


def main(argv: list[str] | None = None) -> "NoReturn":
    """Run, flush, and leave at once: the answer is written, so the interpreter's teardown (freeing every
    module, a final garbage collection: ~1 ms per tool call) is work no one needs. A flush that fails
    (the agent closed our stdout) turns an answer into exit 2, which every agent reads as a block."""
    code = run(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.flush()
    except BaseException:
        code = code or 2
    try:  # noqa: SIM105 - nothing left to tell anyone
        sys.stderr.flush()
    except BaseException:
        pass
    leanos._exit(code)


if __name__ == "__main__":
    main()
