"""nexusctl's daemon commands against a real daemon (in-process click runner, real socket)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from nexusd import protocol as p
from nexusd.cli.ctl import main
from tests.daemon.conftest import CALL_BASH, Raw


def run(daemon, *args: str, input: str | None = None):
    return CliRunner().invoke(main, ["--socket", str(daemon.socket), *args], input=input, env=daemon.env)


@pytest.fixture
def pending_request(daemon):
    """A subscribed UI and an agent whose Bash call waits for a person; yields (agent, ui, id)."""
    ui = Raw(daemon.socket)
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    agent = Raw(daemon.socket)
    agent.hello()
    pend = agent.ask({"type": "request", "call": CALL_BASH, "ref": "r"})
    assert isinstance(pend, p.Pending)
    assert isinstance(ui.recv(), p.Prompt)
    yield agent, ui, pend.id
    agent.close()
    ui.close()


def test_status_text_and_json(daemon):
    r = run(daemon, "status")
    assert r.exit_code == 0, r.output
    assert "pending 0" in r.output
    r = run(daemon, "status", "--json")
    assert json.loads(r.output)["type"] == "status_reply"


def test_status_counts_decisions_and_the_memo_apart(daemon_factory, tmp_path):
    d = daemon_factory(policy='[permissions]\nallow = ["Bash(echo *)"]\n')
    (tmp_path / ".git").mkdir()
    agent = Raw(d.socket)
    agent.hello()
    call = {**CALL_BASH, "input": {"command": "echo hi"}, "cwd": str(tmp_path)}
    for i in range(3):
        assert agent.ask({"type": "request", "call": call, "ref": str(i)}).decision == "allow"
    out = run(d, "status").output
    assert "decisions: allow/rule 3\n" in out and "decision memo: hit 2, miss 1, stale 0" in out, out
    # every inline decision is timed; the timing is its own line, not a decision counter
    assert "decision time: " in out and "µs per call on average (3 calls)" in out and "gate/" not in out, out
    status = json.loads(run(d, "status", "--json").output)
    assert status["counters"]["gate/calls"] == 3 and status["counters"]["gate/ns"] > 0
    agent.close()


def _status_with_probe(daemon) -> str:
    """The daemon probes in a thread after it starts listening: wait until status carries the probe."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if json.loads(run(daemon, "status", "--json").output).get("sandbox"):
            return run(daemon, "status").output
        time.sleep(0.1)
    raise AssertionError("the daemon never reported a sandbox probe")


def test_status_shows_every_answer_of_the_probe(daemon):
    out = _status_with_probe(daemon)
    assert "sandbox (the daemon's view): available" in out
    assert "check bwrap: ok" in out and "check userns: ok" in out


def test_status_shows_why_the_sandbox_is_unavailable(daemon_factory):
    # No bwrap or unshare on PATH: the probe must say so, and status must show it.
    h = daemon_factory(env={"PATH": "/nonexistent"})
    out = _status_with_probe(h)
    assert "sandbox (the daemon's view): UNAVAILABLE" in out
    assert "check bwrap: bwrap not found" in out and "check userns: unshare not found" in out
    assert "reason:" in out


def test_unreachable_daemon_is_one_line_and_exit_3(daemon):
    daemon.stop()
    for cmd in (["status"], ["pending"], ["answer", "x" * 32, "allow"], ["reload"], ["mode", "s", "plan"]):
        r = run(daemon, *cmd)
        assert r.exit_code == 3, (cmd, r.output)
        assert "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1
    r = run(daemon, "version")
    assert r.exit_code == 0 and "not running" in r.output


def test_pending_and_answer(daemon, pending_request):
    agent, _ui, rid = pending_request
    r = run(daemon, "pending", "--json")
    assert r.exit_code == 0
    assert [i["id"] for i in json.loads(r.output)] == [rid]
    r = run(daemon, "pending")
    assert rid in r.output and "npm install left-pad" in r.output
    r = run(daemon, "answer", rid, "allow", "--message", "fine")
    assert r.exit_code == 0, r.output
    d = agent.recv()
    assert isinstance(d, p.Decision) and d.decision == "allow" and d.message == "fine"
    again = run(daemon, "answer", rid, "deny")
    # no longer pending is not a refusal: its own exit code (was 4, the same as a self-approval refusal)
    assert again.exit_code == 7 and "already_decided" in again.output


