"""nexusctl commands that talk to a running daemon: status, pending, answer, watch, audit, check, mode, reload, version.

Exit codes (every command): 0 ok (check: allowed), 1 denied (check: deny; answer: the answer was deny),
2 usage error, 3 daemon unreachable, 4 refused by the daemon (protocol error), 5 bad reply,
6 check: a person would be asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
import msgspec

from nexusd import protocol as p

EXIT_OK, EXIT_DENIED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_BAD_REPLY, EXIT_ASK = 0, 1, 2, 3, 4, 5, 6
EXIT_NOT_PENDING = 7  # no such pending request (never was, or already decided): not a refusal
EXIT_DEGRADED = 8  # status: the daemon is locked, or its audit log cannot be written


def _fail(code: int, text: str) -> NoReturn:
    click.echo(f"nexusctl: {text}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def _client(ctx: click.Context, role: p.Role = "admin", timeout: float = 5.0) -> Iterator[Any]:
    """A connected client; every client failure becomes a one-line message and a documented exit code."""
    from nexusd.client import BadReply, Client, ClientError, DaemonUnreachable

    sock = (ctx.find_root().obj or {}).get("socket")
    try:
        with Client(socket_path=sock, role=role, name="nexusctl", timeout=timeout) as c:
            yield c
    except DaemonUnreachable as e:
        _fail(EXIT_UNREACHABLE, f"nexusd is not reachable: {e}")
    except ClientError as e:
        if e.code in ("not_found", "already_decided"):
            _fail(EXIT_NOT_PENDING, f"no such pending request ({e.code}): {e.message}")
        _fail(EXIT_REFUSED, f"refused by nexusd ({e.code}): {e.message}")
    except BadReply as e:
        _fail(EXIT_BAD_REPLY, f"bad reply from nexusd: {e}")


def _json(obj: Any) -> None:
    click.echo(msgspec.json.encode(obj).decode())


def _ago(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _summary(call: p.CallInfo) -> str:
    from nexusd.daemon.audit import summarize

    return summarize(call.input)


def _printable(text: str, limit: int = 80) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


PREVIEW_LINES = 400  # lines of a preview's diff printed by `nexusctl pending`


def _print_item(item: p.PendingItem) -> None:
    left = max(0.0, item.deadline - time.time())
    call = item.call
    click.echo(
        f"{item.id}  {_printable(call.provider)}/{_printable(call.session, 12)}  {_printable(call.tool)}  "
        f"({left:.0f}s left)"
    )
    who = []
    if call.subagent_id or call.subagent_type:
        who.append(
            f"subagent {_printable(call.subagent_type or '?')}"
            + (f" ({_printable(call.subagent_id)})" if call.subagent_id else "")
        )
    who.append(f"workspace {_printable(call.workspace or call.cwd, 200)}")
    if call.agent_pid:
        who.append(f"pid {call.agent_pid}")
    click.echo(f"    {'  '.join(who)}")
    click.echo(f"    {_summary(item.call)}")
    click.echo(f"    why: {item.verdict.reason}")
    for flag in item.verdict.flags:
        click.echo(f"    flag: {flag}")
    if item.verdict.suggestions:
        click.echo(f"    always would remember: {', '.join(item.verdict.suggestions)}")
    diff = call.input.get("diff")
    if "preview" in item.verdict.flags and isinstance(diff, str):  # docs/UNDO.md: allow applies, deny discards
        click.echo("    the command's changes (nexusctl answer ID allow: apply them; deny: discard them):")
        for line in diff.splitlines()[:PREVIEW_LINES]:
            click.echo(f"    | {_printable(line, 400)}")
        if diff.count("\n") > PREVIEW_LINES:
            click.echo(
                f"    | ... ({diff.count(chr(10)) - PREVIEW_LINES} more lines; `nexusctl pending --json` has all)"
            )


def _print_trace(verdict: p.Verdict) -> None:
    for i, step in enumerate(verdict.trace, 1):
        detail = f" — {step.detail}" if step.detail else ""
        click.echo(f"  {i}. {step.step}: {step.outcome}{detail}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the raw StatusReply as JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show the daemon's version, uptime, connections, pending count, counters, policy and sandbox.

    Exit 8 when the daemon is degraded: locked (a policy layer unusable with no last good copy, so nothing is
    allowed by a rule or a mode) or unable to write its audit log.
    """
    with _client(ctx) as c:
        st: p.StatusReply = c.status()
    degraded = bool(st.locked or st.audit_error)
    if as_json:
        _json(st)
        sys.exit(EXIT_DEGRADED if degraded else EXIT_OK)
    if st.locked:
        click.echo(f"LOCKED: nothing is allowed by a rule or a mode until fixed: {st.locked}")
    if st.audit_error:
        action = "decisions are DENIED" if st.audit_on_failure == "deny" else "decisions go on, unrecorded"
        click.echo(f"AUDIT ERROR: {st.audit_error}; {action}; {st.audit_unrecorded} not recorded so far")
    elif st.audit_unrecorded:
        click.echo(f"audit: writable again; {st.audit_unrecorded} decisions were not recorded")
    click.echo(f"nexusd {st.version}  pid {st.pid}  up {st.uptime:.0f}s  pending {st.pending}")
    conns = ", ".join(f"{k} {v}" for k, v in sorted(st.connections.items())) or "none"
    click.echo(f"connections: {conns}")
    decisions = st.decisions()
    memo = {k.removeprefix("memo/"): v for k, v in st.counters.items() if k.startswith("memo/")}
    if decisions:
        click.echo("decisions: " + ", ".join(f"{k} {v}" for k, v in sorted(decisions.items())))
    if memo:
        click.echo("decision memo: " + ", ".join(f"{k} {memo.get(k, 0)}" for k in ("hit", "miss", "stale")))
    took = st.decision_time_us()
    if took is not None:
        click.echo(f"decision time: {took:.1f} µs per call on average ({st.counters['gate/calls']} calls)")
    for src in st.policy:
        state = src.state()
        click.echo(f"policy {src.layer}: {src.path} ({state})")
    for err in st.policy_errors:
        click.echo(f"policy error: {err}")
    if st.sandbox is not None:
        from nexusd.cli.ctl_sandbox import format_probe

        click.echo(format_probe(st.sandbox, "the daemon's view"))
    click.echo(sandbox_mode_note(st.sandbox))
    for sid, mode in sorted(st.sessions.items()):
        click.echo(f"session {sid}: {mode}")
    sys.exit(EXIT_DEGRADED if degraded else EXIT_OK)


