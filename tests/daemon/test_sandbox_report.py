"""Sandbox violations are visible: a runner's report becomes an audit record and a notice to every UI."""

from __future__ import annotations

import pytest

from nexusd import protocol as p
from nexusd.sandbox.violations import StderrTap, planted, scan


def test_refusals_in_error_output_are_found_each_once() -> None:
    err = (
        b"touch: cannot touch '/home/u/.bashrc': Read-only file system\n"
        b"ok line\n"
        b"PermissionError: [Errno 1] Operation not permitted (connect to /run/docker.sock)\n"
        b"cat: /home/u/.ssh/id_rsa: Permission denied\n"
        b"touch: cannot touch '/home/u/.bashrc': Read-only file system\n"
    )
    found = scan(err)
    assert len(found) == 3
    assert found[0].startswith("write refused (read-only): touch")
    assert found[1].startswith("socket refused")
    assert found[2].startswith("access refused")
    assert scan(b"all good\n") == []
    assert len(scan(b"".join(b"f%d: Permission denied\n" % i for i in range(100)))) == 20


def test_the_tap_keeps_a_bounded_tail() -> None:
    tap = StderrTap()
    for _ in range(100):
        tap.feed(b"x" * 4096)
    tap.feed(b"\ncp: cannot create regular file 'a': Read-only file system\n")
    assert len(tap.buf) <= StderrTap.LIMIT and tap.violations()
    assert planted([".git/hooks/x"], ["y"]) == ["planted .git/hooks/x (removed)", "planted y (could NOT be removed)"]


def test_a_report_is_recorded_and_shown_to_every_ui(daemon, raw_factory) -> None:  # type: ignore[no-untyped-def]
    ui = raw_factory(daemon.socket, role="ui", name="tui-sb")
    ui.ask({"type": "subscribe"})
    runner = raw_factory(daemon.socket, name="nexus-sandbox")
    ack = runner.ask(
        {
            "type": "sandbox_report",
            "command": "touch ~/.bashrc",
            "cwd": "/w",
            "session": "s9",
            "violations": ["write refused (read-only): touch: ~/.bashrc: Read-only file system"],
            "exit_code": 1,
            "ref": "r",
        }
    )
    assert isinstance(ack, p.Ack) and ack.detail == "1 recorded"
    notice = ui.recv()
    assert isinstance(notice, p.SandboxNotice) and notice.session == "s9" and "Read-only" in notice.violations[0]
    audit = ui.ask({"type": "audit", "session": "s9"})
    (rec,) = [r for r in audit.records if r.event == "sandbox_violation"]
    assert rec.decision == "deny" and "refused 1 operation" in rec.reason and "exit 1" in rec.reason
    assert rec.summary.startswith("touch")


def test_reports_are_bounded(daemon, raw_factory) -> None:  # type: ignore[no-untyped-def]
    ui = raw_factory(daemon.socket, role="ui")
    ui.ask({"type": "subscribe"})
    runner = raw_factory(daemon.socket)
    runner.ask({"type": "sandbox_report", "command": "x" * 5000, "cwd": "/w", "violations": ["v" * 5000] * 100})
    notice = ui.recv()
    assert len(notice.violations) == 20 and all(len(v) == 1000 for v in notice.violations)
    assert len(notice.command) == 1000
    empty = runner.ask({"type": "sandbox_report", "command": "x", "cwd": "/w", "violations": []})
    assert isinstance(empty, p.Ack) and empty.detail == "nothing to record"


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "sandbox_report", "command": "x", "cwd": "/w"},
        {"type": "sandbox_report", "command": 1, "cwd": "/w", "violations": []},
        {"type": "sandbox_report", "command": "x", "cwd": "/w", "violations": "v"},
        {"type": "sandbox_report", "command": "x", "cwd": "/w", "violations": [1]},
        {"type": "sandbox_report", "command": "x", "cwd": "/w", "violations": [], "extra": 1},
    ],
)
def test_malformed_reports_are_refused(daemon, raw_factory, bad) -> None:  # type: ignore[no-untyped-def]
    runner = raw_factory(daemon.socket)
    err = runner.ask(bad)
    assert isinstance(err, p.Error) and err.code == "invalid_message"
