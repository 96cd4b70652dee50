"""Hostile same-user clients against the real daemon: garbage, stalls, malformed hellos, a full disk.

- a burst of garbage connections writes a bounded number of log lines, whose counts still add up;
- a connection idle after hello, or stalled in the middle of a line, is closed with a ``timeout`` error;
  a request waiting for a person is not idleness, and a UI that pings (the client library does) stays;
- every malformed first line gets ``protocol_version`` and the connection is closed, as documented;
- a rule write that cannot be persisted (ENOSPC from a real, full tmpfs) is ``refused``, never ``internal``.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import anyio
import pytest

from nexusd import protocol as p
from nexusd.client import AsyncClient, Client, ClientError, ReplyTimeout
from tests.conftest import DaemonHandle
from tests.daemon.conftest import CALL_BASH, Raw

# ---------------------------------------------------------------------------- logs stay bounded

GARBAGE_CLIENT = r"""
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.sendall(b"\xff\xfe not utf-8 at all\n")  # a framing error: logged (rate-limited) and closed
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
"""


def _log_lines(h: DaemonHandle, since: int) -> list[dict]:
    data = h.log.read_bytes()[since:]
    return [json.loads(x) for x in data.decode().splitlines() if x.startswith("{")]


@pytest.mark.slow
def test_a_garbage_burst_writes_a_bounded_number_of_log_lines(daemon_factory: Callable[..., DaemonHandle]) -> None:
    """2,000 garbage connections from 50 processes (50 clients, more than the 20 lines a window may log
    one by one): a few dozen lines, not 2,000; and the counts in them add up to every fault."""
    interval = 3.0
    h = daemon_factory(args=("--log-level", "info", "--client-log-interval", str(interval)))
    time.sleep(0.3)
    start = h.log.stat().st_size
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", GARBAGE_CLIENT, str(h.socket), "40"]) for _ in range(50)]
    for pr in procs:
        assert pr.wait(120) == 0
    elapsed = time.monotonic() - t0
    time.sleep(interval * 2 + 1)  # the window ends: the counted faults are written
    lines = _log_lines(h, start)
    windows = int((elapsed + interval * 2 + 1) / interval) + 2
    assert len(lines) <= windows * 41, (len(lines), windows)
    assert len(lines) < 400  # against the 2,000 of one line per fault
    first = [x for x in lines if x["event"] == "framing error; closing"]
    repeated = [x for x in lines if x["event"] == "framing error; closing (repeated)"]
    summary = [x for x in lines if x["event"].startswith("client faults not logged one by one")]
    assert first and repeated and summary
    assert len(first) + sum(x["count"] for x in repeated) + sum(x["faults"] for x in summary) == 2000
    assert all(len(json.dumps(x)) < 1000 for x in lines)
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        assert c.status().pending == 0  # still serving


def test_client_text_in_the_log_is_cut_short(daemon_factory: Callable[..., DaemonHandle]) -> None:
    """A 500 KB unknown type name is echoed in the error reply, but the log line keeps 200 characters."""
    h = daemon_factory(args=("--log-level", "info"))
    r = Raw(h.socket)
    r.hello()
    r.send_bytes(b'{"type":"' + b"z" * 500_000 + b'"}\n')
    assert isinstance(err := r.recv(), p.Error) and err.code == "unknown_type"
    r.close()
    time.sleep(0.3)
    line = next(x for x in h.log.read_text().splitlines() if "protocol error" in x)
    assert len(line) < 1000


# ---------------------------------------------------------------------------- idle and slow lines


@pytest.fixture
def strict(daemon_factory: Callable[..., DaemonHandle]) -> DaemonHandle:
    return daemon_factory(args=("--idle-timeout", "1", "--line-timeout", "1"), pending_timeout=4)


def _closed_with_timeout(r: Raw, within: float = 5.0) -> str:
    r.sock.settimeout(within)
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "timeout", msg
    assert r.closed()
    return msg.message


def test_an_idle_agent_is_closed_and_says_why(strict: DaemonHandle) -> None:
    assert Raw(strict.socket).hello("ui").idle_timeout == 1.0  # a UI learns how often to ping
    r = Raw(strict.socket)
    assert r.hello().idle_timeout is None  # an agent never needs to (the hooks' lean wire knows no ping)
    t = time.monotonic()
    assert "idle for 1 s" in _closed_with_timeout(r)
    assert time.monotonic() - t >= 0.9


@pytest.mark.slow
def test_an_agent_waiting_for_a_person_is_not_idle(strict: DaemonHandle) -> None:
    """Its request waits 4 s (nobody answers) with idle 1 s: the decision arrives, then idleness counts."""
    ui = Raw(strict.socket)
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    agent = Raw(strict.socket)
    agent.hello()
    agent.sock.settimeout(10)
    assert isinstance(agent.ask({"type": "request", "call": CALL_BASH, "ref": "r"}), p.Pending)
    d = agent.recv()
    assert isinstance(d, p.Decision) and d.source == "timeout"  # the request's own deadline, not the idle limit
    assert "idle" in _closed_with_timeout(agent)
    ui.close()


@pytest.mark.parametrize(
    "drip",
    [
        [b'{"type":"status"'],  # half a line, then silence
        [b"{", b'"', b"t", b"y", b"p", b"e", b'"', b":", b'"'],  # a byte every 0.3 s: busy, but never a line
    ],
)
def test_a_line_never_finished_closes_the_connection(strict: DaemonHandle, drip: list[bytes]) -> None:
    r = Raw(strict.socket)
    r.hello()
    for chunk in drip:
        try:
            r.send_bytes(chunk)
        except OSError:
            break  # closed already
        time.sleep(0.3)
    assert "not finished within 1 s" in _closed_with_timeout(r)


def test_a_slow_line_before_hello_is_closed_too(strict: DaemonHandle) -> None:
    r = Raw(strict.socket)
    r.send_bytes(b'{"type":"hel')
    r.sock.settimeout(5)
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "timeout"


def test_a_quiet_raw_ui_is_closed_but_one_that_pings_stays(strict: DaemonHandle) -> None:
    quiet, pinging = Raw(strict.socket), Raw(strict.socket)
    for r in (quiet, pinging):
        r.hello("ui")
        r.ask({"type": "subscribe"})
    for i in range(8):  # 2.4 s, over twice the idle limit
        assert isinstance(pinging.ask({"type": "ping", "ref": str(i)}), p.Pong)
        time.sleep(0.3)
    assert "idle" in _closed_with_timeout(quiet, 0.5)
    assert isinstance(pinging.ask({"type": "status", "ref": "s"}), p.StatusReply)


@pytest.mark.slow
def test_the_client_libraries_keep_a_waiting_ui_connected(strict: DaemonHandle) -> None:
    """The blocking Client waiting in next_event, and the AsyncClient waiting on its stream, both ping."""
    with Client(socket_path=str(strict.socket), role="ui", name="blocking") as c:
        c.subscribe()
        with pytest.raises(ReplyTimeout):
            c.next_event(timeout=2.5)
        assert c.status().pending == 0

    async def run() -> None:
        async with AsyncClient(socket_path=str(strict.socket), role="ui", name="async") as c:
            await anyio.sleep(2.5)
            assert (await c.status()).pending == 0

    anyio.run(run)


# ---------------------------------------------------------------------------- malformed hello

BAD_HELLOS = {
    "proto as a string": b'{"type":"hello","proto":"1","role":"agent","name":"x"}',
    "proto as a float": b'{"type":"hello","proto":1.0,"role":"agent","name":"x"}',
    "proto as a bool": b'{"type":"hello","proto":true,"role":"agent","name":"x"}',
    "role as a number": b'{"type":"hello","proto":1,"role":5,"name":"x"}',
    "name as null": b'{"type":"hello","proto":1,"role":"agent","name":null}',
    "name as a list": b'{"type":"hello","proto":1,"role":"agent","name":["x"]}',
    "ref as a number": b'{"type":"hello","proto":1,"role":"agent","name":"x","ref":7}',
    "no name": b'{"type":"hello","proto":1,"role":"agent"}',
    "no role": b'{"type":"hello","proto":1,"name":"x"}',
    "no proto": b'{"type":"hello","role":"agent","name":"x"}',
    "unknown role": b'{"type":"hello","proto":1,"role":"root","name":"x"}',
    "role in capitals": b'{"type":"hello","proto":1,"role":"UI","name":"x"}',
    "extra field": b'{"type":"hello","proto":1,"role":"agent","name":"x","admin":true}',
    "trailing garbage": b'{"type":"hello","proto":1,"role":"agent","name":"x"} garbage',
    "two objects": b'{"type":"hello","proto":1,"role":"agent","name":"x"}{"type":"status"}',
    "not json": b"hello nexusd",
    "a json list": b'[{"type":"hello","proto":1,"role":"agent","name":"x"}]',
    "a json string": b'"hello"',
    "no type": b'{"proto":1,"role":"agent","name":"x"}',
    "type as a number": b'{"type":1,"proto":1,"role":"agent","name":"x"}',
    "unknown type": b'{"type":"helo","proto":1,"role":"agent","name":"x"}',
    "wrong version": b'{"type":"hello","proto":2,"role":"agent","name":"x"}',
}


@pytest.mark.parametrize("line", list(BAD_HELLOS.values()), ids=list(BAD_HELLOS))
def test_a_malformed_hello_gets_protocol_version_and_is_closed(daemon: DaemonHandle, line: bytes) -> None:
    r = Raw(daemon.socket)
    r.send_bytes(line + b"\n")
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "protocol_version", msg
    assert r.closed()
    r.close()


def test_a_malformed_hello_keeps_its_ref_when_readable(daemon: DaemonHandle) -> None:
    r = Raw(daemon.socket)
    r.send_bytes(b'{"type":"hello","proto":"1","role":"agent","name":"x","ref":"h1"}\n')
    msg = r.recv()
    assert isinstance(msg, p.Error) and msg.code == "protocol_version" and msg.ref == "h1"


# ---------------------------------------------------------------------------- a full disk


@pytest.fixture
def full_state_dir(daemon_factory: Callable[..., DaemonHandle]) -> Iterator[tuple[DaemonHandle, str]]:
    """The daemon's state directory on a real 256 KiB tmpfs, filled up after start: writes get ENOSPC from
    the kernel (no mock). Mounting needs root; elsewhere the test is skipped."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    h = daemon_factory(autostart=False)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(h.state_dir)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        h.start()
        filler = h.state_dir / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield h, str(filler)
    finally:
        h.stop()
        subprocess.run(["umount", "-l", str(h.state_dir)], check=False)


