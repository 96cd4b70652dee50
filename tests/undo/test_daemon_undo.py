"""Undo through the real daemon: a checkpoint before each allowed call that can change the workspace (and
none for reads or denials), the history with what each call changed, diffs, rewind with its rescue
checkpoint, one-file rewind, conflicts with a person's later edits, and the guard against agents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle, short_tmpdir

POLICY = """
[permissions]
allow = ["Read"]
"""


def call(ws: Path, tool: str, inp: dict[str, Any], session: str = "s1") -> dict[str, Any]:
    c = {"provider": "claude", "session": session, "tool": tool, "input": inp, "cwd": str(ws), "workspace": str(ws)}
    return {**c, "mode": "bypassPermissions"}  # the mode allows what the workspace boundary allows


def allow(h: DaemonHandle, raw_factory: Any, ws: Path, tool: str, inp: dict[str, Any], session: str = "s1") -> None:
    agent = raw_factory(h.socket)
    d = agent.ask({"type": "request", "call": call(ws, tool, inp, session), "ref": "r"})
    agent.close()
    assert isinstance(d, p.Decision) and d.decision == "allow", d


def run(ws: Path, command: str) -> None:
    """What the agent's tool does once allowed (the test plays the agent)."""
    subprocess.run(["bash", "-c", command], cwd=ws, check=True)


def ui_ask(h: DaemonHandle, raw_factory: Any, msg: dict[str, Any]) -> p.ServerMessage:
    ui = raw_factory(h.socket, role="admin", name="undo-test")
    ui.sock.settimeout(60)
    r = ui.ask(msg)
    ui.close()
    return r


def history(h: DaemonHandle, raw_factory: Any, **kw: Any) -> p.HistoryReply:
    r = ui_ask(h, raw_factory, {"type": "history", "ref": "h", **kw})
    assert isinstance(r, p.HistoryReply), r
    return r