def sandbox_mode_note(probe: p.SandboxProbe | None) -> str:
    """One line: sandbox-first (the default where the sandbox works) or gate-only, and why."""
    if probe is None:
        return "agents' shell calls: the sandbox is not probed yet (gate-only until it is)"
    if probe.available:
        return (
            "agents' shell calls: SANDBOX-FIRST (the default here): they run sandboxed and skip the mode's "
            "ask, unless a policy says [sandbox] enabled = false (per workspace: nexusctl sandbox status)"
        )
    return (
        "agents' shell calls: GATE-ONLY: no working sandbox here, so each call is decided by the permission "
        "gate alone (see the reason above; `nexusctl sandbox probe --here` for the agents' own context)"
    )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the pending items as a JSON array.")
@click.pass_context
def pending(ctx: click.Context, as_json: bool) -> None:
    """List the requests waiting for a person (ids to use with `nexusctl answer`)."""
    with _client(ctx) as c:
        snap: p.Snapshot = c.subscribe()
    if as_json:
        _json(snap.items)
        return
    if not snap.items:
        click.echo("nothing pending")
    for item in snap.items:
        _print_item(item)


@click.command()
@click.argument("request_id")
@click.argument("decision", type=click.Choice(["allow", "deny"]))
@click.option("--session", "scope", flag_value="session", help="Also for the rest of this agent session.")
@click.option("--always", "scope", flag_value="always", help="Remember as a rule (allow).")
@click.option("--never", "scope", flag_value="never", help="Remember as a deny rule.")
@click.option(
    "--for",
    "duration",
    metavar="DURATION",
    help="A timed grant: the rule holds for every session for DURATION (90s, 15m, 1h, 2d, eod).",
)
@click.option("--message", "-m", help="A message shown to the model.")
@click.option(
    "--input",
    "edited",
    metavar="JSON",
    help="Allow once with this changed tool input (JSON object), decided again; it must not widen.",
)
@click.option("--rule", "rules", multiple=True, help="The rule to remember (repeatable); default: the suggested one.")
@click.option("--abort", is_flag=True, help="Deny and also stop the agent's turn (Claude Code, Gemini CLI).")
@click.option(
    "--confirm-wide",
    "confirm_broad",
    is_flag=True,
    help="Grant rules nexusd's one narrowness check calls wide (a wildcard over rm, git commit, npm test ...); "
    "without it such an answer is refused, with the reason.",
)
@click.pass_context
def answer(
    ctx: click.Context,
    request_id: str,
    decision: str,
    scope: str | None,
    duration: str | None,
    message: str | None,
    edited: str | None,
    rules: tuple[str, ...],
    abort: bool,
    confirm_broad: bool,
) -> None:
    """Answer a pending request: allow or deny, once (default), for the session, for a while, always, or never.

    REQUEST_ID may be any unique prefix of the id (as `nexusctl pending` shows it), like a git hash.
    Exit 0 allowed, 1 denied, 7 no such pending request (unknown or already decided), 4 refused (an
    answer from inside the requesting agent's own process tree), 2 an ambiguous prefix.
    """
    seconds: float | None = None
    if duration is not None:
        from nexusd.client import parse_duration

        if scope is not None:
            _fail(EXIT_USAGE, "--for goes alone: not with --session, --always or --never")
        try:
            seconds = parse_duration(duration)
        except ValueError as e:
            _fail(EXIT_USAGE, str(e))
        scope = "timed"
    updated: dict[str, Any] | None = None
    if edited is not None:
        try:
            updated = json.loads(edited)
        except ValueError as e:
            _fail(EXIT_USAGE, f"--input is not JSON: {e}")
        if not isinstance(updated, dict):
            _fail(EXIT_USAGE, "--input must be a JSON object (the tool's input)")
    scope = scope or "once"
    if scope == "never" and decision != "deny":
        _fail(EXIT_USAGE, "--never goes with deny")
    if abort and decision != "deny":
        _fail(EXIT_USAGE, "--abort goes with deny")
    if scope == "always" and decision != "allow":
        scope = "never"  # "deny --always" means the same as "deny --never"
    with _client(ctx) as c:
        if len(request_id) < 32:
            snap: p.Snapshot = c.subscribe()
            matches = [item.id for item in snap.items if item.id.startswith(request_id)]
            if not matches:
                _fail(EXIT_NOT_PENDING, f"no pending request starts with {request_id!r} (see `nexusctl pending`)")
            if len(matches) > 1:
                _fail(EXIT_USAGE, f"{request_id!r} is ambiguous: {', '.join(m[:12] for m in matches)} ...")
            request_id = matches[0]
        ack = c.answer(
            request_id,
            decision,
            scope=scope,
            message=message,
            rules=list(rules) or None,
            duration=seconds,
            updated_input=updated,
            abort=abort,
            confirm_broad=confirm_broad,
        )
    click.echo(f"{request_id}: {ack.detail}")
    sys.exit(EXIT_OK if decision == "allow" else EXIT_DENIED)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON message per line.")
