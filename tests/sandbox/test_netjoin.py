"""The joiner: a filtered sandbox's proxy ports made from outside, on the sandbox's own loopback.

Real bubblewrap (``--unshare-user --unshare-net``, reporting on ``--info-fd`` and held on ``--block-fd``
as a filtered plan's is), the real joiner process, real sockets. The daemon's side around it (the FIFOs,
the proxy accepting) is tested through ``nexusctl run`` and the agent's wrapper in test_network.py.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.sandbox import netjoin

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

PORT = 3128
CLIENT = (
    "import socket,sys\n"
    "s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
    "s.sendall(b'hello from inside'); print(s.recv(100).decode())\n"
)


class Sandbox:
    """A bubblewrap with its own user and network namespaces that reports on ``info_r`` and waits for a
    byte on ``go_w`` before its command, as a filtered plan's does."""

    proc: subprocess.Popen[str]
    info_r: int
    go_w: int

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        for fd in (self.info_r, self.go_w):
            os.close(fd)


def _sandbox(argv_: list[str]) -> Sandbox:
    """bubblewrap with its info and block descriptors at the numbers its words name, as the wrapper runs it."""
    words = netjoin.bwrap_words()
    info_r, info_w = os.pipe()
    go_r, go_w = os.pipe()
    argv = ["bwrap", "--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc", *words, "--", *argv_]

    def place() -> None:  # in the child: the pipes at the numbers the words name (dup2 makes them inheritable)
        os.dup2(info_w, netjoin.INFO_FD)
        os.dup2(go_r, netjoin.GO_FD)

    fds = (netjoin.INFO_FD, netjoin.GO_FD)
    proc = subprocess.Popen(
        argv, preexec_fn=place, pass_fds=fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    os.close(info_w)
    os.close(go_r)
    box = Sandbox()
    box.proc, box.info_r, box.go_w = proc, info_r, go_w
    return box


@pytest.fixture
def joiner() -> Iterator[netjoin.Joiner]:
    j = netjoin.Joiner()
    j.start()
    yield j
    j.close()


def _report(text: bytes) -> int:
    """A pipe's read end holding ``text``, as if a process had reported it (and closed)."""
    r, w = os.pipe()
    os.write(w, text)
    os.close(w)
    return r


def _ask(joiner: netjoin.Joiner, info: int, ports: list[int], go: int | None = None) -> list[socket.socket]:
    """The joiner's answer to a report on ``info``; ``go`` (a sandbox's): written by the joiner once the
    ports listen, and only then."""
    r, w = os.pipe()
    try:
        answer = joiner.watch(info, go if go is not None else w, ports)
        with answer:
            ready, _, _ = select.select([answer], [], [], 30)
            assert ready, "the joiner never answered"
            pidfd, listeners = netjoin.read_answer(answer)
        os.close(pidfd)
        assert select.select([r], [], [], 0)[0] == ([r] if go is None else [])
        return listeners
    finally:
        os.close(r)
        os.close(w)


def test_the_ports_are_made_inside_and_the_command_reaches_them(joiner: netjoin.Joiner) -> None:
    box = _sandbox([sys.executable, "-I", "-S", "-c", CLIENT, str(PORT)])
    try:
        listeners = _ask(joiner, box.info_r, [PORT, PORT + 1], box.go_w)
        assert [s.getsockname()[:2] for s in listeners if s.family == socket.AF_INET] == [
            ("127.0.0.1", PORT),
            ("127.0.0.1", PORT + 1),
        ]
        host = socket.socket()
        assert host.connect_ex(("127.0.0.1", PORT)) != 0 or host.getpeername()[1] != PORT  # not the host's
        host.close()
        first = listeners[0]
        first.setblocking(True)
        first.settimeout(30)
        conn, _ = first.accept()
        with conn:
            assert conn.recv(100) == b"hello from inside"
            conn.sendall(b"hello from the daemon")
        out, err = box.proc.communicate(timeout=60)
        assert box.proc.returncode == 0 and out.strip() == "hello from the daemon", err
        for s in listeners:
            s.close()
    finally:
        box.close()


def test_without_ports_the_command_finds_nothing_listening() -> None:
    """The go byte without a joiner's answer: the command runs, with no network at all."""
    box = _sandbox([sys.executable, "-I", "-S", "-c", CLIENT, str(PORT)])
    try:
        os.write(box.go_w, b"x")
        _out, err = box.proc.communicate(timeout=60)
        assert box.proc.returncode != 0 and "Connection refused" in err
    finally:
        box.close()


def test_the_daemons_own_network_is_never_listened_in(joiner: netjoin.Joiner) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(OSError, match="network namespace of its own"):
            _ask(joiner, _report(json.dumps({"child-pid": sleeper.pid}).encode()), [PORT])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_that_ended_lends_no_namespace(joiner: netjoin.Joiner) -> None:
    """A pid is only looked up while the process it named lives (a pidfd): never a reused pid's."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(OSError, match="gone"):
        _ask(joiner, _report(json.dumps({"child-pid": gone.pid}).encode()), [PORT])


@pytest.mark.parametrize(
    "report",
    [b"", b"nope", b'{"child-pid": "12"}', b'{"child-pid": 0}', b'{"child-pid": false}', b"[]", b"{" * 5000],
)
def test_a_report_that_is_not_bubblewraps_gets_no_ports(joiner: netjoin.Joiner, report: bytes) -> None:
    with pytest.raises(OSError, match="no report"):
        _ask(joiner, _report(report), [PORT])


@pytest.mark.parametrize("request_", [b" ", b"x", b"0", b"70000", b"-5", b"\xff\xfe", b"80 x"])
def test_malformed_requests_get_a_reason_and_the_joiner_goes_on(joiner: netjoin.Joiner, request_: bytes) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    info, go = _report(b'{"child-pid": 1}'), os.pipe()
    try:
        socket.send_fds(joiner._running(), [request_], [info, go[1], theirs.fileno()])
        theirs.close()
        os.close(go[1])
        ready, _, _ = select.select([ours], [], [], 30)
        assert ready
        with pytest.raises(OSError, match="malformed"):
            netjoin.read_answer(ours)
        assert os.read(go[0], 1) == b""  # nothing started: no go byte
    finally:
        ours.close()
        os.close(info)
        os.close(go[0])
    test_the_daemons_own_network_is_never_listened_in(joiner)  # still serving


def test_a_report_that_never_comes_is_dropped_after_its_time() -> None:
    """A sandbox never run: its watch ends after ``WATCH_TTL`` (here made short) and the daemon's answer
    socket ends with it; the joiner holds nothing of it any more."""
    source = Path(netjoin.__file__ or "").read_text().replace("WATCH_TTL = 125.0", "WATCH_TTL = 0.5")
    assert "WATCH_TTL = 0.5" in source
    short = netjoin.Joiner([sys.executable, "-I", "-S", "-c", source])
    r, w = os.pipe()  # a writer stays: end of file never comes
    go = os.pipe()
    try:
        answer = short.watch(r, go[1], [PORT])
        with answer:
            ready, _, _ = select.select([answer], [], [], 30)
            assert ready
            with pytest.raises(OSError, match="no report"):
                netjoin.read_answer(answer)
    finally:
        short.close()
        for fd in (r, w, *go):
            os.close(fd)


def test_a_killed_joiner_is_started_again(joiner: netjoin.Joiner) -> None:
    assert joiner._proc is not None
    joiner._proc.kill()
    joiner._proc.wait()
    test_the_daemons_own_network_is_never_listened_in(joiner)


def test_the_words_are_found_only_as_our_own() -> None:
    words = netjoin.bwrap_words()
    assert netjoin.words_at(["bwrap", "--x", *words, "--", "sh", "-c", "true"]) == 2
    assert netjoin.words_at(["bwrap", "--", "sh", "-c", " ".join(words)]) is None
    assert netjoin.words_at(["bwrap", "--", "sh", "-c", "true"]) is None


def test_a_fork_holds_no_other_sandboxs_descriptors(joiner: netjoin.Joiner) -> None:
    """B waits for its report while A is served, and the joiner forks its next child then; when B's
    report never comes (end of file), the daemon must see B's answer socket end at once: a fork holding a
    copy of it (or of B's go FIFO) would keep it open for as long as the fork lives."""
    b_info, b_writer = os.pipe()
    b_go = os.pipe()
    b_answer = joiner.watch(b_info, b_go[1], [PORT])
    os.close(b_info)
    os.close(b_go[1])
    box = _sandbox(["true"])
    try:
        for s in _ask(joiner, box.info_r, [PORT], box.go_w):  # A served; the next fork is made after it
            s.close()
        box.proc.communicate(timeout=60)
        os.close(b_writer)  # B's report never comes
        with b_answer:
            ready, _, _ = select.select([b_answer], [], [], 10)
            assert ready, "B's answer socket stayed open"
            with pytest.raises(OSError, match="no report"):
                netjoin.read_answer(b_answer)
        ready, _, _ = select.select([b_go[0]], [], [], 10)
        assert ready and os.read(b_go[0], 1) == b""  # and nobody holds B's go FIFO
    finally:
        box.close()
        os.close(b_go[0])