def test_answer_takes_a_unique_prefix(daemon, pending_request):
    agent, _ui, rid = pending_request
    r = run(daemon, "answer", "zzzz", "allow")
    assert r.exit_code == 7 and "no pending request starts with" in r.output
    r = run(daemon, "answer", rid[:8], "deny", "-m", "not now")
    assert r.exit_code == 1, r.output
    d = agent.recv()
    assert isinstance(d, p.Decision) and d.decision == "deny" and d.message == "not now"
    r = run(daemon, "answer", rid[:8], "deny")
    assert r.exit_code == 7


def test_answer_deny_exits_1_and_never_needs_deny(daemon, pending_request):
    agent, _ui, rid = pending_request
    r = run(daemon, "answer", rid, "allow", "--never")
    assert r.exit_code == 2
    r = run(daemon, "answer", rid, "deny")
    assert r.exit_code == 1
    assert agent.recv().decision == "deny"


def test_answer_session_with_rule(daemon, pending_request):
    agent, _ui, rid = pending_request
    r = run(daemon, "answer", rid, "allow", "--session", "--rule", "Bash(ls *)")
    assert r.exit_code == 0, r.output
    assert agent.recv().decision == "allow"


def test_check_reads_a_callinfo_or_a_request(daemon, tmp_path):
    r = run(daemon, "check", input=json.dumps(CALL_BASH))
    assert r.exit_code in (1, 6), r.output  # never allowed: Bash needs a person (or a rule denies it)
    assert "decision:" in r.output and "trace:" in r.output
    f = tmp_path / "req.json"
    f.write_text(json.dumps({"type": "request", "call": {**CALL_BASH, "tool": "Read", "input": {"file_path": "/x"}}}))
    r = run(daemon, "check", str(f), "--json")
    verdict = json.loads(r.output)
    assert verdict["decision"] in ("allow", "ask", "deny")
    assert r.exit_code == {"allow": 0, "deny": 1, "ask": 6}[verdict["decision"]]
    bad = run(daemon, "check", input="{not json")
    assert bad.exit_code == 2


def test_check_offline_needs_no_daemon(daemon):
    daemon.stop()
    r = run(daemon, "check", "--offline", "--json", input=json.dumps(CALL_BASH))
    assert r.exit_code in (0, 1, 6), r.output
    assert json.loads(r.output)["decision"] in ("allow", "deny", "ask")


def test_mode_reload_version(daemon):
    r = run(daemon, "mode", "sess-1", "plan", "--new")  # not seen yet: --new
    assert r.exit_code == 0, r.output
    st = json.loads(run(daemon, "status", "--json").output)
    assert st["sessions"]["sess-1"] == "plan"
    r = run(daemon, "mode", "sess-1", "clear")
    assert json.loads(run(daemon, "status", "--json").output)["sessions"]["sess-1"] == "default"
    r = run(daemon, "reload")
    assert r.exit_code in (0, 4)
    r = run(daemon, "version", "--json")
    assert json.loads(r.output)["daemon"]


def test_mode_refuses_an_unknown_name_with_the_valid_ones(daemon):
    r = run(daemon, "mode", "sess-2", "bypas")
    assert r.exit_code != 0
    assert "unknown mode 'bypas'" in r.output and "bypassPermissions" in r.output
    assert "sess-2" not in json.loads(run(daemon, "status", "--json").output).get("sessions", {})


def test_audit_reads_the_file_and_follows(daemon):
    agent = Raw(daemon.socket)
    agent.hello()
    agent.ask({"type": "request", "call": {**CALL_BASH, "tool": "Read", "input": {"file_path": "/etc/hosts"}}})
    agent.ask({"type": "request", "call": CALL_BASH})
    admin = Raw(daemon.socket)
    admin.hello("admin")
    admin.ask({"type": "audit"})  # flush the writer
    r = run(daemon, "audit", "--json")
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in r.output.splitlines()]
    assert [rec["tool"] for rec in records] == ["Read", "Bash"]
    r = run(daemon, "audit", "--tool", "Bash")
    assert "Bash" in r.output and "Read" not in r.output


