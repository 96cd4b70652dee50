"""[notify]: desktop notifications over a real (private) D-Bus session bus and webhooks to a local HTTP
server, from a real daemon; grouping, rate limits and redaction as pure units with a fake clock."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from nexusd import protocol
from nexusd.client import AsyncClient, Client
from nexusd.core.policy.policy import NotifySpec
from nexusd.daemon.notify_person import Ask, Batcher, redactor, texts, webhook_payload
from nexusd.policy.loader import parse_notify, parse_policy
from tests.conftest import DaemonHandle, short_tmpdir
from tests.daemon.notify_servers import NotificationServer, session_bus, webhook_server

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def call(command: str, session: str = "sess-n") -> protocol.CallInfo:
    return protocol.CallInfo(
        provider="claude",
        session=session,
        tool="Bash",
        input={"command": command},
        cwd="/tmp/proj",
        workspace="/tmp/proj",
    )


def ask(i: int, command: str = "make") -> Ask:
    return Ask(f"{i:032x}", "claude", "Bash", "s", "/home/me/proj", command, 0.0)


# --------------------------------------------------------------------------- pure parts


def test_a_burst_of_fifty_is_one_notification() -> None:
    b = Batcher(group_window=2.0, min_interval=30.0)
    for i in range(50):
        b.add(ask(i), now=100.0 + i * 0.01)
    assert b.take(101.0) == [], "still within the grouping window"
    sent = b.take(102.0)
    assert len(sent) == 50 and b.take(102.1) == []
    title, lines = texts(sent, with_command=False, redact=redactor())
    assert "50" in title and lines[-1] == "and 45 more"


def test_rate_limit_holds_later_asks_and_drops_answered_ones() -> None:
    b = Batcher(group_window=0.0, min_interval=30.0)
    b.add(ask(1), 0.0)
    assert len(b.take(0.0)) == 1
    b.add(ask(2), 1.0)
    b.add(ask(3), 2.0)
    assert b.take(10.0) == [], "one notification per 30 s per channel"
    b.drop(ask(2).id)
    assert [a.id for a in b.take(30.0)] == [ask(3).id]
    b.add(ask(4), 31.0)
    b.drop(ask(4).id)
    assert b.due_at() is None and b.take(100.0) == [], "nothing is sent for what was answered meanwhile"


@pytest.mark.parametrize(
    "secret",
    [
        SECRET,
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghijkl",
        "sk-ant-api03-abcdefghijklmnopqrstuv",
        "sk-proj-abcdefghijklmnop1234",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",
        "Bearer abcdef1234567890",
        "https://user:hunter22@example.com/x",
        "--password hunter22",
        "PASSWORD=hunter22",
        "api_key=hunter22xyz",
        "token: hunter22",
        "mysql -phunter22abc",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "0123456789abcdef0123456789abcdef01234567",
    ],
)
def test_redaction_by_pattern(secret: str) -> None:
    out = redactor()(f"curl -H 'x: {secret}' https://api.example.com")
    assert "[redacted]" in out
    for piece in ("hunter22", "A1b2C3d4", "IOSFODNN", "abcdefghijkl", "c2lnbmF0dXJl", "b3BlbnNz", "0123456789abcdef0"):
        assert piece not in out, out


def test_redaction_keeps_ordinary_commands_and_takes_user_patterns() -> None:
    r = redactor(("internal-[0-9]+",))
    assert r("mkdir -p build/out && make -j4 test") == "mkdir -p build/out && make -j4 test"
    assert r("deploy internal-42") == "deploy [redacted]"


@pytest.mark.parametrize("fmt", ["json", "ntfy", "slack", "discord"])
def test_webhook_payloads_carry_a_link_and_no_command_unless_opted_in(fmt: str) -> None:
    spec = NotifySpec(webhook="http://127.0.0.1:1/x", webhook_format=fmt, web_url="http://127.0.0.1:8765/")  # type: ignore[arg-type]
    asks = [ask(1, f"deploy --token {SECRET} now")]
    body, headers = webhook_payload(spec, asks, redactor())
    text = body.decode() + json.dumps(headers)
    assert "deploy" not in text and SECRET not in text
    assert "http://127.0.0.1:8765/" in text and "token=" not in text
    opted = NotifySpec(webhook="http://127.0.0.1:1/x", webhook_format=fmt, include_command=True)  # type: ignore[arg-type]
    body, _ = webhook_payload(opted, asks, redactor())
    assert "deploy" in body.decode() and SECRET not in body.decode()
    if fmt == "slack":
        assert "text" in json.loads(body)
    elif fmt == "discord":
        assert json.loads(body)["allowed_mentions"] == {"parse": []}
    elif fmt == "ntfy":
        assert headers["Click"] == "http://127.0.0.1:8765/" and headers["Title"].startswith("nexusd")


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({"webhook": "ftp://x"}, "http(s) URL"),
        ({"webhook": "not a url"}, "http(s) URL"),
        ({"web_url": "http://127.0.0.1:8765/?token=abc"}, "token"),
        ({"desktop": "yes"}, "true or false"),
        ({"no_ui": "allow"}, "no_ui"),
        ({"webhook_format": "teams"}, "webhook_format"),
        ({"min_interval": -1}, "min_interval"),
        ({"redact": ["("]}, "bad pattern"),
        ({"colour": 1}, "unknown"),
    ],
)
def test_notify_table_is_strict(table: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_notify(table)


def test_project_policy_cannot_configure_notify(tmp_path: Path) -> None:
    text = '[notify]\nwebhook = "https://collector.example/x"\ninclude_command = true\n'
    layer = parse_policy(text, tmp_path / ".nexusd" / "policy.toml", layer="project", project=True)
    assert layer.notify is None and not layer.errors and any("[notify]" in w for w in layer.warnings)
    user = parse_policy(text, tmp_path / "policy.toml", layer="user")
    assert user.notify is not None and user.notify.webhook == "https://collector.example/x"


# --------------------------------------------------------------------------- a real daemon


async def _requests(daemon: DaemonHandle, commands: list[str]) -> list[Any]:
    """Send every request on one agent connection; return their Decisions (or the exception)."""
    results: list[Any] = [None] * len(commands)
    async with AsyncClient(socket_path=str(daemon.socket), role="agent", name="test-agent", timeout=60) as c:

        async def one(i: int, cmd: str) -> None:
            try:
                results[i] = await c.request(call(cmd), on_no_ui="ask", timeout=60)
            except Exception as e:
                results[i] = e

        async with anyio.create_task_group() as tg:
            for i, cmd in enumerate(commands):
                tg.start_soon(one, i, cmd)
    return results


def _pending(daemon: DaemonHandle) -> int:
    with Client(socket_path=str(daemon.socket), role="admin", name="test") as c:
        return c.status().pending


def _deny_all(daemon: DaemonHandle) -> None:
    with Client(socket_path=str(daemon.socket), role="ui", name="test-ui") as c:
        for item in c.subscribe().items:
            c.answer(item.id, "deny")


def _wait(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_webhook_burst_is_one_post_with_a_link_and_no_secrets(daemon_factory: Any) -> None:
    with webhook_server() as (url, got):
        policy = (
            f'[notify]\nwebhook = "{url}/hook"\nweb_url = "http://127.0.0.1:8765/"\n'
            "group_window = 1.0\nmin_interval = 60\n"
        )
        daemon = daemon_factory(policy=policy, pending_timeout=30)
        results: list[Any] = []

        def run() -> None:
            results.extend(anyio.run(_requests, daemon, [f"deploy --token {SECRET} #{i}" for i in range(50)]))

        import threading

        t = threading.Thread(target=run, daemon=True)
        t.start()
        _wait(lambda: _pending(daemon) == 50)  # no UI connected, yet the asks wait for a person
        post = got.get(timeout=20)
        body = json.loads(post["body"])
        assert post["path"] == "/hook" and body["count"] == 50 and body["link"] == "http://127.0.0.1:8765/"
        assert "deploy" not in post["body"].decode() and SECRET not in post["body"].decode()
        _deny_all(daemon)
        t.join(30)
        assert len(results) == 50 and all(r.decision == "deny" and r.source == "user" for r in results)
        with pytest.raises(queue.Empty):
            got.get(timeout=1.5)  # answered meanwhile: nothing more is sent


def test_desktop_notification_and_its_deny_action(daemon_factory: Any) -> None:
    root = short_tmpdir()
    with session_bus(root) as address:
        server = NotificationServer(address).start()
        try:
            policy = (
                '[notify]\ndesktop = true\nweb_url = "http://127.0.0.1:8765/"\ngroup_window = 0.2\nmin_interval = 0\n'
            )
            daemon = daemon_factory(policy=policy, env={"DBUS_SESSION_BUS_ADDRESS": address}, pending_timeout=30)
            results: list[Any] = []
            import threading

            t = threading.Thread(
                target=lambda: results.extend(
                    anyio.run(_requests, daemon, [f"curl -H 'Authorization: Bearer {SECRET}' https://x.example"])
                ),
                daemon=True,
            )
            t.start()
            shown = server.notified.get(timeout=20)
            assert shown["app"] == "nexusd" and "waiting" in shown["summary"]
            assert "Bash from claude in proj" in shown["body"] and SECRET not in shown["body"]
            assert shown["actions"] == ["default", "Open inbox", "deny", "Deny", "hold", "Hold 1 min"], (
                "no Allow action, ever"
            )
            server.invoke(shown["id"], "deny")  # a person clicks Deny
            t.join(30)
            assert results and results[0].decision == "deny" and results[0].answered_by == "desktop notification"
            with Client(socket_path=str(daemon.socket), role="admin", name="test") as c:
                rec = [r for r in c.call(protocol.Audit(source="user")).records if r.session == "sess-n"]
            assert rec and rec[-1].answered_by == "desktop notification" and rec[-1].decision == "deny"
        finally:
            server.stop()


def test_desktop_notification_withdrawn_when_answered_elsewhere_and_forged_signals_ignored(
    daemon_factory: Any,
) -> None:
    from jeepney import DBusAddress, new_signal
    from jeepney.io.blocking import open_dbus_connection

    root = short_tmpdir()
    with session_bus(root) as address:
        server = NotificationServer(address).start()
        try:
            policy = "[notify]\ndesktop = true\ngroup_window = 0.2\nmin_interval = 0\n"
            daemon = daemon_factory(policy=policy, env={"DBUS_SESSION_BUS_ADDRESS": address}, pending_timeout=30)
            results: list[Any] = []
            import threading

            t = threading.Thread(
                target=lambda: results.extend(anyio.run(_requests, daemon, ["make install"])), daemon=True
            )
            t.start()
            shown = server.notified.get(timeout=20)
            assert shown["actions"] == ["deny", "Deny", "hold", "Hold 1 min"], "no web_url: no Open action"
            # another process on the bus forges the server's signal: ignored (wrong sender)
            with open_dbus_connection(address) as forger:
                forger.send(
                    new_signal(
                        DBusAddress("/org/freedesktop/Notifications", interface="org.freedesktop.Notifications"),
                        "ActionInvoked",
                        "us",
                        (shown["id"], "deny"),
                    )
                )
                time.sleep(1.0)
            assert _pending(daemon) == 1, "a forged signal answered nothing"
            with Client(socket_path=str(daemon.socket), role="ui", name="test-ui") as c:
                item = c.subscribe().items[0]
                time.sleep(0.1)
                c.answer(item.id, "deny", message="answered in another UI")
            assert server.closed.get(timeout=10) == shown["id"], "the notification is withdrawn"
            t.join(30)
        finally:
            server.stop()


def test_notify_off_by_default_no_ui_still_decides_at_once(daemon: DaemonHandle) -> None:
    [d] = anyio.run(_requests, daemon, ["make install"])
    assert d.decision == "ask" and "no nexusd UI is connected" in d.reason


def test_an_unreachable_webhook_costs_the_notification_never_the_request(daemon_factory: Any) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    policy = f'[notify]\nwebhook = "http://127.0.0.1:{port}/gone"\ngroup_window = 0\nmin_interval = 0\n'
    daemon = daemon_factory(policy=policy, pending_timeout=2)
    [d] = anyio.run(_requests, daemon, ["make install"])
    assert d.decision == "deny" and d.source == "timeout", "it waited for a person, then the deadline denied it"
    with Client(socket_path=str(daemon.socket), role="admin", name="test") as c:
        assert c.status().pending == 0
    assert "notification failed" in daemon.log.read_text()


def test_deny_works_after_the_notification_server_restarts(daemon_factory: Any) -> None:
    """The server quits and another takes its name (a new unique name): the asks still waiting are shown
    by the new one, and its Deny is taken; the old server's name, now gone, counts for nothing."""
    root = short_tmpdir()
    with session_bus(root) as address:
        first = NotificationServer(address).start()
        second: NotificationServer | None = None
        try:
            policy = "[notify]\ndesktop = true\ngroup_window = 0.2\nmin_interval = 0\n"
            daemon = daemon_factory(policy=policy, env={"DBUS_SESSION_BUS_ADDRESS": address}, pending_timeout=30)
            results: list[Any] = []
            import threading

            t = threading.Thread(
                target=lambda: results.extend(anyio.run(_requests, daemon, ["make dist"])), daemon=True
            )
            t.start()
            shown = first.notified.get(timeout=20)
            first.stop()  # the server goes away: its connection closes, the bus releases the name
            second = NotificationServer(address).start()
            again = second.notified.get(timeout=20)  # what still waits is shown by the new server
            assert "Bash from claude" in again["body"] and "deny" in again["actions"]
            assert _pending(daemon) == 1
            second.invoke(again["id"], "deny")  # a person clicks Deny on the new server's notification
            t.join(30)
            assert results and results[0].decision == "deny", results
            assert results[0].answered_by == "desktop notification"
            assert shown["id"] >= 1
        finally:
            if second is not None:
                second.stop()


