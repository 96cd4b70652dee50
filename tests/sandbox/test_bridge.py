"""The bridge's relay loop (nexusd/sandbox/bridge.py) in this process, on real sockets: a loopback TCP
connection on one side (the program's), a Unix socket pair on the other (the daemon's), as inside the
sandbox. Bulk bytes go through ``splice`` once a flow is established, or through the scratch buffer when
splicing is off (other systems) or refused; either way every byte arrives, in order, and nothing leaks.
The end-to-end path through bubblewrap and the daemon is in test_network.py."""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import threading
from collections.abc import Iterator

import pytest

from nexusd.sandbox import bridge, bridge_front

MB = 1024 * 1024


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Rig:
    """One ``_Loop`` run in a thread until ``stop``; ``pair()`` is one connection through it."""

    def __init__(self, pipes: bridge._Pipes) -> None:
        self.loop = bridge._Loop(pipes)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.incoming: list[tuple[socket.socket, socket.socket]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                while self.incoming:
                    self.loop.add(*self.incoming.pop())
            for key, mask in self.loop.sel.select(0.01):
                self.loop.event(key.fileobj, mask)  # type: ignore[arg-type]

    def pair(self, rcvbuf: int = 0) -> tuple[socket.socket, socket.socket]:
        """(the program's TCP socket, the daemon's end of the pair)."""
        program = socket.socket()
        if rcvbuf:
            program.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        program.connect(self.listener.getsockname())
        accepted, _ = self.listener.accept()
        ours, theirs = socket.socketpair()
        with self.lock:
            self.incoming.append((accepted, ours))
        return program, theirs

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.listener.close()


@pytest.fixture(params=["splice", "copy"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    if request.param == "splice" and not bridge.SPLICE:
        pytest.skip("no splice on this system")
    r = Rig(bridge._Pipes(enabled=request.param == "splice"))
    yield r
    r.close()


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)


def _drain(sock: socket.socket, out: list[bytes]) -> None:
    h, n = hashlib.sha256(), 0
    while chunk := sock.recv(1 << 18):
        h.update(chunk)
        n += len(chunk)
    out.append(f"{n}:{h.hexdigest()}".encode())


def _exchange(
    program: socket.socket, daemon: socket.socket, up: bytes, down: bytes, read_delay: threading.Event | None = None
) -> tuple[bytes, bytes]:
    """Both directions at once; returns (what the daemon got, what the program got) as length:sha256."""
    got_up: list[bytes] = []
    got_down: list[bytes] = []

    def program_reads() -> None:
        if read_delay is not None:
            read_delay.wait(30)
        _drain(program, got_down)

    threads = [
        threading.Thread(target=_send, args=(program, up)),
        threading.Thread(target=_send, args=(daemon, down)),
        threading.Thread(target=_drain, args=(daemon, got_up)),
        threading.Thread(target=program_reads),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    program.close()
    daemon.close()
    return got_up[0], got_down[0]


def _digest(data: bytes) -> bytes:
    return f"{len(data)}:{hashlib.sha256(data).hexdigest()}".encode()


def test_bulk_both_ways_arrives_whole_and_nothing_leaks(rig: Rig) -> None:
    up, down = os.urandom(9 * MB + 17), os.urandom(24 * MB + 5)
    before = _fds()
    program, daemon = rig.pair()
    assert _exchange(program, daemon, up, down) == (_digest(up), _digest(down))
    rig.close()
    assert not rig.loop.flows and rig.loop.pipes.lent == 0
    if rig.loop.pipes.enabled:
        assert rig.loop.pipes.loans > 0  # the bulk went the spliced way
        assert len(rig.loop.pipes.free) <= bridge.SPARE_PIPES
        for r, w in rig.loop.pipes.free:  # the spares are all that stays open
            os.close(r)
            os.close(w)
    else:
        assert rig.loop.pipes.loans == 0
    assert _fds() <= before


def test_small_answers_never_take_a_pipe(rig: Rig) -> None:
    """A request and its answer (below SPLICE_AFTER) are copied: no pipe for the request path."""
    for _ in range(20):
        program, daemon = rig.pair()
        assert _exchange(program, daemon, b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\nok") == (
            _digest(b"GET / HTTP/1.1\r\n\r\n"),
            _digest(b"HTTP/1.1 200 OK\r\n\r\nok"),
        )
    assert rig.loop.pipes.loans == 0


def test_pipes_are_bounded_and_the_rest_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """More bulk connections at once than pipes (programs that do not read yet, so bytes sit in the pipes):
    at most MAX_PIPES are lent, the other connections copy, every byte arrives."""
    if not bridge.SPLICE:
        pytest.skip("no splice on this system")
    monkeypatch.setattr(bridge, "MAX_PIPES", 2)
    rig = Rig(bridge._Pipes())
    try:
        release = threading.Event()
        results: list[tuple[bytes, bytes]] = []
        # more than the socket buffers hold (the bridge's send buffer is up to 8 MiB), so bytes wait in pipes
        datas = [os.urandom(12 * MB + i) for i in range(5)]
        pairs = [rig.pair(rcvbuf=65536) for _ in datas]
        threads = [
            threading.Thread(target=lambda p=p, d=d: results.append(_exchange(p[0], p[1], b"x", d, release)))
            for p, d in zip(pairs, datas, strict=True)
        ]
        for t in threads:
            t.start()
        peak = 0
        for _ in range(200):  # while the programs do not read, the pipes fill up to the bound
            peak = max(peak, rig.loop.pipes.lent)
            release.wait(0.01)
        release.set()
        for t in threads:
            t.join(60)
        assert peak == 2
        assert sorted(r[1] for r in results) == sorted(_digest(d) for d in datas)
    finally:
        rig.close()
    assert rig.loop.pipes.lent == 0


def test_a_socket_the_kernel_will_not_splice_into_gets_the_bytes_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel refusing to splice out of a pipe into a socket (EINVAL, as on sockets without splice
    support) after bytes are already in the pipe: they are read back and copied, none lost. No real socket
    here refuses, so ``os.splice`` is wrapped to refuse that direction (the only stand-in in this file)."""
    if not bridge.SPLICE:
        pytest.skip("no splice on this system")
    real = os.splice
    pipe_reads: set[int] = set()

    def refusing(src: int, dst: int, count: int, *args: object, **kw: object) -> int:
        if src in pipe_reads:
            raise OSError(errno.EINVAL, "refused for the test")
        return real(src, dst, count, *args, **kw)  # type: ignore[arg-type]

    pipes = bridge._Pipes()
    take = pipes.take

    def take_and_note() -> tuple[int, int] | None:
        pipe = take()
        if pipe is not None:
            pipe_reads.add(pipe[0])
        return pipe

    monkeypatch.setattr(pipes, "take", take_and_note)
    monkeypatch.setattr(bridge.os, "splice", refusing)
    rig = Rig(pipes)
    try:
        program, daemon = rig.pair()
        up, down = os.urandom(3 * MB), os.urandom(5 * MB + 3)
        assert _exchange(program, daemon, up, down) == (_digest(up), _digest(down))
        assert pipes.loans > 0
    finally:
        rig.close()
    assert rig.loop.pipes.lent == 0


@pytest.mark.skipif(not hasattr(socket, "TCP_CONGESTION"), reason="Linux only")
def test_the_loopback_ports_use_reno_not_the_pacing_default() -> None:
    """Connections the bridge accepts send with Reno (inherited from the listener), whatever the system's
    default (BBR here paces every send with timers: a third of a download's CPU on loopback)."""
    listeners = [socket.socket(fileno=s.detach()) for s in bridge_front.listen(0)]
    try:
        v4 = next(s for s in listeners if s.family == socket.AF_INET)
        program = socket.create_connection(v4.getsockname())
        accepted, _ = v4.accept()
        with program, accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") == b"reno"
    finally:
        for s in listeners:
            s.close()


# ---------------------------------------------------------------------- the front's handshake


def _channel(answer: bytes | None) -> tuple[int, socket.socket]:
    """(the bridge's end as a bare descriptor, the broker's end) with ``answer`` sent and then a ``+``."""
    ours, broker = socket.socketpair()
    if answer:
        broker.sendall(answer + b"+")
    return ours.detach(), broker


@pytest.mark.parametrize(
    ("answer", "ok", "why"),
    [
        (b"ok\n", True, ""),
        (b"unknown token\n", False, "the proxy refused the token"),
        (b"ok", False, "the proxy refused the token"),  # no newline: "ok+" is not an answer
        (b"", False, "the proxy did not answer"),  # closed at once
    ],
)
def test_the_front_reads_the_brokers_answer_and_nothing_more(answer, ok, why, capfd) -> None:
    fd, broker = _channel(answer)
    if answer in (b"ok", b""):
        broker.shutdown(socket.SHUT_WR)
    try:
        assert bridge_front.handshake(fd) is ok
        err = capfd.readouterr().err
        assert (why in err and "no network" in err) if not ok else err == ""
        if ok:  # the relay's first reply is still there for it
            assert os.read(fd, 1) == b"+"
    finally:
        os.close(fd)
        broker.close()


def test_a_silent_broker_means_no_network_after_the_timeout(monkeypatch, capfd) -> None:
    monkeypatch.setattr(bridge_front, "HANDSHAKE_TIMEOUT_S", 0.2)
    fd, broker = _channel(None)
    try:
        assert bridge_front.handshake(fd) is False
        assert "did not answer" in capfd.readouterr().err
    finally:
        os.close(fd)
        broker.close()