def test_watch_streams_until_bye(daemon):
    """watch prints what is pending when it subscribes, then each event as it comes, until the daemon's bye
    (exit 3). It runs as a real process so its output can be read live: the line for the request already
    pending is the proof that it has subscribed (a UI connection alone is not: prompts go to subscribers),
    and only then is the second request sent, which it must see arrive."""
    ui = Raw(daemon.socket)  # a subscribed UI, so the first request waits for a person
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    first_agent, second_agent = Raw(daemon.socket), Raw(daemon.socket)
    first_agent.hello()
    second_agent.hello()
    first = first_agent.ask({"type": "request", "call": CALL_BASH})
    assert isinstance(first, p.Pending)
    watch = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from nexusd.cli.ctl import main; main()",
            "--socket",
            str(daemon.socket),
            "watch",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=daemon.env,
        text=True,
    )
    try:
        assert watch.stdout is not None
        snapshot = json.loads(watch.stdout.readline())  # blocks until watch has subscribed
        assert (snapshot["type"], snapshot["item"]["id"]) == ("prompt", first.id)
        second = second_agent.ask({"type": "request", "call": CALL_BASH})
        assert isinstance(second, p.Pending)
        daemon.stop()
        rest, err = watch.communicate(timeout=20)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 3, (rest, err)
    lines = [json.loads(line) for line in rest.splitlines()]
    assert [m["type"] for m in lines] == ["prompt", "resolved", "resolved", "bye"], lines
    assert lines[0]["item"]["id"] == second.id
    assert {m["id"] for m in lines[1:3]} == {first.id, second.id}
    assert "daemon stopping" in err
    for conn in (ui, first_agent, second_agent):
        conn.close()


@pytest.mark.parametrize(
    ("hook_input", "decision"),
    [
        (
            {
                "session_id": "s1",
                "transcript_path": "/tmp/t.jsonl",
                "cwd": "/tmp",
                "hook_event_name": "PreToolUse",
                "permission_mode": "default",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "tool_use_id": "t1",
            },
            "allow",
        ),
        (
            {
                "session_id": "s1",
                "cwd": "/tmp",
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": "rm -rf build"},
            },
            "ask",
        ),
        (
            {
                "session_id": "g1",
                "transcript_path": "/tmp/x.json",
                "cwd": "/tmp",
                "hook_event_name": "BeforeTool",
                "timestamp": "2026-01-01T00:00:00Z",
                "tool_name": "read_file",
                "tool_input": {"file_path": "a.txt"},
            },
            "allow",
        ),
    ],
)
def test_check_takes_the_agents_own_hook_input(daemon, hook_input, decision):
    """Issue "first hour": `nexusctl check` refused Claude's hook JSON (unknown field session_id, exit 2)."""
    r = run(daemon, "check", "--json", input=json.dumps(hook_input))
    assert r.exit_code in (0, 1, 6), r.output
    assert json.loads(r.output)["decision"] == decision


def test_check_refuses_a_broken_hook_input_clearly(daemon):
    r = run(daemon, "check", input=json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}))
    assert r.exit_code == 2 and "hook input" in r.output