@click.pass_context
def watch(ctx: click.Context, as_json: bool) -> None:
    """Stream pending requests and their resolutions until interrupted (or the daemon stops)."""
    from nexusd.client import ReplyTimeout

    with _client(ctx, role="ui") as c:
        snap = c.subscribe()
        for item in snap.items:
            _json(p.Prompt(item=item)) if as_json else _print_item(item)
        while True:
            try:
                ev = c.next_event(timeout=3600)
            except ReplyTimeout:
                continue
            except KeyboardInterrupt:
                return
            if as_json:
                _json(ev)
            elif isinstance(ev, p.Prompt):
                _print_item(ev.item)
            elif isinstance(ev, p.Resolved):
                by = f" by {ev.answered_by}" if ev.answered_by else ""
                click.echo(f"{ev.id}  -> {ev.decision} ({ev.source}{by}) {ev.reason}")
            elif isinstance(ev, p.PolicyNotice):
                click.echo("policy reloaded" if ev.ok else "policy reload FAILED: " + "; ".join(ev.errors))
            elif isinstance(ev, p.SandboxNotice):
                for v in ev.violations:
                    click.echo(f"sandbox refused ({ev.session or 'no session'}): {v}  [in: {ev.command}]")
            if isinstance(ev, p.Bye):
                click.echo(f"daemon stopping: {ev.reason}", err=True)
                sys.exit(EXIT_UNREACHABLE)


