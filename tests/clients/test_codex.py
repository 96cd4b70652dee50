"""Codex CLI hooks: the exact JSON Codex 0.169 hands PreToolUse / PermissionRequest hooks -> CallInfo, and
Decision -> what Codex accepts (checked against the real CLI by tests/e2e; here every branch, and the hook
process itself against the real daemon)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from nexus_clients import agent_settings, codex
from nexus_clients.claude import HookInputError

from nexusd import protocol
from nexusd.core.policy.modes import resolve
from nexusd.protocol import Decision
from tests.conftest import DaemonHandle, short_tmpdir

HOOK = agent_settings.hook_launcher_argv()  # as the installers write it: python -IS …/nexus-hook.py


def payload(event: str = "PreToolUse", tool: str = "Bash", tool_input: dict | None = None, **extra: Any) -> dict:
    """As Codex 0.169 sends it (captured from the real CLI)."""
    data: dict[str, Any] = {
        "session_id": "01a210e2-8af3-7842-a591-037ede0d5bac",
        "turn_id": "01a210e2-8b3a-78b3-8dd3-9a4c804392af",
        "transcript_path": None,
        "cwd": "/work/proj/sub",
        "hook_event_name": event,
        "model": "gpt-fake",
        "permission_mode": "default",
        "tool_name": tool,
        "tool_input": tool_input if tool_input is not None else {"command": "touch made-by-codex"},
    }
    if event == "PreToolUse":
        data["tool_use_id"] = "call_1"
    data.update(extra)
    return data


def call(p: dict, **kw: Any) -> protocol.CallInfo:
    return protocol.CallInfo(
        **codex.call_fields_from_hook(p, env={}, agent_pid=kw.get("agent_pid", 9), fallback_cwd="/fallback")
    )


# --------------------------------------------------------------------------- hook input -> CallInfo


def test_shell_call_maps_to_bash() -> None:
    c = call(payload())
    assert (c.provider, c.tool, c.input, c.cwd) == (
        "codex",
        "Bash",
        {"command": "touch made-by-codex"},
        "/work/proj/sub",
    )
    assert c.agent_request_id == "call_1" and c.agent_pid == 9 and c.session.startswith("01a2")
    assert c.workspace is None  # no transcript: the daemon falls back to the cwd's git root


def test_permission_request_keeps_the_justification() -> None:
    c = call(payload("PermissionRequest", tool_input={"command": "touch /x", "description": "need outside"}))
    assert c.input == {"command": "touch /x", "description": "need outside"} and c.agent_request_id is None


def test_apply_patch_and_mcp_keep_their_names() -> None:
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n"
    assert call(payload(tool="apply_patch", tool_input={"command": patch})).tool == "apply_patch"
    assert call(payload(tool="mcp__fs__write", tool_input={"path": "/x"})).tool == "mcp__fs__write"


def test_apply_patch_paths_reach_the_classifier() -> None:
    """The catalogue reads the patch text Codex passes in tool_input.command; relative paths resolve
    against the call's cwd, so a patch climbing out of the workspace is outside it."""
    from nexusd.core.tools import extract, tool_info

    patch = (
        "*** Begin Patch\n*** Add File: ../../etc/cron.d/x\n+* * * * * root sh\n"
        "*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"
    )
    got = extract(tool_info("apply_patch", "codex"), {"command": patch})
    assert got.writes == ("../../etc/cron.d/x", "a.py") and not got.problems


@pytest.mark.parametrize(
    ("reported", "sent", "internal"),
    [
        ("default", "on-request", "default"),
        ("bypassPermissions", "never", "dont_ask"),  # codex exec: approval never, sandbox still read-only
        ("dontAsk", "never", "dont_ask"),
        ("plan", "plan", "plan"),
        ("acceptEdits", "on-request", "default"),
        ("somethingNew", None, None),
        (7, None, None),
    ],
)
def test_codex_modes_never_become_bypass(reported: Any, sent: str | None, internal: str | None) -> None:
    c = call(payload(permission_mode=reported))
    assert c.mode == sent
    spec = resolve(c.mode)
    assert (spec.name if spec else None) == internal
    assert spec is None or not spec.bypass