def test_hold_from_a_notification_extends_up_to_the_agents_wait(daemon_factory: Any) -> None:
    """Hold 1 min on a request whose agent waits 12 s: the deadline moves, to at most what the agent waits
    (less the daemon's margin), every UI is told, and the deny then comes at that held deadline."""
    root = short_tmpdir()
    with session_bus(root) as address:
        server = NotificationServer(address).start()
        try:
            policy = "[notify]\ndesktop = true\ngroup_window = 0.2\nmin_interval = 0\n"
            daemon = daemon_factory(policy=policy, env={"DBUS_SESSION_BUS_ADDRESS": address}, pending_timeout=4)
            results: list[Any] = []

            async def agent() -> None:
                async with AsyncClient(socket_path=str(daemon.socket), role="agent", name="agent", timeout=30) as c:
                    started = time.monotonic()
                    d = await c.request(call("make dist"), on_no_ui="ask", timeout=12)
                    results.append((d, time.monotonic() - started))

            import threading

            with Client(socket_path=str(daemon.socket), role="ui", name="watcher") as ui:
                ui.subscribe()
                t = threading.Thread(target=lambda: anyio.run(agent), daemon=True)
                t.start()
                shown = server.notified.get(timeout=20)
                prompt = ui.next_event(timeout=10)
                assert isinstance(prompt, protocol.Prompt)
                server.invoke(shown["id"], "hold")
                held = ui.next_event(timeout=10)
                assert isinstance(held, protocol.Held) and held.by == "desktop notification"
                assert held.deadline > prompt.item.deadline + 3, "held past the 4 s default"
                assert held.deadline <= prompt.item.created + 12, "never past what the agent waits"
                t.join(30)
            (d, waited) = results[0]
            assert d.decision == "deny" and d.source == "timeout"
            assert 7 < waited < 12, f"denied at the held deadline, before the agent gave up ({waited:.1f} s)"
        finally:
            server.stop()
