"""The audit hash chain: whole after 10,000 decisions and restarts; every kind of tampering is found and named.

Tampering is done the way an attacker with the user's rights would: editing, removing, inserting lines,
cutting the tail, swapping, replacing or removing files, removing the checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nexusd.client import Client
from nexusd.daemon.audit import AuditLog, read_tail
from nexusd.daemon.auditchain import GENESIS, checkpoint_path, line_hash, verify
from nexusd.protocol import AuditRecord, CallInfo
from tests.conftest import DaemonHandle

KEEP = 3


def rec(i: int) -> AuditRecord:
    return AuditRecord(
        time=float(i),
        id=f"{i:032x}",
        provider="claude",
        session="s",
        tool="Bash",
        summary=f"cmd {i}",
        decision="allow",
        source="rule",
        reason="r" * 100,
    )


def write(path: Path, n: int, start: int = 0, max_bytes: int = 16 << 20) -> None:
    log = AuditLog(path, max_bytes=max_bytes, keep=KEEP)
    log.start()
    for i in range(start, start + n):
        log.write(rec(i), {"command": f"echo {i}"})
        if i % 10 == 9:  # a batch is never split across files: flush so that rotation happens in between
            assert log.flush(30)
    assert log.flush(30)
    log.close()


@pytest.fixture
def trail(tmp_path: Path) -> Path:
    """Four files (current + 3 rotated) of chained lines, closed cleanly."""
    path = tmp_path / "audit.jsonl"
    write(path, 200, max_bytes=12_000)
    assert all(path.with_name(f"audit.jsonl.{i}").exists() for i in (1, 2, 3))
    rep = verify(path, KEEP)
    assert rep.ok, rep.problems
    return path


def lines_of(p: Path) -> list[bytes]:
    return p.read_bytes().splitlines(keepends=True)


@pytest.mark.slow
def test_chain_is_whole_after_10000_decisions_with_rotation(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, 10_000, max_bytes=1 << 20)
    rep = verify(path, KEEP)
    assert rep.ok, rep.problems
    assert rep.files == 4 and rep.lines > 5000  # the oldest rotated away; the kept ones chain end to end
    recs = read_tail(path, 10)
    assert [r.time for r in recs] == [float(i) for i in range(9990, 10_000)]  # readers ignore the new field
    last = lines_of(path)[-1].rstrip(b"\n")
    assert json.loads(last)["prev"] == line_hash(lines_of(path)[-2].rstrip(b"\n"))


def test_the_first_line_starts_from_genesis_and_restarts_continue_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, 3)
    assert json.loads(lines_of(path)[0])["prev"] == GENESIS
    write(path, 3, start=3)  # a restart continues where the file ends
    write(path, 50, start=6, max_bytes=3000)  # and rotates
    rep = verify(path, KEEP)
    assert rep.ok, rep.problems
    assert oct(checkpoint_path(path).stat().st_mode & 0o777) == "0o600"


def test_an_edited_line_breaks_the_chain_at_the_next(trail: Path) -> None:
    f = trail.with_name("audit.jsonl.2")
    ls = lines_of(f)
    ls[3] = ls[3].replace(b'"decision":"allow"', b'"decision":"deny"')
    f.write_bytes(b"".join(ls))
    rep = verify(trail, KEEP)
    assert not rep.ok and rep.problems[0].startswith(f"{f}:5: chain broken")


def test_an_edit_that_rehashes_the_rest_of_the_file_still_shows(trail: Path) -> None:
    """An attacker recomputing every later ``prev`` in the file is caught at the next file or the checkpoint."""
    f = trail.with_name("audit.jsonl.1")
    ls = [json.loads(x) for x in lines_of(f)]
    ls[2]["summary"] = "nothing to see"
    prev = ls[0]["prev"]
    out = []
    for obj in ls:
        obj["prev"] = prev
        line = json.dumps(obj, separators=(",", ":")).encode()
        prev = line_hash(line)
        out.append(line + b"\n")
    f.write_bytes(b"".join(out))
    rep = verify(trail, KEEP)
    assert not rep.ok
    assert any(str(trail) + ":" in p and "does not follow" in p for p in rep.problems)
    assert any("does not match the checkpoint" in p for p in rep.problems)


@pytest.mark.parametrize("where", ["middle", "first", "last-of-rotated"])
def test_a_removed_line_is_found(trail: Path, where: str) -> None:
    f = trail.with_name("audit.jsonl.1")
    ls = lines_of(f)
    idx = {"middle": 4, "first": 0, "last-of-rotated": len(ls) - 1}[where]
    del ls[idx]
    f.write_bytes(b"".join(ls))
    rep = verify(trail, KEEP)
    assert not rep.ok, where


def test_an_inserted_line_is_found(trail: Path) -> None:
    ls = lines_of(trail)
    forged = json.loads(ls[1])
    forged["summary"] = "rm -rf ~ (approved)"
    ls.insert(2, json.dumps(forged, separators=(",", ":")).encode() + b"\n")
    trail.write_bytes(b"".join(ls))
    rep = verify(trail, KEEP)
    assert not rep.ok and rep.problems[0].startswith(f"{trail}:3: chain broken")  # it follows line 1, not 2


def test_a_truncated_tail_of_the_live_file_is_found(trail: Path) -> None:
    ls = lines_of(trail)
    trail.write_bytes(b"".join(ls[:-3]))
    rep = verify(trail, KEEP)
    assert not rep.ok and "truncated" in rep.problems[0]


def test_a_truncated_tail_of_a_rotated_file_is_found(trail: Path) -> None:
    f = trail.with_name("audit.jsonl.3")
    f.write_bytes(b"".join(lines_of(f)[:-1]))
    rep = verify(trail, KEEP)
    assert not rep.ok
    assert any("audit.jsonl.3" in p and "does not match the checkpoint" in p for p in rep.problems)


def test_swapped_files_are_found(trail: Path) -> None:
    a, b = trail.with_name("audit.jsonl.1"), trail.with_name("audit.jsonl.2")
    tmp = trail.with_name("x")
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)
    rep = verify(trail, KEEP)
    assert not rep.ok and ("audit.jsonl.1" in rep.problems[0] or "audit.jsonl.2" in rep.problems[0])


def test_a_file_replaced_by_an_older_copy_is_found(trail: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(trail.with_name("audit.jsonl.3"), old / "three")
    write(trail, 40, start=1000, max_bytes=12_000)  # more rotations: .3 is now other lines
    assert verify(trail, KEEP).ok
    shutil.copy(old / "three", trail.with_name("audit.jsonl.3"))
    rep = verify(trail, KEEP)
    assert not rep.ok and "audit.jsonl.3" in rep.problems[0]


@pytest.mark.parametrize("victim", ["audit.jsonl.2", "audit.jsonl", "audit.jsonl.chain"])
def test_a_missing_file_is_found(trail: Path, victim: str) -> None:
    trail.with_name(victim).unlink()
    rep = verify(trail, KEEP)
    assert not rep.ok and "missing" in " ".join(rep.problems)


def test_a_forged_checkpoint_is_refused(trail: Path) -> None:
    checkpoint_path(trail).write_text('{"current": 1}')
    rep = verify(trail, KEEP)
    assert not rep.ok and "checkpoint unreadable" in rep.problems[0]


def test_a_torn_line_from_a_crash_is_a_note_not_a_break(tmp_path: Path) -> None:
    """Once sealed by the next start; before that it is a break (issue 34, item 7)."""
    path = tmp_path / "audit.jsonl"
    write(path, 5)
    with open(path, "ab") as f:
        f.write(b'{"time":1.0,"id":"torn')  # power lost mid-line
    rep = verify(path, KEEP)
    assert not rep.ok and ":6: a torn line (half a record) nobody sealed" in rep.problems[0], rep.problems
    write(path, 5, start=5)
    rep = verify(path, KEEP)
    assert rep.ok, rep.problems
    assert any(":6: a torn line left by a crash, sealed" in n for n in rep.notes)
    seal = json.loads(lines_of(path)[6])
    assert seal["event"] == "audit_sealed" and line_hash(b'{"time":1.0,"id":"torn') in seal["reason"]


def test_a_cut_made_while_the_daemon_was_stopped_stays_visible_after_restart(tmp_path: Path) -> None:
    """The writer continues from the checkpoint's head, not from the cut file, so the cut cannot be healed by
    restarting the daemon and writing on."""
    path = tmp_path / "audit.jsonl"
    write(path, 20)
    path.write_bytes(b"".join(lines_of(path)[:-5]))
    write(path, 10, start=100)
    rep = verify(path, KEEP)
    assert not rep.ok and rep.problems[0].startswith(f"{path}:16: chain broken")


def _ctl(h: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_nexusctl_audit_verify_against_a_running_daemon(daemon_factory) -> None:
    h = daemon_factory(policy='[permissions]\nallow = ["Bash(ls *)"]\n')
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        for i in range(30):
            assert (
                c.request(CallInfo("claude", "s", "Bash", {"command": f"ls {i}"}, "/tmp"), timeout=10).decision
                == "allow"
            )
    r = _ctl(h, "audit", "verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "audit chain whole: 30 lines" in r.stdout and "running daemon" in r.stdout
    audit = h.state_dir / "audit.jsonl"
    # the daemon is running and has not checkpointed these lines: only its live head can tell the cut
    audit.write_bytes(b"".join(lines_of(audit)[:-2]))
    r = _ctl(h, "audit", "verify")
    assert r.returncode == 9 and "AUDIT CHAIN BROKEN" in r.stdout and "running daemon has written 30" in r.stdout
    r = _ctl(h, "audit", "verify", "--offline", "--json")
    assert r.returncode == 9  # the files alone show it too: the head record says where the file ends
    assert "lines cut or replaced at the end" in json.loads(r.stdout)["problems"][0]
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        c.request(CallInfo("claude", "s", "Bash", {"command": "ls again"}, "/tmp"), timeout=10)
    r = _ctl(h, "audit", "verify", "--offline", "--json")
    assert r.returncode == 9  # and the next decision written after the cut breaks the chain
    assert "chain broken" in json.loads(r.stdout)["problems"][0]
    r = _ctl(h, "audit", "-n", "1", "--json")  # the plain reader still works
    assert r.returncode == 0 and json.loads(r.stdout)["summary"] == "ls again"


def _listen(tmp_path: Path, name: str):
    import socket

    path = tmp_path / name
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(10)
    return s, path


def _journal_fields(data: bytes) -> dict[str, bytes]:
    """Parse journald's native datagram (both forms), as systemd-journald does."""
    import struct

    out: dict[str, bytes] = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        head = data[i:nl]
        if b"=" in head:
            k, _, v = head.partition(b"=")
            out[k.decode()] = v
            i = nl + 1
        else:
            (n,) = struct.unpack("<Q", data[nl + 1 : nl + 9])
            out[head.decode()] = data[nl + 9 : nl + 9 + n]
            assert data[nl + 9 + n : nl + 10 + n] == b"\n"
            i = nl + 10 + n
    return out


