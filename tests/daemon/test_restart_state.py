"""What a restart keeps (issue 34, item 10): a person's mode override is kept, temporary files a kill -9 left in
the middle of a rule write are removed at the next start. (Asks pending at a crash: test_audit_durable.py.)"""

from __future__ import annotations

import os
import signal
import tempfile

import pytest

from nexusd import protocol as p
from nexusd.client import Client, ClientError
from tests.conftest import DaemonHandle


def _mode_after_a_request(h: DaemonHandle, session: str) -> str:
    with Client(socket_path=str(h.socket), role="agent", name="hook") as c:
        c.request(p.CallInfo("claude", session, "Read", {"file_path": "/tmp/x"}, "/tmp", mode="bypassPermissions"))
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        return c.status().sessions[session]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_persons_mode_override_survives_a_restart(daemon_factory, sig: signal.Signals) -> None:
    h = daemon_factory()
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        c.call(p.SetMode(session="sess-m", mode="plan"))
        c.call(p.SetMode(session="sess-cleared", mode="plan"))
        c.call(p.SetMode(session="sess-cleared", mode=None))
    assert _mode_after_a_request(h, "sess-m") == "plan"  # over the agent's own bypass
    h.stop(sig)
    h.start()
    assert _mode_after_a_request(h, "sess-m") == "plan"
    assert _mode_after_a_request(h, "sess-cleared") == "bypassPermissions"  # cleared stays cleared
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        c.call(p.SetMode(session="sess-m", mode=None))
    h.restart()
    assert _mode_after_a_request(h, "sess-m") == "bypassPermissions"


def test_a_mode_that_cannot_be_saved_is_not_changed(daemon_factory) -> None:
    h = daemon_factory()
    (h.state_dir / "modes.json").mkdir()  # the save fails
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        with pytest.raises(ClientError) as e:
            c.call(p.SetMode(session="sess-f", mode="plan"))
        assert e.value.code == "refused" and "could not be saved" in str(e.value)
        assert "sess-f" not in c.status().sessions


def test_stale_temporary_files_are_removed_at_start(daemon_factory) -> None:
    h = daemon_factory()
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        c.call(p.RuleChange(action="add", kind="deny", rule="Bash(curl evil.io)"))
    learned = (h.state_dir / "learned.toml").read_text()
    h.stop(signal.SIGKILL)
    # what write_atomic leaves when killed between mkstemp and the rename (same names, half written)
    left = []
    for prefix in (".learned.toml.", ".trust.toml.", ".grants.json.", ".audit.jsonl.chain."):
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=h.state_dir)
        with open(fd, "w") as f:
            f.write("[permissions]\ndeny = [")
        left.append(name)
    keep = h.state_dir / "notes.tmp"  # not one of ours: kept
    keep.write_text("x")
    h.start()
    with Client(socket_path=str(h.socket), role="admin", name="person") as c:
        c.status()
    assert not [n for n in left if os.path.exists(n)]
    assert keep.exists() and (h.state_dir / "learned.toml").read_text() == learned
