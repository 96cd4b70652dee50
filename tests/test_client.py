"""The client library against the real daemon, plus a fake server only where a real daemon cannot misbehave."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import anyio
import pytest

from nexusd import protocol as p
from nexusd.client import AsyncClient, BadReply, Client, ClientError, DaemonUnreachable, ReplyTimeout
from tests.conftest import short_tmpdir
from tests.daemon.conftest import Raw

BASH = p.CallInfo(provider="claude", session="s", tool="Bash", input={"command": "make"}, cwd="/tmp")
READ = p.CallInfo(provider="claude", session="s", tool="Read", input={"file_path": "/tmp/x"}, cwd="/tmp")


def test_hook_import_path_stays_lean():
    code = (
        "import sys, nexusd.client\n"
        "heavy = {'anyio', 'structlog', 'click', 'psutil', 'platformdirs'} & set(sys.modules)\n"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_blocking_request_status_and_check(daemon):
    with Client(socket_path=daemon.socket, role="agent", name="t") as c:
        assert c.welcome is not None and c.welcome.role == "agent"
        d = c.request(BASH)  # no UI: denied, never allowed
        assert d.decision == "deny"
        d = c.request(BASH, on_no_ui="ask")
        assert d.decision == "ask"
        assert c.status().pid == daemon.proc.pid
        assert c.check(BASH).decision in ("ask", "deny")
        with pytest.raises(ClientError) as e:
            c.call(p.Subscribe())
        assert e.value.code == "wrong_role"


def test_unreachable_is_distinct(tmp_path):
    with pytest.raises(DaemonUnreachable):
        Client(socket_path=short_tmpdir() / "none.sock").connect()


def test_request_timeout_raises_and_cancels(daemon):
    ui = Raw(daemon.socket)
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    with Client(socket_path=daemon.socket) as c, pytest.raises(ReplyTimeout):
        c.request(BASH, timeout=0.5)
    assert isinstance(ui.recv(), p.Prompt)
    res = ui.recv()
    assert isinstance(res, p.Resolved) and res.source == "cancelled"


def test_daemon_stopping_mid_request_denies_then_unreachable(daemon):
    ui = Raw(daemon.socket)
    ui.hello("ui")
    ui.ask({"type": "subscribe"})
    with Client(socket_path=daemon.socket) as c:
        stopper = threading.Timer(0.3, daemon.stop)
        stopper.start()
        d = c.request(BASH, timeout=10)
        stopper.join()
        assert (d.decision, d.reason) == ("deny", "daemon stopping")
        with pytest.raises(DaemonUnreachable):
            c.status()


def fake_server(reply: bytes) -> tuple[str, threading.Thread]:
    """A misbehaving 'daemon' (the real one never sends garbage): the only way to test BadReply."""
    path = str(short_tmpdir() / "fake.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.sendall(reply)
        conn.recv(65536)
        conn.close()
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return path, t


@pytest.mark.parametrize(
    "reply",
    [b"not json\n", b'{"type":"decision","decision":"allow"}\n', b'{"type":"status_reply"}\n', b"\xff\n"],
)
def test_garbage_from_the_daemon_is_bad_reply(reply):
    path, _t = fake_server(reply)
    with pytest.raises(BadReply):
        Client(socket_path=path, timeout=2).connect()


def scripted_server(replies: list[bytes]) -> str:
    """A misbehaving 'daemon' that answers each line it reads with the next reply, ``{ref}`` replaced by that
    line's ref (the real daemon never misbehaves: the only way to test the client's refusals)."""
    import json

    path = str(short_tmpdir() / "fake.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn, conn.makefile("rb") as lines:
            for reply in replies:
                line = lines.readline()
                if not line:
                    break
                conn.sendall(reply.replace(b"{ref}", str(json.loads(line).get("ref")).encode()) + b"\n")
            lines.read()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return path


WELCOME_AGENT = b'{"type":"welcome","proto":1,"version":"x","role":"agent","ref":"{ref}"}'
WELCOME_UI = b'{"type":"welcome","proto":1,"version":"x","role":"ui","ref":"{ref}"}'


@pytest.mark.parametrize(
    "reply",
    [
        b'{"type":"check_result","verdict":{"decision":"allow","reason":"x","source":"rule"},"ref":"{ref}"}',
        b'{"type":"status_reply","version":"0","pid":1,"uptime":0,"connections":{},"pending":0,"counters":{},'
        b'"policy":[],"policy_errors":[],"ref":"other"}',
        b'{"type":"prompt","item":{}}',
    ],
)
def test_wrong_reply_type_is_bad_reply(reply):
    c = Client(socket_path=scripted_server([WELCOME_AGENT, reply]), timeout=2).connect()
    with pytest.raises(BadReply):
        c.call(p.Status(), timeout=2)
    with pytest.raises(BadReply):  # the conversation stays failed
        c.call(p.Status(), timeout=2)


def test_a_decision_for_another_request_is_never_taken():
    allow = b'{"type":"decision","decision":"allow","reason":"x","source":"rule","ref":"c9"}'
    c = Client(socket_path=scripted_server([WELCOME_AGENT, allow]), timeout=2).connect()
    with pytest.raises(BadReply):
        c.request(BASH, timeout=2)


@pytest.mark.anyio
async def test_async_protocol_violation_fails_every_waiter_closed():
    allow = b'{"type":"decision","decision":"allow","reason":"x","source":"rule","ref":"{ref}"}'
    async with AsyncClient(socket_path=scripted_server([WELCOME_UI, allow]), role="ui", timeout=2) as c:
        with pytest.raises(DaemonUnreachable, match="broke the protocol"):
            await c.status()
        with pytest.raises(DaemonUnreachable):
            await c.status()


@pytest.mark.anyio
async def test_async_welcome_for_another_role_is_refused():
    with pytest.raises(BadReply):
        async with AsyncClient(socket_path=scripted_server([WELCOME_AGENT]), role="ui", timeout=2):
            pass


@pytest.mark.anyio
async def test_async_subscribe_answer_and_bye(daemon):
    async with AsyncClient(socket_path=daemon.socket, role="ui", name="tui") as ui:
        events = ui.subscribe()
        snap = await events.__anext__()
        assert isinstance(snap, p.Snapshot) and snap.items == []
        async with AsyncClient(socket_path=daemon.socket, role="agent") as agent, anyio.create_task_group() as tg:
            result: list[p.Decision] = []

            async def ask() -> None:
                result.append(await agent.request(BASH, timeout=10))

            tg.start_soon(ask)
            prompt = await events.__anext__()
            assert isinstance(prompt, p.Prompt)
            st, ack = await _gather(ui.status(), ui.answer(prompt.item.id, "allow", message="ok"))
            assert isinstance(st, p.StatusReply) and isinstance(ack, p.Ack)
        assert result[0].decision == "allow" and result[0].message == "ok"
        resolved = await events.__anext__()
        assert isinstance(resolved, p.Resolved) and resolved.decision == "allow"
        assert (await ui.check(READ)).decision in ("allow", "ask", "deny")
        await anyio.to_thread.run_sync(daemon.stop)
        bye = await events.__anext__()
        assert isinstance(bye, p.Bye)
        with pytest.raises(DaemonUnreachable):
            await ui.status()


async def _gather(*aws):
    results = [None] * len(aws)

    async def one(i, aw):
        results[i] = await aw

    async with anyio.create_task_group() as tg:
        for i, aw in enumerate(aws):
            tg.start_soon(one, i, aw)
    return results


@pytest.mark.anyio
async def test_async_unreachable():
    with pytest.raises(DaemonUnreachable):
        async with AsyncClient(socket_path=short_tmpdir() / "none.sock"):
            pass
