"""The daemon's own state goes bad (issue "Fail closed when the daemon's own state is bad"), over the wire.

- a restart over an unreadable policy keeps its deny rules (last good copy), or locks;
- a full disk under the audit log (``/dev/full``: the kernel's own ENOSPC) is shown as an audit error with a
  count of unrecorded decisions, logged once at the failure and once at the recovery, and with
  ``[audit] on_failure = "deny"`` nothing is allowed while it lasts;
- ``nexusctl status`` exits 8 while the daemon is degraded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from nexusd.client import Client
from nexusd.protocol import CallInfo
from tests.conftest import DaemonHandle

RM = CallInfo("claude", "s-fc", "Bash", {"command": "rm -rf build"}, "/tmp", mode="bypassPermissions")
LS = CallInfo("claude", "s-fc", "Bash", {"command": "ls"}, "/tmp", mode="bypassPermissions")


def decide(h: DaemonHandle, call: CallInfo) -> tuple[str, str]:
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        d = c.request(call, timeout=10)
        return d.decision, d.reason


def status(h: DaemonHandle) -> tuple[int, dict]:
    r = subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "status", "--json"],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.returncode, json.loads(r.stdout)


def test_restart_over_a_garbage_policy_keeps_its_deny_rules(daemon_factory: Callable[..., DaemonHandle]) -> None:
    """The issue's own reproduction: deny Bash(rm:*), a bypass-mode agent, a restart over garbage."""
    h = daemon_factory(policy='[permissions]\ndeny = ["Bash(rm:*)"]\n')
    assert decide(h, RM)[0] == "deny"
    h.write_policy("this is not toml [[[")
    h.restart()
    decision, reason = decide(h, RM)
    assert decision == "deny" and "rm" in reason
    code, st = status(h)
    assert code == 0 and st.get("locked") is None
    assert any("USING THE LAST GOOD COPY" in e for e in st["policy_errors"])
    user = [s for s in st["policy"] if s["layer"] == "user"]
    assert len(user) == 1 and user[0]["last_good"] is True and user[0]["loaded"] is False
    r = subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "status"],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    # says both: the file is broken AND its last good rules are what is enforced (not a bare "NOT loaded")
    assert "BROKEN, its last good version is enforced" in r.stdout and "NOT loaded" not in r.stdout


def test_no_last_good_copy_locks_and_status_says_so(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory(policy="this is not toml [[[")
    decision, reason = decide(h, LS)
    assert decision == "deny" and "locked" in reason  # asked, and no UI is connected: denied, saying why
    code, st = status(h)
    assert code == 8 and "no last good copy" in st["locked"]
    r = subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "status"],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 8 and r.stdout.startswith("LOCKED:")
    h.write_policy('[permissions]\nallow = ["Bash(ls)"]\n')  # fixed: the watcher reloads, the lock lifts
    deadline = time.monotonic() + 15
    while status(h)[0] != 0:
        assert time.monotonic() < deadline, "the lock never lifted"
        time.sleep(0.2)
    assert decide(h, LS)[0] == "allow"


def _full_disk(h: DaemonHandle) -> None:
    audit = h.state_dir / "audit.jsonl"
    audit.unlink(missing_ok=True)
    os.symlink("/dev/full", audit)


def _until_status(h: DaemonHandle, cond: Callable[[dict], bool], what: str) -> dict:
    deadline = time.monotonic() + 15
    while True:
        st = status(h)[1]
        if cond(st):
            return st
        assert time.monotonic() < deadline, f"never {what}: {st}"
        time.sleep(0.1)


