"""Bursts of asks against the real daemon: 10 agents × 500 asks each at once, answered by one UI.

Each UI is written in the natural shape (read a prompt, then write its answer) that once wedged against
the daemon's backpressure: the blocking ``Client``, the TUI's async ``DaemonLink``, and a raw socket that
writes each answer with a blocking ``sendall`` and never waits for the ack. Every ask must end in exactly
one decision of its own (a person's answer, or a deny at its deadline); nothing may wait for ever, and the
daemon must be empty and responsive afterwards. Correctness, not speed: nothing here is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
import pytest

from nexusd import protocol as p
from nexusd.client import Client
from tests.conftest import DaemonHandle

AGENTS = 10
ASKS = 500  # per agent
TOTAL = AGENTS * ASKS
PENDING_TIMEOUT = 60.0  # every ask is answered long before; a wedge shows as asks denied at their deadline
GUARD = PENDING_TIMEOUT + 30.0  # the test's own limit: no decision by then is a wedge


def _call(agent: int, k: int) -> p.CallInfo:
    return p.CallInfo("claude", f"burst-{agent}", "Bash", {"command": f"npm install pkg-{agent}-{k}"}, "/tmp")


def _verdict_for(item: p.PendingItem) -> str:
    """Allow every other ask (so allows are wrapped and sent like any other), deny the rest."""
    return "allow" if item.call.input["command"].endswith(("0", "2", "4", "6", "8")) else "deny"


async def _agent(path: Path, agent: int, out: dict[str, p.Decision]) -> None:
    """One agent connection: 500 requests written at once, every reply read as it comes."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 24)
    writer.write(p.encode(p.Hello(proto=1, role="agent", name=f"burst-agent-{agent}")))
    assert isinstance(p.decode_server(await reader.readline()), p.Welcome)

    async def send_all() -> None:
        for k in range(ASKS):
            writer.write(p.encode(p.Request(call=_call(agent, k), ref=f"{agent}.{k}")))
            if k % 50 == 49:
                await writer.drain()
        await writer.drain()

    sender = asyncio.ensure_future(send_all())
    finals = 0
    while finals < ASKS:
        line = await reader.readline()
        if not line:
            raise AssertionError(f"agent {agent}: the daemon closed the connection after {finals} decisions")
        msg = p.decode_server(line)
        if isinstance(msg, p.Decision):
            assert msg.ref is not None and msg.ref not in out, msg
            out[msg.ref] = msg
            finals += 1
        else:
            assert isinstance(msg, p.Pending), msg
    await sender
    writer.close()


def run_agents(path: Path) -> dict[str, p.Decision]:
    out: dict[str, p.Decision] = {}

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(_agent(path, i, out) for i in range(AGENTS))), GUARD)

    with contextlib.suppress(TimeoutError):  # reported by the caller as the asks without a decision
        asyncio.run(main())
    return out


# ---------------------------------------------------------------------------- the three UIs


def blocking_client_ui(path: Path, ready: threading.Event, stop: threading.Event, answered: Counter[str]) -> None:
    """The blocking Client as a person's tool would use it: next_event, then answer (which waits for its ack)."""
    with Client(socket_path=str(path), role="ui", name="burst-blocking", timeout=30) as ui:
        snap = ui.subscribe()
        assert not snap.items
        ready.set()
        while not stop.is_set():
            try:
                ev = ui.next_event(timeout=0.5)
            except Exception as e:  # ReplyTimeout: nothing new; anything else ends the UI (and fails the test)
                if type(e).__name__ == "ReplyTimeout":
                    continue
                raise
            if isinstance(ev, p.Prompt):
                ack = ui.answer(ev.item.id, _verdict_for(ev.item))
                answered[ack.detail] += 1