def test_a_rule_write_on_a_full_disk_is_refused_not_internal(full_state_dir: tuple[DaemonHandle, str]) -> None:
    h, filler = full_state_dir
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        for msg in (
            p.RuleChange(action="add", kind="deny", rule="Bash(curl evil.io)"),
            p.TrustChange(action="add", path="/tmp"),
        ):
            with pytest.raises(ClientError) as e:
                c.call(msg)
            assert e.value.code == "refused" and "No space left" in str(e.value), e.value
        assert "Bash(curl evil.io)" not in {r.rule for r in c.call(p.Rules()).rules}
        assert (
            "could not be saved" in "".join(x for x in h.log.read_text().splitlines() if "not saved" in x)
            or "policy change not saved" in h.log.read_text()
        )
        os.unlink(filler)  # space again: the same write goes through
        assert c.call(p.RuleChange(action="add", kind="deny", rule="Bash(curl evil.io)")).detail
        assert "Bash(curl evil.io)" in {r.rule for r in c.call(p.Rules()).rules}


def test_an_always_answer_on_a_full_disk_is_refused_and_stays_pending(
    full_state_dir: tuple[DaemonHandle, str],
) -> None:
    h, _ = full_state_dir
    ui = Raw(h.socket)
    ui.hello("ui", "person")
    ui.ask({"type": "subscribe"})
    agent = Raw(h.socket)
    agent.hello()
    pending = agent.ask({"type": "request", "call": CALL_BASH, "ref": "r"})
    assert isinstance(pending, p.Pending)
    assert isinstance(ui.recv(), p.Prompt)
    err = ui.ask(
        {
            "type": "answer",
            "id": pending.id,
            "decision": "deny",
            "scope": "never",
            "rules": ["Bash(npm install left-pad)"],
            "ref": "a",
        }
    )
    assert isinstance(err, p.Error) and err.code == "refused" and "No space left" in err.message, err
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        assert c.status().pending == 1  # still waiting for a person
    ack = ui.ask({"type": "answer", "id": pending.id, "decision": "deny", "ref": "b"})
    while not isinstance(ack, p.Ack):
        ack = ui.recv()
    d = agent.recv()
    assert isinstance(d, p.Decision) and d.decision == "deny" and d.source == "user"