def _audit_path(ctx: click.Context) -> Path:
    from nexusd import locations

    return locations.state_dir() / locations.AUDIT_NAME


def _print_record(rec: p.AuditRecord, as_json: bool, raw: bytes | None = None) -> None:
    if as_json:
        click.echo(raw.decode() if raw is not None else msgspec.json.encode(rec).decode())
        return
    who = f" by {rec.answered_by}" if rec.answered_by else ""
    event = "" if rec.event == "decision" else f" [{rec.event}]"
    click.echo(
        f"{_ago(rec.time)}  {rec.decision:5} {rec.source:9} {rec.tool:14} {rec.summary[:60]}{who}{event}"
        f"  ({rec.latency_ms:.1f} ms)  {rec.id[:16]}"  # the id (a prefix) for `nexusctl explain`
    )


@click.group(invoke_without_command=True)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new records as they are written.")
@click.option("--json", "as_json", is_flag=True, help="Print records as JSON lines.")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--session", help="Only this agent session.")
@click.option("--tool", help="Only this tool.")
@click.option("--decision", type=click.Choice(["allow", "deny", "ask"]))
@click.option("--mode", help="Only calls decided in this mode (any spelling: acceptEdits, accept_edits, ...).")
@click.option(
    "--requirement",
    type=click.Choice(["read-only", "workspace-write", "danger-full-access"]),
    help="Only calls that needed this much.",
)
@click.option(
    "--file", "path", type=click.Path(dir_okay=False, path_type=Path), help="Audit file (default: state dir)."
)
@click.pass_context
def audit(
    ctx: click.Context,
    follow: bool,
    as_json: bool,
    limit: int,
    session: str | None,
    tool: str | None,
    decision: str | None,
    mode: str | None,
    requirement: str | None,
    path: Path | None,
) -> None:
    """Print the audit trail (<state-dir>/audit.jsonl); reads the file, so it works without a daemon.

    `nexusctl audit verify` checks its hash chain instead.
    """
    from nexusd.daemon.audit import read_tail

    if ctx.invoked_subcommand is not None:
        ctx.obj = {**(ctx.obj or {}), "audit_file": path}
        return

    path = path or _audit_path(ctx)
    if mode is not None:
        from nexusd.core.policy.modes import internal_name

        internal = internal_name(mode)
        if internal is None:
            _fail(EXIT_USAGE, f"unknown mode {mode!r}")
        mode = internal
    match = {"session": session, "tool": tool, "decision": decision, "mode": mode, "requirement": requirement}
    if not path.exists() and not follow:
        _fail(EXIT_USAGE, f"no audit file at {path}")
    for rec in read_tail(path, limit, match):
        _print_record(rec, as_json)
    if follow:
        _follow(path, lambda rec, raw: _print_record(rec, as_json, raw), match)