def tui_link_ui(path: Path, ready: threading.Event, stop: threading.Event, answered: Counter[str]) -> None:
    """The TUI's DaemonLink (AsyncClient underneath): events arrive by callback, answers go by ``call``."""
    from clients.nexus_clients.tui.link import DaemonLink, LinkUp

    async def main() -> None:
        send, recv = anyio.create_memory_object_stream[p.PendingItem](TOTAL * 2)

        def on_event(ev: object) -> None:
            if isinstance(ev, LinkUp):
                ready.set()
            elif isinstance(ev, p.Prompt):
                send.send_nowait(ev.item)
            elif isinstance(ev, p.Snapshot):
                for item in ev.items:
                    send.send_nowait(item)

        link = DaemonLink(path, on_event, name="burst-tui", timeout=30)
        async with anyio.create_task_group() as tg:
            tg.start_soon(link.run)

            async def answer() -> None:
                async for item in recv:
                    ack = await link.call(p.Answer(id=item.id, decision=_verdict_for(item)))  # type: ignore[arg-type]
                    answered[ack.detail] += 1

            tg.start_soon(answer)
            while not stop.is_set():
                await anyio.sleep(0.1)
            tg.cancel_scope.cancel()

    anyio.run(main)


def raw_socket_ui(path: Path, ready: threading.Event, stop: threading.Event, answered: Counter[str]) -> None:
    """A bare socket: read a line; for a prompt write the answer at once with a blocking sendall, never
    waiting for its ack (acks and resolved pushes are read later, in the same loop)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.settimeout(0.5)
    sock.sendall(b'{"type":"hello","proto":1,"role":"ui","name":"burst-raw"}\n{"type":"subscribe","ref":"s"}\n')
    buf = b""
    try:
        while not stop.is_set():
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                raise AssertionError("the daemon closed the raw UI's connection")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = p.decode_server(line)
                if isinstance(msg, p.Snapshot):
                    ready.set()
                elif isinstance(msg, p.Prompt):
                    answer = p.Answer(id=msg.item.id, decision=_verdict_for(msg.item))  # type: ignore[arg-type]
                    sock.settimeout(None)  # the blocking write of the natural shape
                    sock.sendall(p.encode(answer))
                    sock.settimeout(0.5)
                elif isinstance(msg, p.Ack):
                    answered[msg.detail] += 1
                elif isinstance(msg, p.Error):
                    raise AssertionError(f"the raw UI got an error: {msg}")
    finally:
        sock.close()


UIS: dict[str, Callable[[Path, threading.Event, threading.Event, Counter[str]], None]] = {
    "blocking-client": blocking_client_ui,
    "tui-link": tui_link_ui,
    "raw-socket": raw_socket_ui,
}


@pytest.mark.slow
@pytest.mark.timeout(GUARD + 120)
@pytest.mark.parametrize("ui_kind", list(UIS))
def test_a_burst_of_asks_is_answered_without_a_wedge(daemon_factory: Callable[..., DaemonHandle], ui_kind: str) -> None:
    h = daemon_factory(pending_timeout=PENDING_TIMEOUT, args=("--log-level", "info"))
    ready, stop = threading.Event(), threading.Event()
    answered: Counter[str] = Counter()
    failure: list[BaseException] = []

    def ui_thread() -> None:
        try:
            UIS[ui_kind](h.socket, ready, stop, answered)
        except BaseException as e:  # surfaced by the assertions below
            failure.append(e)
            ready.set()

    t = threading.Thread(target=ui_thread, daemon=True)
    t.start()
    assert ready.wait(30) and not failure, failure
    try:
        decisions = run_agents(h.socket)
        deadline = time.monotonic() + 30
        while sum(answered.values()) < len(decisions) and time.monotonic() < deadline and not failure:
            time.sleep(0.05)  # the last acks may still be on their way to the UI
    finally:
        stop.set()
        t.join(30)
    assert not failure, failure
    missing = TOTAL - len(decisions)
    assert missing == 0, f"{missing} of {TOTAL} asks never got a decision: a wedge"
    outcomes = Counter((d.decision, d.source) for d in decisions.values())
    # each ask ended on its own: answered by the person, or (never expected here) denied at its deadline
    assert set(outcomes) <= {("allow", "user"), ("deny", "user"), ("deny", "timeout")}, outcomes
    assert outcomes[("deny", "timeout")] == 0, f"answers were lost or stuck: {outcomes}"
    for ref, d in decisions.items():
        k = int(ref.split(".")[1])
        assert d.decision == ("allow" if k % 2 == 0 else "deny"), (ref, d)
    assert sum(answered.values()) == TOTAL, answered
    with Client(socket_path=str(h.socket), role="admin", name="check") as c:
        st = c.status()
    assert st.pending == 0 and h.proc is not None and h.proc.poll() is None
    assert "dropping it" not in h.log.read_text()  # the UI kept up: nobody was dropped


# ---------------------------------------------------------------------------- the blocking client's send


def test_a_send_reads_while_it_waits_so_both_sides_writing_cannot_wedge() -> None:
    """A peer that writes 4 MB before it reads a byte, while the client writes a 512 KiB line: a plain
    sendall and the peer's write would both wait for ever; LineSocket.send reads while it writes."""
    from nexusd.linesocket import LineSocket

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    payload = b"".join(b'{"type":"pong","ref":"%d"}\n' % i for i in range(160_000))  # ~4 MB of lines
    got = bytearray()

    def peer() -> None:
        b.sendall(payload)  # blocks until the client has read most of it
        with contextlib.suppress(OSError):
            while len(got) < 512 << 10:
                chunk = b.recv(1 << 16)
                if not chunk:
                    break
                got.extend(chunk)

    t = threading.Thread(target=peer, daemon=True)
    t.start()
    line = LineSocket(a, timeout=10)
    line.send(b"x" * ((512 << 10) - 1) + b"\n")
    t.join(20)
    assert not t.is_alive() and len(got) == 512 << 10
    deadline = time.monotonic() + 10
    n = 0
    while n < 160_000:
        assert msgspec.json.decode(line.read_line(deadline))["ref"] == str(n)
        n += 1
    line.close()
    b.close()