def test_audit_records_carry_the_mode_and_requirement_as_fields_to_filter_on(daemon, tmp_path):
    """Seed 002 asks for filterable decisions: the mode and what the call needed are fields, not trace text."""
    ws = str(tmp_path)
    agent = Raw(daemon.socket)
    agent.hello()
    edit = {"file_path": f"{ws}/a.txt", "content": "x"}
    agent.ask({"type": "request", "call": {**CALL_BASH, "cwd": ws, "workspace": ws, "mode": "acceptEdits",
                                           "tool": "Write", "input": edit}})  # fmt: skip
    agent.ask({"type": "request", "call": {**CALL_BASH, "cwd": ws, "workspace": ws, "mode": "default",
                                           "tool": "Read", "input": {"file_path": f"{ws}/a.txt"}}})  # fmt: skip
    admin = Raw(daemon.socket)
    admin.hello("admin")
    admin.ask({"type": "audit"})  # flush the writer
    records = [json.loads(line) for line in run(daemon, "audit", "--json").output.splitlines()]
    assert [(r["tool"], r["mode"], r["requirement"]) for r in records] == [
        ("Write", "accept_edits", "workspace-write"),
        ("Read", "default", "read-only"),
    ]
    r = run(daemon, "audit", "--json", "--mode", "acceptEdits")  # any spelling of a mode
    assert [json.loads(line)["tool"] for line in r.output.splitlines()] == ["Write"]
    r = run(daemon, "audit", "--json", "--requirement", "read-only")
    assert [json.loads(line)["tool"] for line in r.output.splitlines()] == ["Read"]
    r = run(daemon, "audit", "--mode", "bypas")
    assert r.exit_code != 0 and "unknown mode 'bypas'" in r.output


def _seen(daemon, session: str) -> None:
    agent = Raw(daemon.socket)
    agent.hello()
    call = {**CALL_BASH, "session": session, "input": {"command": "ls"}}
    assert isinstance(agent.ask({"type": "request", "call": call, "ref": "s"}), p.Decision)
    agent.close()


def test_mode_takes_a_unique_prefix_and_refuses_unknown_or_ambiguous_sessions(daemon):
    """Issue 38: `nexusctl mode <prefix> plan` made a phantom session and exited 0."""
    for s in ("sess-abc123", "sess-abd456"):
        _seen(daemon, s)
    r = run(daemon, "mode", "sess-abc", "plan")
    assert r.exit_code == 0 and r.output.startswith("sess-abc123: "), r.output
    sessions = json.loads(run(daemon, "status", "--json").output)["sessions"]
    assert sessions["sess-abc123"] == "plan" and "sess-abc" not in sessions
    r = run(daemon, "mode", "sess-ab", "plan")
    assert r.exit_code == 2 and "2 sessions" in r.output and "sess-abd456" in r.output, r.output
    r = run(daemon, "mode", "nosuch", "plan")
    assert r.exit_code == 2 and "no session 'nosuch'" in r.output and "--new" in r.output, r.output
    assert "nosuch" not in json.loads(run(daemon, "status", "--json").output)["sessions"]


@pytest.mark.parametrize(("typed", "meant"), [("bypas", "bypass"), ("acceptEdit", "acceptEdits"), ("plna", "plan")])
def test_a_mistyped_mode_gets_a_did_you_mean(daemon, typed, meant):
    _seen(daemon, "sess-typo")
    r = run(daemon, "mode", "sess-typo", typed)
    assert r.exit_code == 2 and f"did you mean {meant!r}?" in r.output, r.output
    admin = Raw(daemon.socket)
    admin.hello("admin")
    err = admin.ask({"type": "set_mode", "session": "sess-typo", "mode": typed, "ref": "m"})
    assert isinstance(err, p.Error) and f"did you mean {meant!r}?" in err.message, err  # the daemon says it too
    admin.close()


def test_socket_is_taken_after_the_subcommand_too(daemon):
    env = {**daemon.env, "NEXUS_SOCKET": "/nonexistent/elsewhere.sock"}
    for args in (
        ["status", "--socket", str(daemon.socket)],
        [f"--socket={daemon.socket}", "status"],
        ["grants", "--socket", str(daemon.socket)],
        ["pending", f"--socket={daemon.socket}"],
        ["service", "status", "--socket", str(daemon.socket)],  # a nested group's command reads ctx.obj
    ):
        r = CliRunner().invoke(main, args, env=env)
        assert r.exit_code == 0, (args, r.output)
    r = CliRunner().invoke(main, ["status", "--socket", "/nonexistent/other.sock"], env=daemon.env)
    assert r.exit_code == 3 and "/nonexistent/other.sock" in r.output, r.output


@pytest.mark.parametrize("program", ["nexusctl", "nexusd"])
def test_version_flag(program):
    from pathlib import Path

    from nexusd import __version__

    exe = str(Path(sys.executable).with_name(program))
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.strip() == f"{program} {__version__}", r