def ctl(h: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def ws() -> Path:
    w = short_tmpdir() / "project"
    w.mkdir()
    (w / "keep.txt").write_text("one\ntwo\n")
    (w / "gone.txt").write_text("precious\n")
    (w / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (w / "tool.sh").chmod(0o755)
    (w / ".gitignore").write_text("build/\n")
    (w / "build").mkdir()
    (w / "build" / "big.o").write_bytes(b"\0" * 1000)
    return w


def test_shell_call_is_checkpointed_reviewed_and_rewound(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY)
    cmd = "rm gone.txt && sed -i s/two/TWO/ keep.txt && echo new > new.txt && chmod -x tool.sh"
    allow(h, raw_factory, ws, "Bash", {"command": cmd})
    run(ws, cmd)
    allow(h, raw_factory, ws, "Read", {"file_path": str(ws / "keep.txt")})  # a read: no checkpoint
    entries = history(h, raw_factory).entries
    assert len(entries) == 1, entries
    e = entries[0]
    assert e.tree and e.tool == "Bash" and e.summary == cmd and e.session == "s1" and e.workspace == str(ws)
    assert (e.added, e.changed, e.deleted) == (1, 2, 1), e.files
    assert e.plus == 2 and e.minus == 2, e.files
    assert not any(f.path.startswith("build/") for f in e.files)
    show = history(h, raw_factory, id=e.id, diff=True)
    assert "-precious" in (show.diff or "") and "+TWO" in (show.diff or ""), show.diff

    dry = ctl(h, "rewind", str(e.id), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would change 4 path(s)" in dry.stdout and "gone.txt" in dry.stdout
    assert not (ws / "gone.txt").exists()  # a dry run changes nothing

    done = ctl(h, "rewind", str(e.id))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws / "gone.txt").read_text() == "precious\n"
    assert (ws / "keep.txt").read_text() == "one\ntwo\n"
    assert not (ws / "new.txt").exists()
    assert os.stat(ws / "tool.sh").st_mode & 0o111 == 0o111
    assert (ws / "build" / "big.o").exists()  # ignored: untouched

    # the rewind is itself undoable: its rescue checkpoint brings the call's effects back
    rescue = [x for x in history(h, raw_factory).entries if x.kind == "rescue"]
    assert len(rescue) == 1 and f"nexusctl rewind {rescue[0].id}" in done.stdout
    again = ctl(h, "rewind", str(rescue[0].id))
    assert again.returncode == 0, again.stdout + again.stderr
    assert not (ws / "gone.txt").exists() and (ws / "new.txt").read_text() == "new\n"
    assert "TWO" in (ws / "keep.txt").read_text()

    listing = ctl(h, "history", "--files")
    assert listing.returncode == 0 and "session s1 (claude)" in listing.stdout and "D gone.txt" in listing.stdout


def test_one_file_rewind(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY)
    cmd = "rm gone.txt keep.txt"
    allow(h, raw_factory, ws, "Bash", {"command": cmd})
    run(ws, cmd)
    (e,) = history(h, raw_factory).entries
    done = ctl(h, "rewind", str(e.id), "--file", str(ws / "gone.txt"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ws / "gone.txt").exists() and not (ws / "keep.txt").exists()


def test_person_edit_after_the_call_is_a_conflict(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY)
    allow(h, raw_factory, ws, "Write", {"file_path": str(ws / "keep.txt"), "content": "agent\n"})
    (ws / "keep.txt").write_text("agent\n")
    (ws / "gone.txt").write_text("the person's own edit\n")  # not the call's: its classification names keep.txt
    allow(h, raw_factory, ws, "Bash", {"command": "touch other.txt"})
    first = history(h, raw_factory).entries[0]
    refused = ctl(h, "rewind", str(first.id))
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "changed after the call by someone else: gone.txt" in refused.stdout
    assert (ws / "keep.txt").read_text() == "agent\n"  # nothing changed
    forced = ctl(h, "rewind", str(first.id), "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert (ws / "keep.txt").read_text() == "one\ntwo\n" and (ws / "gone.txt").read_text() == "precious\n"


def test_rewind_never_follows_a_symlink_out(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY)
    outside = short_tmpdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "f.txt").write_text("inside\n")
    cmd = "rm -r sub"
    allow(h, raw_factory, ws, "Bash", {"command": cmd})
    run(ws, cmd)
    os.symlink(outside, ws / "sub")  # planted where the rewind will write sub/f.txt
    (e,) = [x for x in history(h, raw_factory).entries if x.tool == "Bash"]
    done = ctl(h, "rewind", str(e.id), "--force")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (outside / "f.txt").exists()  # the link was removed as a file, never written through
    assert not (ws / "sub").is_symlink() and (ws / "sub" / "f.txt").read_text() == "inside\n"


def test_history_and_rewind_refused_from_an_agent(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    """An agent's child may not review or rewind: the script plays an agent (its child asks nexusd as a hook
    would, so the kernel names the script as the agent), then runs nexusctl as its shell tool would."""
    h = daemon_factory(policy=POLICY)
    hook = f"""
import os
from nexusd.client import Client
from nexusd import protocol as p
with Client(role="agent", name="agent") as c:
    d = c.request(p.CallInfo(provider="claude", session="s", tool="Bash", input={{"command": "touch x"}},
                             cwd={str(ws)!r}, workspace={str(ws)!r}, mode="bypassPermissions", agent_pid=os.getppid()))
    print(d.decision)
"""
    script = f"""
import subprocess, sys
print(subprocess.run([sys.executable, "-c", {hook!r}], capture_output=True, text=True).stdout.strip())
r = subprocess.run([sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "rewind", "1"],
                   capture_output=True, text=True)
print(r.returncode, r.stderr)
r = subprocess.run([sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "history"],
                   capture_output=True, text=True)
print(r.returncode, r.stderr)
"""
    out = subprocess.run([sys.executable, "-c", script], env=h.env, capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert lines[0] == "allow", out
    assert lines[1].startswith("4 ") and "self_approval" in lines[1], out
    assert "self_approval" in "\n".join(lines[2:]), out


def test_no_checkpoint_for_denials_and_reads(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy='[permissions]\ndeny = ["Bash(rm *)"]\n')
    allow(h, raw_factory, ws, "Bash", {"command": "ls -la"})
    allow(h, raw_factory, ws, "Bash", {"command": "cat keep.txt"})
    agent = raw_factory(h.socket)
    d = agent.ask({"type": "request", "call": call(ws, "Bash", {"command": "rm gone.txt"}), "ref": "r"})
    assert isinstance(d, p.Decision) and d.decision == "deny"
    assert history(h, raw_factory).entries == []


def test_unknown_checkpoint(daemon_factory: Any, raw_factory: Any) -> None:
    h = daemon_factory(policy=POLICY)
    r = ui_ask(h, raw_factory, {"type": "rewind", "id": 99, "ref": "x"})
    assert isinstance(r, p.Error) and r.code == "not_found", r


@pytest.mark.parametrize("on_failure", ["allow", "deny"])
def test_a_checkpoint_that_times_out_never_allows_silently(
    daemon_factory: Any, raw_factory: Any, ws: Path, on_failure: str
) -> None:
    """A checkpoint that cannot be taken in time: the history says so; "allow" lets the call go on, "deny"
    denies it and audits the denial (a second record, after the allow recorded at the decision)."""
    h = daemon_factory(policy=POLICY, autostart=False)
    (h.config_dir / "undo.toml").write_text(f'[undo]\ntimeout = 0.001\non_failure = "{on_failure}"\n')
    h.start()
    agent = raw_factory(h.socket)
    d = agent.ask({"type": "request", "call": call(ws, "Bash", {"command": "rm gone.txt"}), "ref": "r"})
    assert isinstance(d, p.Decision) and d.ref == "r"
    assert d.decision == on_failure, d
    if on_failure == "deny":
        assert "no checkpoint" in d.reason and d.source == "error"
    entries = history(h, raw_factory).entries  # recorded before the decision was sent
    assert len(entries) == 1 and entries[0].tree is None and "no checkpoint" in entries[0].note, entries
    records = ui_ask(h, raw_factory, {"type": "audit", "ref": "a"})
    assert isinstance(records, p.AuditReply)
    events = [r.event for r in records.records if r.tool == "Bash"]
    assert events == (["decision", "undo_checkpoint_failed"] if on_failure == "deny" else ["decision"]), events