def _follow(path: Path, emit: Callable[[p.AuditRecord, bytes], None], match: dict[str, Any]) -> None:
    """tail -F: survives rotation (the file is renamed away and a new one appears)."""
    decoder = msgspec.json.Decoder(p.AuditRecord)
    f = None
    ino = None
    buf = b""
    try:
        while True:
            if f is None:
                try:
                    f = open(path, "rb")  # noqa: SIM115 - reopened on rotation
                    ino = Path(path).stat().st_ino
                    f.seek(0, 2)
                except OSError:
                    time.sleep(0.5)
                    continue
            chunk = f.read()
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        rec = decoder.decode(line)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        continue
                    if all(getattr(rec, k) == v for k, v in match.items() if v is not None):
                        emit(rec, line)
                continue
            try:
                rotated = Path(path).stat().st_ino != ino
            except OSError:
                rotated = True
            if rotated:
                f.close()
                f = None
                buf = b""
                if Path(path).exists():  # read the new file from its start
                    f = open(path, "rb")  # noqa: SIM115
                    ino = Path(path).stat().st_ino
                continue
            time.sleep(0.2)
    except KeyboardInterrupt:
        return
    finally:
        if f is not None:
            f.close()


def _read_call(source: str) -> p.CallInfo:
    data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        _fail(EXIT_USAGE, f"not JSON: {e}")
    if isinstance(obj, dict) and isinstance(obj.get("call"), dict):
        obj = obj["call"]  # a Request or Check message
    if isinstance(obj, dict) and "hook_event_name" in obj and "tool_name" in obj:
        return _call_from_hook_input(obj)
    try:
        return msgspec.convert(obj, p.CallInfo)
    except msgspec.ValidationError as e:
        _fail(EXIT_USAGE, f"not a CallInfo (provider, session, tool, input, cwd ...) nor an agent's hook input: {e}")


def _call_from_hook_input(obj: dict[str, Any]) -> p.CallInfo:
    """The JSON an agent hands its hook (Claude Code's PreToolUse/PermissionRequest, Gemini CLI's BeforeTool,
    Codex CLI's, which alone carries ``turn_id``), turned into the call exactly as ``nexus-hook`` would submit it."""
    from nexus_clients import claude, codex, gemini

    adapter: Any = gemini if obj.get("hook_event_name") == "BeforeTool" else codex if "turn_id" in obj else claude
    try:
        return p.CallInfo(
            **adapter.call_fields_from_hook(obj, env=os.environ, agent_pid=None, fallback_cwd=os.getcwd())
        )
    except (ValueError, TypeError, KeyError) as e:
        _fail(EXIT_USAGE, f"not a valid {adapter.__name__.rsplit('.', 1)[-1]} hook input: {e}")


@click.command()
@click.argument("source", default="-", metavar="[FILE]")
@click.option("--offline", is_flag=True, help="Evaluate in-process from the policy files, without a daemon.")
@click.option("--json", "as_json", is_flag=True, help="Print the Verdict as JSON.")
@click.pass_context
def check(ctx: click.Context, source: str, offline: bool, as_json: bool) -> None:
    """Evaluate a tool call without running it: print the decision, reason, deciding rule and trace.

    FILE (default: stdin) holds a CallInfo, a Request/Check message whose "call" is one, or the JSON an
    agent gives its hook (Claude Code's PreToolUse, Gemini CLI's BeforeTool, Codex CLI's), for example:

    \b
      echo '{"session_id":"s","cwd":"/p","hook_event_name":"PreToolUse",
             "tool_name":"Bash","tool_input":{"command":"rm -rf build"}}' | nexusctl check
      nexusctl check --offline call.json

    Exit 0 allow, 1 deny, 6 a person would be asked.
    """
    call = _read_call(source)
    if offline:
        from nexusd.decision.offline import check_offline

        verdict = check_offline(call)
    else:
        with _client(ctx) as c:
            verdict = c.check(call)
    if as_json:
        _json(verdict)
    else:
        click.echo(f"decision: {verdict.decision}")
        click.echo(f"reason:   {verdict.reason}")
        click.echo(f"source:   {verdict.source}")
        if verdict.rule:
            click.echo(f"rule:     {verdict.rule}  ({verdict.rule_origin or 'unknown origin'})")
        if verdict.requirement:
            click.echo(f"needs:    {verdict.requirement}")
        for flag in verdict.flags:
            click.echo(f"flag:     {flag}")
        if verdict.trace:
            click.echo("trace:")
            _print_trace(verdict)
    sys.exit({"allow": EXIT_OK, "deny": EXIT_DENIED, "ask": EXIT_ASK}[verdict.decision])