def test_subagent_attribution_is_carried_and_cleaned() -> None:
    c = call(payload(agent_id="agent-7", agent_type="worker\x1b[31m"))
    assert c.subagent_id == "agent-7" and c.subagent_type == "worker?[31m"
    c = call(payload(agent_id=["not", "a", "string"], agent_type=""))
    assert c.subagent_id is None and c.subagent_type is None
    assert len(call(payload(agent_id="x" * 10_000)).subagent_id or "") == 200


def write_transcript(tmp: Path, session: str, cwd: str, *, kind: str = "session_meta") -> Path:
    path = tmp / "rollout.jsonl"
    meta = {
        "type": kind,
        "payload": {"session_id": session, "id": session, "cwd": cwd, "base_instructions": "x" * 30_000},
    }
    path.write_text(json.dumps(meta) + "\n" + json.dumps({"type": "event"}) + "\n")
    return path


def test_workspace_comes_from_the_session_not_the_models_workdir(tmp_path: Path) -> None:
    """Codex's hook cwd is the command's workdir, which the model picks (``"workdir": "/"``); the workspace
    boundary is the session's start directory from its transcript."""
    sid = payload()["session_id"]
    t = write_transcript(tmp_path, sid, "/work/proj")
    c = call(payload(cwd="/", transcript_path=str(t)))
    assert c.cwd == "/" and c.workspace == "/work/proj"


@pytest.mark.parametrize("case", ["other-session", "not-meta", "relative-cwd", "missing", "relative-path", "garbage"])
def test_workspace_unknown_when_the_transcript_does_not_say(tmp_path: Path, case: str) -> None:
    sid = payload()["session_id"]
    if case == "other-session":
        t = str(write_transcript(tmp_path, "someone-else", "/work/proj"))
    elif case == "not-meta":
        t = str(write_transcript(tmp_path, sid, "/work/proj", kind="turn_context"))
    elif case == "relative-cwd":
        t = str(write_transcript(tmp_path, sid, "proj"))
    elif case == "missing":
        t = str(tmp_path / "absent.jsonl")
    elif case == "relative-path":
        t = "rollout.jsonl"
    else:
        (tmp_path / "g.jsonl").write_bytes(b"\xff{not json")
        t = str(tmp_path / "g.jsonl")
    assert call(payload(transcript_path=t)).workspace is None


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "text",
        {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}},
        payload(tool_name=""),
        payload(tool_input="rm -rf /"),
        payload(session_id=""),
        payload(cwd="relative/dir"),
        payload(cwd=5),
    ],
)
def test_malformed_input_is_refused(bad: Any) -> None:
    with pytest.raises(HookInputError):
        codex.call_fields_from_hook(bad, env={}, agent_pid=None, fallback_cwd="/x")


# --------------------------------------------------------------------------- Decision -> Codex's answer


def decision(kind: str, **kw: Any) -> Decision:
    return Decision(decision=kind, reason=kw.pop("reason", "because"), source=kw.pop("source", "rule"), **kw)  # type: ignore[arg-type]


def test_pre_tool_use_answers() -> None:
    assert codex.hook_answer("PreToolUse", decision("allow"), ask_allowed=False) == codex.Answer()
    wrapped = codex.hook_answer(
        "PreToolUse", decision("allow", updated_input={"command": "launcher -c ls"}), ask_allowed=False
    )
    assert wrapped.out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"command": "launcher -c ls"},
        }
    }
    denied = codex.hook_answer("PreToolUse", decision("deny", rule="Bash(rm *)", message="no"), ask_allowed=False)
    assert (
        denied.out is None
        and "Bash(rm *)" in (denied.block or "")
        and "Message from the user: no" in (denied.block or "")
    )
    for allowed in (False, True):  # Codex's PreToolUse cannot ask: an ask is never a pass-through
        asked = codex.hook_answer("PreToolUse", decision("ask"), ask_allowed=allowed)
        assert asked.out is None and "cannot ask" in (asked.block or "")


