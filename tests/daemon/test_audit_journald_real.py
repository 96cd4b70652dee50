"""The audit export against the real systemd-journald, not a stand-in socket.

journald runs in a mount namespace of its own (``unshare --mount``) over tmpfs on /run/systemd, /run/log and
/var/log/journal, so the host's journal is neither read nor written. The daemon reaches the journal's
sockets through ``/proc/<journald>/root/...``; ``journalctl --directory`` reads what journald stored. This
needs root (or CAP_SYS_ADMIN) and systemd-journald installed: otherwise the test is skipped, and the
stand-in tests in test_audit_chain.py still check the datagram's bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.client import Client
from nexusd.daemon.auditchain import line_hash
from nexusd.protocol import CallInfo

JOURNALD = next(
    (p for p in ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald") if os.path.exists(p)), None
)
SETUP = (
    "set -e; for d in /run/systemd /run/log /var/log/journal; do mkdir -p $d; mount -t tmpfs tmpfs $d; done; "
    "mkdir -p /run/systemd/journal; exec {journald}"
)

pytestmark = pytest.mark.skipif(
    JOURNALD is None or shutil.which("unshare") is None or shutil.which("journalctl") is None or os.geteuid() != 0,
    reason="needs root, unshare, journalctl and systemd-journald (a private journal in a mount namespace)",
)


def lines_of(p: Path) -> list[bytes]:
    return p.read_bytes().splitlines(keepends=True)


class Journal:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.root = Path(f"/proc/{proc.pid}/root")
        self.socket = self.root / "run/systemd/journal/socket"
        self.dev_log = self.root / "run/systemd/journal/dev-log"

    def entries(self, match: str, want: int, timeout: float = 30.0) -> list[dict[str, object]]:
        """journalctl's JSON for a FIELD=value match, waiting until ``want`` entries are stored."""
        deadline = time.monotonic() + timeout
        while True:
            out = subprocess.run(
                ["journalctl", "--directory", str(self.root / "run/log/journal"), "-o", "json", "--no-pager", match],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout
            got = [json.loads(line) for line in out.splitlines() if line.strip()]
            if len(got) >= want or time.monotonic() > deadline:
                return got
            time.sleep(0.2)


@pytest.fixture
def journal() -> Iterator[Journal]:
    assert JOURNALD is not None
    proc = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", SETUP.format(journald=JOURNALD)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    j = Journal(proc)
    deadline = time.monotonic() + 30
    while not j.socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            err = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
            proc.kill()
            pytest.skip(f"systemd-journald did not start in a mount namespace here: {err.strip()[:300]}")
        time.sleep(0.05)
    yield j
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _decide(h, commands: list[str]) -> None:  # type: ignore[no-untyped-def]
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        for cmd in commands:
            c.request(CallInfo("claude", "s", "Bash", {"command": cmd}, str(h.root)), timeout=20)


def test_journald_stores_every_record_with_its_hash(daemon_factory, journal: Journal) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(ls *)"]\ndeny = ["Bash(rm *)"]\n',
        args=("--audit-export", f"journald:{journal.socket}"),
    )
    _decide(h, ["ls 'a\nb'", "rm -r x"])
    got = journal.entries("SYSLOG_IDENTIFIER=nexusd", 2)
    disk = lines_of(h.state_dir / "audit.jsonl")
    assert len(got) == 2 == len(disk), got
    assert [str(g["NEXUS_RECORD"]) + "\n" for g in got] == [x.decode() for x in disk]  # the very lines on disk
    assert [g["NEXUS_HASH"] for g in got] == [line_hash(x.rstrip(b"\n")) for x in disk]
    assert got[1]["NEXUS_PREV"] == got[0]["NEXUS_HASH"]
    assert [g["NEXUS_DECISION"] for g in got] == ["allow", "deny"]
    assert [g["PRIORITY"] for g in got] == ["6", "4"]
    assert got[0]["_TRANSPORT"] == "journal"
    assert "\n" not in str(got[0]["MESSAGE"])  # one journal line cannot pose as two


def test_syslog_export_reaches_journald_syslog_socket(daemon_factory, journal: Journal) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(ls *)"]\n', args=("--audit-export", f"syslog:{journal.dev_log}")
    )
    _decide(h, ["ls"])
    # journald (252 here) does not parse RFC 5424's header: no SYSLOG_IDENTIFIER, the whole line is MESSAGE,
    # so `journalctl -t nexusd` misses these; docs/PROTOCOL.md says to use the journald export with journald
    got = journal.entries("SYSLOG_FACILITY=10", 1)
    assert len(got) == 1, got
    disk = lines_of(h.state_dir / "audit.jsonl")
    assert got[0]["_TRANSPORT"] == "syslog"
    assert got[0]["PRIORITY"] == "6"
    msg = str(got[0]["MESSAGE"])
    assert disk[0].decode().rstrip("\n") in msg, msg  # the audit line itself is the message