def test_journald_export_sends_every_line_with_its_hash(daemon_factory, tmp_path: Path) -> None:
    sock, path = _listen(tmp_path, "journal.sock")
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(ls *)"]\ndeny = ["Bash(rm *)"]\n',
        args=("--audit-export", f"journald:{path}"),
    )
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        c.request(CallInfo("claude", "s", "Bash", {"command": "ls 'a\nb'"}, "/tmp"), timeout=10)
        c.request(CallInfo("claude", "s", "Bash", {"command": "rm -r x"}, "/tmp"), timeout=10)
    got = [_journal_fields(sock.recv(1 << 16)) for _ in range(2)]
    sock.close()
    disk = lines_of(h.state_dir / "audit.jsonl")
    assert [g["NEXUS_RECORD"] + b"\n" for g in got] == disk  # the very lines on disk
    assert [g["NEXUS_HASH"].decode() for g in got] == [line_hash(x.rstrip(b"\n")) for x in disk]
    assert got[1]["NEXUS_PREV"] == got[0]["NEXUS_HASH"]
    assert [g["NEXUS_DECISION"] for g in got] == [b"allow", b"deny"]
    assert got[1]["PRIORITY"] == b"4" and got[0]["SYSLOG_IDENTIFIER"] == b"nexusd"
    assert b"ls 'a\\u000ab'" in got[0]["MESSAGE"]  # escaped: one journal line cannot pose as two