def test_permission_request_answers() -> None:
    ok = codex.hook_answer("PermissionRequest", decision("allow"), ask_allowed=False)
    assert ok.out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    assert codex.hook_answer("PermissionRequest", decision("deny"), ask_allowed=True).block
    assert codex.hook_answer("PermissionRequest", decision("ask"), ask_allowed=True) == codex.Answer()
    assert codex.hook_answer("PermissionRequest", decision("ask"), ask_allowed=False).block
    sandboxed = codex.hook_answer(
        "PermissionRequest", decision("allow", updated_input={"command": "w"}), ask_allowed=False
    )
    assert sandboxed.out is None and "only inside its sandbox" in (sandboxed.block or "")


# --------------------------------------------------------------------------- the hook process


def run_hook(stdin: bytes | dict, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    data = json.dumps(stdin).encode() if isinstance(stdin, dict) else stdin
    return subprocess.run([*HOOK, "codex", *args], input=data, env=env, capture_output=True, timeout=30, check=False)


@pytest.mark.parametrize("stdin", [b"", b"{", b"[]", b'{"hook_event_name": "Stop"}', b"\xff\xfe", b'{"a": NaN}'])
def test_bad_stdin_blocks_with_exit_2(stdin: bytes) -> None:
    env = dict(os.environ, NEXUS_SOCKET=str(short_tmpdir() / "absent.sock"))
    r = run_hook(stdin, env)
    assert r.returncode == 2 and r.stderr.strip() and r.stdout == b""


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
def test_daemon_down_blocks(event: str) -> None:
    env = dict(os.environ, NEXUS_SOCKET=str(short_tmpdir() / "absent.sock"))
    r = run_hook(payload(event), env)
    assert r.returncode == 2 and b"not reachable" in r.stderr and r.stdout == b""


def test_allowed_read_prints_nothing_and_denied_write_blocks(daemon_factory: Any, tmp_path: Path) -> None:
    daemon: DaemonHandle = daemon_factory(policy='[permissions]\ndeny = ["Bash(rm *)"]\n')
    ok = run_hook(payload(tool_input={"command": "ls"}, cwd=str(tmp_path)), daemon.env)
    assert ok.returncode == 0 and ok.stdout == b"" and ok.stderr == b"", ok.stderr
    no = run_hook(payload(tool_input={"command": "rm -rf build"}, cwd=str(tmp_path)), daemon.env)
    assert no.returncode == 2 and b"Bash(rm *)" in no.stderr and no.stdout == b""


@pytest.mark.parametrize("on_no_ui", ["deny", "ask"])
def test_no_ui(daemon: DaemonHandle, tmp_path: Path, on_no_ui: str) -> None:
    """mkdir needs a person and none is connected: PreToolUse always blocks; PermissionRequest hands the
    call to Codex's own approval only with --on-no-ui ask."""
    pre = run_hook(payload(tool_input={"command": "mkdir out"}, cwd=str(tmp_path)), daemon.env, "--on-no-ui", on_no_ui)
    assert pre.returncode == 2 and pre.stdout == b""
    req = run_hook(
        payload("PermissionRequest", tool_input={"command": "mkdir out"}, cwd=str(tmp_path)),
        daemon.env,
        "--on-no-ui",
        on_no_ui,
    )
    if on_no_ui == "ask":
        assert req.returncode == 0 and req.stdout == b""
    else:
        assert req.returncode == 2


@pytest.mark.anyio
async def test_person_allows_permission_request_through_ui(daemon: DaemonHandle, tmp_path: Path) -> None:
    from nexusd.client import AsyncClient

    p = payload(
        "PermissionRequest",
        tool_input={"command": "mkdir out", "description": "why"},
        cwd=str(tmp_path),
        agent_id="sub-1",
        agent_type="worker",
    )
    async with AsyncClient(socket_path=str(daemon.socket), role="ui", name="test-ui") as ui:
        events = ui.subscribe().__aiter__()
        assert isinstance(await events.__anext__(), protocol.Snapshot)
        proc = subprocess.Popen(
            [*HOOK, "codex"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=daemon.env
        )
        done: dict[str, tuple[bytes, bytes]] = {}

        async def talk() -> None:
            done["io"] = await anyio.to_thread.run_sync(proc.communicate, json.dumps(p).encode())

        async with anyio.create_task_group() as tg:
            tg.start_soon(talk)
            with anyio.fail_after(20):
                async for event in events:
                    if isinstance(event, protocol.Prompt):
                        assert event.item.call.subagent_id == "sub-1" and event.item.call.subagent_type == "worker"
                        await ui.call(protocol.Answer(id=event.item.id, decision="allow"))
                        break
        out, err = done["io"]
    assert proc.returncode == 0, err
    assert json.loads(out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


@pytest.mark.anyio
async def test_attribution_is_kept_in_the_audit_trail(daemon: DaemonHandle, tmp_path: Path) -> None:
    """Product, session, subagent, workspace and pid of a Codex call, as the audit trail keeps them."""
    from nexusd.client import AsyncClient

    sid = payload()["session_id"]
    transcript = write_transcript(tmp_path, sid, str(tmp_path))
    p = payload(
        tool_input={"command": "ls"}, cwd=str(tmp_path), transcript_path=str(transcript),
        agent_id="agent-42", agent_type="explorer",
    )  # fmt: skip
    r = run_hook(p, daemon.env)
    assert r.returncode == 0, r.stderr
    async with AsyncClient(socket_path=str(daemon.socket), role="admin", name="audit-reader") as admin:
        reply = await admin.call(protocol.Audit(session=sid))
    assert isinstance(reply, protocol.AuditReply)
    (rec,) = [x for x in reply.records if x.event == "decision"]
    assert (rec.provider, rec.session, rec.tool, rec.decision) == ("codex", sid, "Bash", "allow")
    assert (rec.subagent_id, rec.subagent_type, rec.workspace) == ("agent-42", "explorer", str(tmp_path))
    assert rec.agent_pid  # the hook's parent: here the test process


def test_tui_and_watch_show_the_subagent(capsys: pytest.CaptureFixture[str]) -> None:
    from nexus_clients.tui import request_view
    from nexus_clients.tui.state import Entry

    from nexusd.cli.ctl_daemon import _print_item

    call = protocol.CallInfo(
        provider="claude", session="sess-1", tool="Bash", input={"command": "ls"}, cwd="/w/sub", workspace="/w",
        agent_pid=4242, subagent_id="a1b2", subagent_type="Explore\x1b[2J",
    )  # fmt: skip
    verdict = protocol.Verdict(decision="ask", reason="a person decides", source="default")
    item = protocol.PendingItem(id="0" * 32, call=call, verdict=verdict, created=1.0, deadline=31.0)
    assert request_view.agent_label(call) == "claude›Explore\x1b[2J"  # escaped where shown (safe_text)
    cells = request_view.queue_cells(Entry(item=item, seen_at=1.0), now=2.0)
    assert cells[1].plain.startswith("claude›Explore") and "\x1b" not in cells[1].plain
    _print_item(item)
    out = capsys.readouterr().out
    assert "subagent Explore?[2J (a1b2)" in out and "workspace /w" in out and "pid 4242" in out


PATCH = "*** Begin Patch\n*** Add File: .codex/config.toml\n+[hooks]\n*** End Patch"


@pytest.mark.parametrize(
    ("command", "cwd"),
    [
        (f"apply_patch <<'EOF'\n{PATCH}\nEOF\n", "/work/proj"),
        (f'apply_patch <<"EOF"\n{PATCH}\nEOF', "/work/proj"),
        (f"applypatch <<PATCH\n{PATCH}\nPATCH\n", "/work/proj"),
        (f"cd sub && apply_patch <<'EOF'\n{PATCH}\nEOF\n", "/work/proj/sub"),
        (f"cd '../other dir' && apply_patch <<'EOF'\n{PATCH}\nEOF", "/work/other dir"),
        (f"apply_patch '{PATCH}'", "/work/proj"),
    ],
)
def test_shell_apply_patch_is_the_patch_tool(command: str, cwd: str) -> None:
    """Codex runs ``apply_patch`` typed into its shell tool as its patch tool; its hook says Bash. The files
    the patch writes must be seen, so exactly these forms become the apply_patch call."""
    c = call(payload(tool_input={"command": command}, cwd="/work/proj"))
    assert (c.tool, c.input, c.cwd) == ("apply_patch", {"command": PATCH}, cwd)


@pytest.mark.parametrize(
    "command",
    [
        f"apply_patch <<'EOF'\n{PATCH}\nEOF\nrm -rf ~",  # a second command after the heredoc
        f"apply_patch <<'EOF'\n{PATCH}\nEOF\nrm -rf ~\nEOF",  # the heredoc ends at the first EOF
        f"apply_patch <<'EOF'\n{PATCH}\nEOF\n; curl x | sh",
        f"echo hi; apply_patch <<'EOF'\n{PATCH}\nEOF",
        f"cd $(evil) && apply_patch <<'EOF'\n{PATCH}\nEOF",
        'apply_patch "$(curl x | sh)"',
        f"apply_patch <<-EOF\n{PATCH}\nEOF",
        "apply_patch",
    ],
)
def test_anything_more_stays_a_shell_call(command: str) -> None:
    c = call(payload(tool_input={"command": command}))
    assert c.tool == "Bash" and c.input == {"command": command}


def test_nexusctl_check_reads_codex_hook_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nexusctl check`` maps Codex's hook JSON (it alone carries ``turn_id``) as ``nexus-hook codex`` does:
    exec's ``bypassPermissions`` is dont_ask, so a mkdir is denied, where Claude's adapter would allow it."""
    from click.testing import CliRunner

    from nexusd.cli.ctl import main as nexusctl

    for var, sub in (("NEXUS_CONFIG_DIR", "cfg"), ("NEXUS_STATE_DIR", "state"), ("NEXUS_MANAGED_DIR", "managed")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    hook = payload(tool_input={"command": "mkdir out"}, cwd=str(tmp_path), permission_mode="bypassPermissions")
    r = CliRunner().invoke(nexusctl, ["check", "--offline", "--json"], input=json.dumps(hook))
    assert r.exit_code == 1, r.output
    assert json.loads(r.output)["decision"] == "deny" and "dont_ask" in r.output


def test_workspace_falls_back_to_the_codex_process_cwd(tmp_path: Path) -> None:
    """No transcript (``--ephemeral``): the directory of the Codex process above the hook's shell. A copy
    of /bin/sh named ``codex`` stands in for the real binary (the e2e test runs the real one)."""
    import shutil
    import time

    fake = tmp_path / "codex"
    shutil.copy("/bin/sh", fake)
    ws = tmp_path / "ws"
    ws.mkdir()
    # the hook's shell: another program, in another directory, under the codex process
    proc = subprocess.Popen(
        [str(fake), "-c", "(cd / && exec /bin/sh -c 'sleep 30; :'); :"], cwd=ws, start_new_session=True
    )
    try:
        child = None
        for _ in range(100):
            out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            if out:
                child = int(out[0])
                break
            time.sleep(0.05)
        assert child is not None
        assert codex.codex_process(child) == (proc.pid, str(ws))
        assert codex.codex_process(os.getpid()) is None  # no codex above the test runner
        c = call(payload(cwd="/"), agent_pid=child)
        assert c.workspace == str(ws) and c.cwd == "/"
        assert c.agent_pid == proc.pid, "the queue names Codex, not the hook's short-lived shell"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own process group: the shell and its sleep
        proc.wait()


def test_codex_hook_shell_is_walked_past_by_the_self_approval_guard() -> None:
    """Codex runs hooks as ``$SHELL -lc "<command>"``: a command string, so the guard walks past that shell
    to Codex itself, whose shell tool could otherwise run ``nexusctl answer``."""
    from nexusd.daemon.peer import _runs_a_command

    assert _runs_a_command(["/bin/bash", "-lc", "nexus-hook codex --timeout 55 || exit 2"])
    assert _runs_a_command(["zsh", "-lc", "x"]) and not _runs_a_command(["bash", "-l"])
