"""Paths longer than any system call takes are not walked.

A Read of ``/./././…/x`` (600 KB) or a cwd of ``/a/a/a/…`` (120 KB) made the gate walk the path one component at
a time, each step copying the rest of it: seconds of the daemon's one thread per call, every agent waiting.
No tool can use such a path (Linux PATH_MAX: 4,096 bytes), so a path word that long is not resolved (dynamic:
never allowed by a mode or a broad rule), and a call whose cwd, workspace or transcript path is that long is
refused as an invalid message (the agent's adapter denies it).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from nexusd import protocol as p
from nexusd.core.model import Flag, Session
from nexusd.policy.gate import begin
from nexusd.policy.store import PolicyStore
from nexusd.protocol import PATH_MAX, CallInfo
from tests.conftest import DaemonHandle


@pytest.fixture
def store(tmp_path: Path) -> PolicyStore:
    for d in ("config", "state", "managed", "ws/.git"):
        (tmp_path / d).mkdir(parents=True)
    s = PolicyStore(config_dir=tmp_path / "config", state_dir=tmp_path / "state", managed_dir=tmp_path / "managed")
    s.load()
    return s


@pytest.mark.parametrize(
    ("tool", "key", "path"),
    [
        ("Read", "file_path", "/" + "./" * 300_000 + "x"),
        ("Read", "file_path", "/" + "../" * 300_000 + "etc/passwd"),
        ("Read", "file_path", "a/" * (PATH_MAX // 2) + "x"),  # relative: long once joined to the cwd
        ("Edit", "file_path", "/" + "a/" * 100_000 + "x"),
        ("Write", "file_path", "~/" + "b/" * 5_000 + "x"),
        ("Glob", "path", "/" + "*/" * 50_000),
    ],
)
def test_a_path_longer_than_path_max_is_not_walked(tmp_path: Path, store: PolicyStore, tool: str, key: str, path: str):
    inp: dict[str, object] = {key: path}
    if tool == "Edit":
        inp |= {"old_string": "a", "new_string": "b"}
    if tool == "Write":
        inp["content"] = "x"
    if tool == "Glob":
        inp["pattern"] = "*.py"
    call = CallInfo(provider="claude", session="s", tool=tool, input=inp, cwd=str(tmp_path / "ws"), mode="acceptEdits")
    b = begin(call, store, Session(id="s", provider="claude", agent_mode="acceptEdits"))
    assert b.cls is not None and Flag.DYNAMIC in b.cls.flags, b.cls.flags
    assert b.verdict is not None and b.verdict.decision != "allow"
    assert all(len(n) < 1000 for n in b.cls.notes)  # a note shows the start of the path, not all of it


def test_a_path_just_under_the_limit_is_still_resolved(tmp_path: Path, store: PolicyStore) -> None:
    """The control: inside the workspace, 4,000 characters long, allowed to read as before."""
    ws = tmp_path / "ws"
    rel = "d/" * ((PATH_MAX - len(str(ws)) - 200) // 2) + "f"
    call = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": str(ws / rel)}, cwd=str(ws))
    b = begin(call, store, Session(id="s", provider="claude"))
    assert b.cls is not None and Flag.DYNAMIC not in b.cls.flags
    assert b.verdict is not None and b.verdict.decision == "allow"


@pytest.mark.parametrize("field", ["cwd", "workspace", "transcript_path"])
def test_a_call_with_an_overlong_cwd_is_an_invalid_message(field: str) -> None:
    call = {"provider": "claude", "session": "s", "tool": "Bash", "input": {"command": "ls"}, "cwd": "/tmp"}
    call[field] = "/" + "a/" * PATH_MAX
    line = msgspec.json.encode({"type": "request", "call": call, "ref": "1"})
    with pytest.raises(msgspec.ValidationError, match=field):
        p.decode_client(line)
    call[field] = "/tmp"
    p.decode_client(msgspec.json.encode({"type": "request", "call": call, "ref": "1"}))


def test_the_daemon_refuses_it_and_stays_up(daemon: DaemonHandle) -> None:
    """Over the wire: an error for that request (the adapters deny on an error), then the next call works."""
    from tests.daemon.conftest import Raw  # the raw JSON-lines client of the daemon tests

    agent = Raw(daemon.socket)
    agent.hello()
    long_cwd = {"provider": "claude", "session": "s", "tool": "Bash", "input": {"command": "ls"}}
    reply = agent.ask({"type": "request", "call": {**long_cwd, "cwd": "/" + "a/" * 60_000}, "ref": "long"})
    assert isinstance(reply, p.Error) and reply.code == "invalid_message" and reply.ref == "long"
    ok = agent.ask({"type": "request", "call": {**long_cwd, "cwd": "/tmp"}, "ref": "short"})
    assert isinstance(ok, p.Decision) and ok.ref == "short"
    agent.close()


def test_claude_hook_denies_a_call_from_an_overlong_cwd(daemon: DaemonHandle) -> None:
    """The adapter turns the refusal into a deny the agent shows, with the reason."""
    import json
    import subprocess
    import sys

    hook = str(Path(sys.executable).with_name("nexus-hook"))
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    cp = subprocess.run(
        [hook, "claude"],
        input=json.dumps({**payload, "cwd": "/" + "a/" * 3000}),
        capture_output=True,
        text=True,
        env=daemon.env,
        timeout=30,
        check=False,
    )
    out = json.loads(cp.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "4096" in out["permissionDecisionReason"], out


@pytest.mark.parametrize(
    "msg",
    [
        {"type": "sandbox_plan", "command": "ls", "cwd": "/" + "a/" * PATH_MAX},
        {"type": "sandbox_plan", "command": "ls", "cwd": "/tmp", "workspace": "/" + "a/" * PATH_MAX},
        {"type": "sandbox_report", "command": "ls", "cwd": "/" + "a/" * PATH_MAX, "violations": []},
    ],
)
def test_sandbox_messages_bound_their_paths_too(msg: dict[str, object]) -> None:
    with pytest.raises(msgspec.ValidationError, match="length <= 4096"):
        p.decode_client(msgspec.json.encode(msg))