def test_a_field_with_a_newline_uses_the_binary_form() -> None:
    from nexusd.daemon.auditexport import encode_journal

    data = encode_journal({"A": b"x", "B": b"two\nlines"})
    assert data == b"A=x\nB\n" + (9).to_bytes(8, "little") + b"two\nlines\n"
    assert _journal_fields(data) == {"A": b"x", "B": b"two\nlines"}


def test_syslog_export_is_rfc5424(daemon_factory, tmp_path: Path) -> None:
    import re

    sock, path = _listen(tmp_path, "log.sock")
    h = daemon_factory(policy='[permissions]\nallow = ["Bash(ls *)"]\n', args=("--audit-export", f"syslog:{path}"))
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        c.request(CallInfo("claude", "s", "Bash", {"command": "ls"}, "/tmp"), timeout=10)
    data = sock.recv(1 << 16)
    sock.close()
    m = re.match(
        rb"<86>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \S+ nexusd \d+ decision "
        rb'\[nexusd@32473 id="[0-9a-f]+" decision="allow" hash="([0-9a-f]{64})" prev="0{64}"\] '
        rb"\xef\xbb\xbf(.*)$",
        data,
        re.S,
    )
    assert m, data
    assert m.group(2) + b"\n" == lines_of(h.state_dir / "audit.jsonl")[0]
    assert m.group(1).decode() == line_hash(m.group(2))


def test_an_export_nobody_listens_to_does_not_stop_decisions(daemon_factory, tmp_path: Path) -> None:
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(ls *)"]\n',
        args=("--audit-export", f"journald:{tmp_path / 'nobody.sock'}"),
    )
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        for _ in range(3):
            assert c.request(CallInfo("claude", "s", "Bash", {"command": "ls"}, "/tmp"), timeout=10).decision == "allow"
    assert _ctl(h, "audit", "verify").returncode == 0
    assert "audit export failing" in h.log.read_text()


def test_a_bad_export_spec_is_a_usage_error() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "nexusd.cli.daemon_main", "--audit-export", "kafka"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "--audit-export" in r.stderr