def test_a_full_disk_is_an_audit_error_and_decisions_go_on(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory(policy='[permissions]\nallow = ["Bash(ls)"]\n', autostart=False)
    _full_disk(h)
    h.start()
    for _ in range(3):
        assert decide(h, LS)[0] == "allow"  # on_failure = "continue" (the default)
    st = _until_status(h, lambda s: s.get("audit_unrecorded", 0) >= 3, "counted")
    assert "No space left" in st["audit_error"] and not any("audit" in e for e in st["policy_errors"])
    assert status(h)[0] == 8
    (h.state_dir / "audit.jsonl").unlink()  # space is back
    decide(h, LS)
    st = _until_status(h, lambda s: s.get("audit_error") is None, "recovered")
    assert st["audit_unrecorded"] >= 3 and status(h)[0] == 0
    log = h.log.read_text()
    assert log.count("audit log cannot be written") == 1 and log.count("audit log writable again") == 1
    records = [json.loads(x) for x in (h.state_dir / "audit.jsonl").read_text().splitlines()]
    assert records and records[-1]["tool"] == "Bash"


def test_on_failure_deny_refuses_what_cannot_be_recorded(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory(policy='[permissions]\nallow = ["Bash(ls)"]\n[audit]\non_failure = "deny"\n', autostart=False)
    _full_disk(h)
    h.start()
    decide(h, LS)  # the first decision meets the full disk
    _until_status(h, lambda s: s.get("audit_error") is not None, "failing")
    decision, reason = decide(h, LS)
    assert decision == "deny" and 'on_failure = "deny"' in reason
    (h.state_dir / "audit.jsonl").unlink()
    decide(h, LS)  # recorded now: the failure is over
    _until_status(h, lambda s: s.get("audit_error") is None, "recovered")
    assert decide(h, LS)[0] == "allow"


def test_a_ui_that_never_reads_is_dropped_and_its_asks_stay_pending(daemon_factory) -> None:
    """Thousands of asks, one subscribed UI that stopped reading: its unread output is bounded, then it is
    dropped; another UI goes on receiving and answering; every ask stays pending; memory stays flat."""
    import socket as _socket

    import psutil

    from nexusd import protocol as p
    from tests.daemon.conftest import CALL_BASH, Raw

    h = daemon_factory(args=("--max-ui-output", str(256 << 10)), pending_timeout=60)
    rss0 = psutil.Process(h.proc.pid).memory_info().rss
    stuck = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    stuck.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, 4096)
    stuck.connect(str(h.socket))
    stuck.sendall(b'{"type":"hello","proto":1,"role":"ui","name":"stuck"}\n{"type":"subscribe"}\n')
    ui = Raw(h.socket)
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    agents = [Raw(h.socket) for _ in range(10)]
    for a in agents:
        a.hello()
    import threading

    n = 600
    got: list[int] = []

    def read() -> None:  # the healthy UI reads as it should, while the asks pour in
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            if isinstance(ui.recv(), p.Prompt):
                got.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(n):
        call = {**CALL_BASH, "input": {"command": f"npm install pkg-{i} " + "x" * 600}}
        agents[i % len(agents)].send({"type": "request", "call": call, "ref": str(i)})
    reader.join(70)
    assert len(got) == n  # the reading UI got every ask
    deadline = time.monotonic() + 15  # over the limit and reading nothing for UI_STALL_SECONDS: dropped
    while True:
        with Client(socket_path=str(h.socket), role="admin", name="t") as c:
            st = c.status()
        if st.connections.get("ui") == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert st.pending == n  # the dropped UI's asks stay pending for the others
    assert st.connections.get("ui") == 1  # the stuck UI is gone
    assert "client stopped reading its messages; dropping it" in h.log.read_text()
    assert psutil.Process(h.proc.pid).memory_info().rss - rss0 < 64 << 20
    with Client(socket_path=str(h.socket), role="ui", name="t2") as c:  # answering still works
        snap = c.subscribe()
        assert c.answer(snap.items[0].id, "deny").detail
    stuck.close()
    for a in agents:
        a.close()


def test_descriptor_exhaustion_recovers_when_the_connections_close(daemon_factory) -> None:
    """nexusd under a hard limit of 256 descriptors, 300 connections at once: it stays up, and serves again
    as soon as they close."""
    import socket as _socket

    h = daemon_factory(autostart=False)
    h.start(nofile=256)
    held: list[_socket.socket] = []
    for _ in range(300):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(str(h.socket))
        except OSError:
            s.close()
            continue
        held.append(s)
    time.sleep(0.5)
    assert h.proc.poll() is None  # still running
    for s in held:
        s.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            assert decide(h, LS)[0] in ("allow", "deny")
            break
        except Exception:
            assert time.monotonic() < deadline, "never served again"
            time.sleep(0.2)
    assert h.proc.poll() is None


def test_killed_right_after_learning_a_rule_restarts_consistent(daemon_factory) -> None:
    """An "always" answer, then SIGKILL at once: the restart finds learned.toml whole (old or new), loads it
    without error, and the rule either applies or was never acknowledged."""
    import signal as _signal

    from nexusd import protocol as p

    h = daemon_factory()
    acked = 0
    for i in range(5):
        with Client(socket_path=str(h.socket), role="admin", name="t") as c:
            c.call(p.RuleChange(action="add", kind="deny", rule=f"Bash(curl evil-{i}.io)"))
            acked = i + 1
        if i == 4:
            h.proc.send_signal(_signal.SIGKILL)
            h.proc.wait(10)
    h.start()
    code, st = status(h)
    assert code == 0 and not st["policy_errors"]
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        rules = {r.rule for r in c.call(p.Rules()).rules}
    assert {f"Bash(curl evil-{i}.io)" for i in range(acked)} <= rules