@click.command()
@click.argument("session")
@click.argument("mode")
@click.option("--new", is_flag=True, help="Set the mode of a session nexusd has not seen yet (taken as written).")
@click.pass_context
def mode(ctx: click.Context, session: str, mode: str, new: bool) -> None:
    """Set an agent session's mode from nexusd (overrides what the agent reports); MODE "clear" removes it.

    SESSION is a session id as `nexusctl status` lists it, or a prefix of exactly one; an unknown session is
    refused (exit 2) unless --new is given. MODE is any name in docs/POLICY.md's mode table (default,
    acceptEdits, plan, auto, dontAsk, bypassPermissions, the five-tier and upper-case names, and Gemini's
    spellings); an unknown name is refused (exit 2), with the closest known one.
    """
    from nexusd.core.policy.modes import MODES, did_you_mean, resolve

    clear = mode in ("clear", "-")
    if not clear and resolve(mode) is None:
        near = did_you_mean(mode)
        names = ", ".join(dict.fromkeys(spelling for spelling, _, _ in MODES))
        hint = f"; did you mean {near!r}?" if near else ""
        _fail(EXIT_USAGE, f"unknown mode {mode!r}{hint} (valid modes: {names}; docs/POLICY.md)")
    with _client(ctx) as c:
        if not new:
            session = _resolve_session(c.status().sessions, session)
        ack = c.call(p.SetMode(session=session, mode=None if clear else mode))
    click.echo(f"{session}: {ack.detail}")


def _resolve_session(known: dict[str, str], given: str) -> str:
    """The session ``given`` names: itself when nexusd knows it, else the one known session it prefixes.
    Unknown or ambiguous is a usage error: setting the mode of a session that does not exist would create it
    and change nothing the person meant (issue 38)."""
    if given in known:
        return given
    matches = sorted(s for s in known if s.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if matches:
        _fail(EXIT_USAGE, f"{given!r} is the start of {len(matches)} sessions: {', '.join(matches[:10])}; say more")
    listed = ", ".join(sorted(known)[:10]) or "none yet"
    _fail(
        EXIT_USAGE,
        f"no session {given!r} known to nexusd (known: {listed}); a session is known once its agent sent a call "
        "(--new sets it anyway)",
    )


@click.command()
@click.pass_context
def reload(ctx: click.Context) -> None:
    """Re-read every policy file; on an error the daemon keeps the last good policy (exit 4)."""
    with _client(ctx) as c:
        ack = c.call(p.Reload())
    click.echo(ack.detail or "policy reloaded")


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def version(ctx: click.Context, as_json: bool) -> None:
    """Print nexusctl's version and, if it is running, the daemon's."""
    from nexusd import __version__
    from nexusd.client import Client, NexusClientError

    daemon: str | None = None
    with contextlib.suppress(NexusClientError):
        sock = (ctx.find_root().obj or {}).get("socket")
        with Client(socket_path=sock, role="admin", name="nexusctl", timeout=2.0) as c:
            daemon = c.welcome.version if c.welcome else None
    if as_json:
        click.echo(json.dumps({"nexusctl": __version__, "protocol": p.PROTOCOL_VERSION, "daemon": daemon}))
    else:
        click.echo(f"nexusctl {__version__} (protocol {p.PROTOCOL_VERSION})")
        click.echo(f"nexusd {daemon}" if daemon else "nexusd not running")


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
    for cmd in (status, pending, answer, watch, audit, check, mode, reload, version):
        group.add_command(cmd)