# ---------------------------------------------------------------------------- the async client's push queue


def test_an_async_subscriber_that_falls_behind_is_disconnected_not_silently_short(
    daemon_factory: Callable[..., DaemonHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue of pushes is bounded (100,000; 40 here): past it the client ends the connection with a
    reason instead of dropping prompts (a prompt lost is a request nobody sees until it times out)."""
    import nexusd.client as client_mod
    from nexusd.client import AsyncClient, DaemonUnreachable

    monkeypatch.setattr(client_mod, "MAX_QUEUED_EVENTS", 40)
    h = daemon_factory(pending_timeout=60)

    async def main() -> tuple[int, str]:
        async with AsyncClient(socket_path=str(h.socket), role="ui", name="laggard") as c:
            events = c.subscribe()
            assert isinstance(await events.__anext__(), p.Snapshot)
            await anyio.to_thread.run_sync(_ask_many, h.socket, 100)  # 100 prompts while nobody reads
            seen = 0
            try:
                async for ev in events:
                    assert isinstance(ev, p.Prompt)
                    seen += 1
            except DaemonUnreachable as e:
                return seen, str(e)
            return seen, ""

    seen, reason = anyio.run(main)
    # 40 queued, plus at most the one handed straight to the reader when it was already waiting (the daemon
    # writes a burst of prompts in one write, which may arrive after the asker saw its pendings)
    assert seen in (40, 41) and "fell 40 pushed messages behind" in reason


def _ask_many(path: Path, n: int) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(p.encode(p.Hello(proto=1, role="agent", name="asker")))
        data = b"".join(p.encode(p.Request(call=_call(0, k), ref=str(k))) for k in range(n))
        s.sendall(data)
        got = b""
        while got.count(b'"type":"pending"') < n:
            chunk = s.recv(1 << 16)
            assert chunk, got[-200:]
            got += chunk