# ---------------------------------------------------------------------------- a UI behind, but reading


@pytest.mark.slow
def test_a_ui_that_reads_slowly_rides_out_a_burst_past_max_ui_output(daemon_factory) -> None:
    """--max-ui-output 256 KiB and 500 asks (~700 KB of prompts, under the 1 MiB hard cap): a UI that reads
    4 KiB every 0.1 s stays over the limit for several stall periods, yet is never dropped while it reads;
    one that reads nothing is dropped once a stall period has passed."""
    import threading

    h = daemon_factory(args=("--max-ui-output", str(256 << 10)), pending_timeout=120)
    slow = Raw(h.socket)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.hello("ui", "slow")
    slow.ask({"type": "subscribe"})
    stuck = Raw(h.socket)
    stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.hello("ui", "stuck")
    stuck.ask({"type": "subscribe"})
    agents = [Raw(h.socket) for _ in range(10)]  # each gets 50 pending replies: under 64 KiB, unread
    for a in agents:
        a.hello()
    n = 500
    prompts: list[int] = []

    def sip() -> None:  # 4 KiB every 0.1 s: about 40 KiB/s, far slower than the burst arrives
        deadline = time.monotonic() + 90
        while len(prompts) < n and time.monotonic() < deadline:
            data = slow.sock.recv(4 << 10)
            if not data:
                return
            slow.buf += data
            *lines, slow.buf = slow.buf.split(b"\n")
            prompts.extend(1 for ln in lines if ln.startswith(b'{"type":"prompt"'))
            time.sleep(0.1)

    reader = threading.Thread(target=sip)
    reader.start()
    for i in range(n):
        call = {**CALL_BASH, "input": {"command": f"npm install pkg-{i} " + "x" * 300}}
        agents[i % 10].send({"type": "request", "call": call, "ref": str(i)})
    reader.join(100)
    assert len(prompts) == n  # the slow UI saw every ask: never dropped
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        st = c.status()
    assert st.pending == n and st.connections.get("ui") == 1  # the stuck one is gone, the slow one stays
    assert "dropping it" in h.log.read_text()


def test_the_client_error_log_writes_at_most_41_lines_a_window_and_counts_every_fault() -> None:
    """The rate limit alone (structlog's capture, no daemon): 500 clients × 20 faults in one window."""
    from structlog.testing import capture_logs

    from nexusd.daemon.connection import ClientErrorLog

    elog = ClientErrorLog(interval=60.0, max_lines=20)
    t0 = elog.window_end - 60.0
    with capture_logs() as logs:
        for i in range(20):
            for c in range(500):
                elog.note(
                    f"client-{c} (pid {c})", "protocol error", {"code": "bad_json", "message": "x" * 5000}, t0 + i
                )
        elog.flush(t0 + 59)  # not yet the end of the window: nothing more
        assert len(logs) == 20
        elog.flush(t0 + 61)
    assert len(logs) == 41
    assert all(len(str(v)) <= 201 for x in logs for v in x.values() if isinstance(v, str))
    repeated = [x for x in logs if x["event"] == "protocol error (repeated)"]
    summary = [x for x in logs if x["event"].startswith("client faults not logged")]
    assert len(repeated) == 20 and len(summary) == 1
    assert 20 + sum(x["count"] for x in repeated) + summary[0]["faults"] == 500 * 20
