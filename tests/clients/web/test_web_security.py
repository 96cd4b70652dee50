"""Who can use nexus-web: raw HTTP against a real ``nexus-web`` and daemon, as an attacker would send it.

No token → 401; a wrong Host (DNS rebinding) or Origin (another site) → refused; a change without the
CSRF token, without an Origin, or as a form → refused; no CORS headers ever; a strict CSP on every page.
The arrival guard and the answer checks are also tested on the ``Hub`` directly with a frozen clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from typing import Any

import anyio
import pytest
from nexus_clients.web.access import Access, allowed_hosts
from nexus_clients.web.app import Hub, validate_answer

from nexusd import protocol
from tests.clients.web.conftest import WebHandle
from tests.conftest import DaemonHandle, short_tmpdir

PATHS = ["/", "/api/events", "/api/audit", "/api/rules", "/api/status"]


def test_no_token_is_401_everywhere(web: WebHandle) -> None:
    for path in PATHS:
        status, headers, _ = web.http("GET", path)
        assert status == 401, path
        assert "set-cookie" not in headers
    status, _, _ = web.http("GET", "/?token=" + "A" * len(web.token))
    assert status == 401
    status, _, _ = web.http("GET", "/", {"Cookie": "nexus_web=forged"})
    assert status == 401
    body = json.dumps({"id": "0" * 32, "decision": "allow"}).encode()
    status, _, _ = web.http("POST", "/api/answer", {"Content-Type": "application/json", "Origin": web.base}, body)
    assert status == 401


def test_token_becomes_a_strict_cookie_and_leaves_the_url(web: WebHandle) -> None:
    status, headers, _ = web.http("GET", f"/?token={web.token}")
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    sid = cookie.split(";")[0]
    for path in PATHS[2:]:
        status, _, _ = web.http("GET", path, {"Cookie": sid})
        assert status == 200, path


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1:1", "", "LOCALHOST:{port}x"]
)
def test_wrong_host_refused_even_with_a_session(web: WebHandle, host: str) -> None:
    cookie, _ = web.login()
    for path in ["/", f"/?token={web.token}", "/api/status"]:
        status, headers, _ = web.http("GET", path, {"Cookie": cookie}, host=host.format(port=web.hostport[1]))
        assert status == 421, (host, path)
        assert "set-cookie" not in headers


def test_localhost_names_accepted(web: WebHandle) -> None:
    cookie, _ = web.login()
    port = web.hostport[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"LOCALHOST:{port}"):
        status, _, _ = web.http("GET", "/api/status", {"Cookie": cookie}, host=host)
        assert status == 200, host


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        "http://127.0.0.1:1",
        "https://127.0.0.1:{port}",
        "http://localhost.evil.example:{port}",
    ],
)
def test_wrong_origin_refused(web: WebHandle, origin: str) -> None:
    cookie, csrf = web.login()
    origin = origin.format(port=web.hostport[1])
    status, _, _ = web.http("GET", "/api/status", {"Cookie": cookie, "Origin": origin})
    assert status == 403
    body = json.dumps({"id": "0" * 32, "decision": "allow"}).encode()
    headers = {"Cookie": cookie, "Origin": origin, "X-Nexus-CSRF": csrf, "Content-Type": "application/json"}
    status, _, _ = web.http("POST", "/api/answer", headers, body)
    assert status == 403


def test_cross_site_fetch_metadata_refused(web: WebHandle) -> None:
    cookie, _ = web.login()
    status, _, _ = web.http("GET", "/api/status", {"Cookie": cookie, "Sec-Fetch-Site": "cross-site"})
    assert status == 403


@pytest.mark.parametrize(
    "case",
    ["no-csrf", "wrong-csrf", "other-session-csrf", "no-origin", "form", "text-plain"],
)
def test_answers_need_csrf_origin_and_json(web: WebHandle, case: str) -> None:
    cookie, csrf = web.login()
    _, other_csrf = web.login()
    body = json.dumps({"id": "0" * 32, "decision": "allow"}).encode()
    headers = {"Cookie": cookie, "Origin": web.base, "X-Nexus-CSRF": csrf, "Content-Type": "application/json"}
    if case == "no-csrf":
        del headers["X-Nexus-CSRF"]
    elif case == "wrong-csrf":
        headers["X-Nexus-CSRF"] = "x" * len(csrf)
    elif case == "other-session-csrf":
        headers["X-Nexus-CSRF"] = other_csrf
    elif case == "no-origin":
        del headers["Origin"]
    elif case == "form":
        del headers["X-Nexus-CSRF"]
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        body = b"id=00&decision=allow"
    elif case == "text-plain":
        headers["Content-Type"] = "text/plain"
    status, _, reply = web.http("POST", "/api/answer", headers, body)
    assert status in (403, 415), (case, status, reply)
    # the same request with everything right reaches the answer logic (and finds no such request)
    ok = {"Cookie": cookie, "Origin": web.base, "X-Nexus-CSRF": csrf, "Content-Type": "application/json"}
    status, _, reply = web.http("POST", "/api/answer", ok, json.dumps({"id": "0" * 32, "decision": "allow"}).encode())
    assert status == 409 and b"gone" in reply


def test_no_cors_and_a_strict_csp(web: WebHandle) -> None:
    cookie, _ = web.login()
    for method, path in [("GET", "/"), ("GET", "/api/status"), ("OPTIONS", "/api/answer"), ("GET", "/static/app.js")]:
        status, headers, _ = web.http(method, path, {"Cookie": cookie, "Access-Control-Request-Method": "POST"})
        assert not any(k.startswith("access-control-") for k in headers), (method, path)
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "no-referrer"
    status, _, _ = web.http("OPTIONS", "/api/answer", {"Cookie": cookie})
    assert status == 405


def test_non_loopback_needs_tls(daemon: DaemonHandle) -> None:
    for listen in ("0.0.0.0", "192.168.1.10", "::"):
        proc = subprocess.run(
            [sys.executable, "-m", "nexus_clients.web.app", "--listen", listen, "--port", "0"],
            env=daemon.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert proc.returncode == 2 and "--cert" in proc.stderr, proc.stderr


def test_wildcard_listen_needs_a_host_name(daemon: DaemonHandle) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nexus_clients.web.app",
            "--listen",
            "0.0.0.0",
            "--port",
            "0",
            "--cert",
            "c.pem",
            "--key",
            "k.pem",
        ],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2 and "--host" in proc.stderr, proc.stderr


def test_unix_socket_is_private(daemon: DaemonHandle) -> None:
    path = short_tmpdir() / "web.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_clients.web.app", "--unix", str(path), "--socket", str(daemon.socket)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline() + proc.stdout.readline()
        assert "open http://localhost/?token=" in line
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        proc.terminate()
        proc.wait(10)


def test_allowed_hosts() -> None:
    assert allowed_hosts("127.0.0.1", 8765, []) == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert allowed_hosts("192.168.1.10", 443, ["inbox.lan"]) == {"192.168.1.10:443", "inbox.lan"}
    assert allowed_hosts("0.0.0.0", 8443, ["box:8443"]) == {"box:8443"}
    a = Access(hosts=allowed_hosts("127.0.0.1", 1, []))
    assert not a.token_ok(None) and not a.token_ok("") and a.token_ok(a.token)
    assert len(a.token) >= 40  # 256 bits, url-safe


# --------------------------------------------------------------------------- the hub's own checks


def _item(
    rid: str = "a" * 32, command: str = "make", suggestions: list[str] | None = None, flags: list[str] | None = None
) -> protocol.PendingItem:
    call = protocol.CallInfo(provider="claude", session="s1", tool="Bash", input={"command": command}, cwd="/w")
    verdict = protocol.Verdict(
        "ask",
        "mode default asks",
        "mode",
        suggestions=suggestions or [],
        flags=flags or [],
        requirement="danger-full-access",
    )
    return protocol.PendingItem(id=rid, call=call, verdict=verdict, created=100.0, deadline=130.0)


class FakeLink:
    """Stands in for the daemon link to test the hub's own refusals; anything forwarded is recorded.
    (The real link is covered end to end by the browser tests.)"""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def call(self, msg: Any) -> Any:
        if isinstance(msg, protocol.RuleCheck):  # the daemon's one check, as the daemon answers it
            from nexusd.core.policy.suggest import rule_status

            return protocol.RuleCheckReply(
                results=[protocol.RuleVerdict(r, *rule_status(msg.kind, r)) for r in msg.rules]  # type: ignore[arg-type]
            )
        self.sent.append(msg)
        return protocol.Ack(detail="ok")


def _hub(now: list[float]) -> tuple[Hub, FakeLink]:
    hub = Hub(None)
    hub.state.clock = lambda: now[0]
    link = FakeLink()
    hub.link = link  # type: ignore[assignment]
    hub.on_event(protocol.Snapshot(items=[]))
    hub.state.connected("test")
    return hub, link


@pytest.mark.anyio
async def test_hub_arrival_guard_and_answer_checks() -> None:
    now = [100.0]
    hub, link = _hub(now)
    hub.on_event(protocol.Prompt(item=_item(suggestions=["Bash(make)"])))
    status, reply = await hub.answer({"id": "a" * 32, "decision": "allow"})
    assert status == 409 and reply["code"] == "too_soon" and not link.sent
    now[0] = 100.7
    status, _ = await hub.answer({"id": "a" * 32, "decision": "allow", "scope": "always"})
    assert status == 422 and not link.sent, "flagged high: always needs the explicit confirmation"
    status, _ = await hub.answer({"id": "a" * 32, "decision": "allow", "scope": "session", "rules": ["Bash(*)"]})
    assert status == 422 and not link.sent, "a blanket rule is never forwarded (the daemon's rule_check said so)"
    status, reply = await hub.answer({"id": "a" * 32, "decision": "allow", "scope": "session", "rules": ["Bash(rm *)"]})
    assert status == 422 and "confirmation" in reply["error"] and not link.sent, "a wide rule needs a yes"
    status, _ = await hub.answer({"id": "a" * 32, "decision": "allow", "scope": "always", "confirm_risk": True})
    assert status == 200 and link.sent[-1].scope == "always"
    now[0] = 200.0
    hub.on_event(protocol.Prompt(item=_item("b" * 32)))
    now[0] = 201.0
    status, reply = await hub.answer({"id": "b" * 32, "decision": "allow"})
    assert status == 409 and reply["code"] == "too_late"


@pytest.mark.anyio
async def test_hub_drops_a_browser_that_stops_reading() -> None:
    hub, _ = _hub([100.0])
    send, recv = anyio.create_memory_object_stream[Any](1)
    hub.listeners.add(send)
    hub.broadcast("x", {})
    hub.broadcast("x", {})
    assert send not in hub.listeners
    recv.close()


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"id": "x"},
        {"id": "x", "decision": "maybe"},
        {"id": "x", "decision": "allow", "scope": "forever"},
        {"id": "x", "decision": "allow", "scope": "never"},
        {"id": "x", "decision": "deny", "scope": "always"},
        {"id": "x", "decision": "deny", "message": "m" * 2001},
        {"id": "x", "decision": "deny", "rules": "Bash(x)"},
        {"id": "x", "decision": "deny", "scope": "never", "rules": [""]},
        {"id": "x", "decision": "allow", "rules": ["a"]},
        {"id": "x", "decision": "allow", "answered_by": "someone else"},
        {"id": 5, "decision": "allow"},
    ],
)
def test_malformed_answers_refused(body: Any) -> None:
    assert validate_answer(body)


def test_agent_text_is_escaped_for_the_page() -> None:
    from nexus_clients.tui.state import Entry
    from nexus_clients.web import render

    view = render.item_view(Entry(_item(command="echo \u202eevil\x1b[2J <script>alert(1)</script>"), 0.0))
    assert "\u202e" not in view["command"] and "\\u202e" in view["command"] and "\\e" in view["command"]
    assert view["hidden_chars"] is True
    assert "<script>" in view["command"], "markup stays literal text: the page sets textContent only"
    js = (__import__("importlib.resources").resources.files("nexus_clients.web") / "static" / "app.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js


AGENT_SCRIPT = r"""
import os, subprocess, sys, threading, time
from nexusd import protocol as p
from nexusd.client import Client

sock = sys.argv[1]
web = subprocess.Popen([sys.executable, "-m", "nexus_clients.web.app", "--port", "0", "--socket", sock])
while True:
    with Client(socket_path=sock, role="admin", name="probe") as c:
        if c.status().connections.get("ui", 0) >= 1:
            break
    time.sleep(0.05)
call = p.CallInfo(provider="claude", session="sess-agent", tool="Bash", input={"command": "npm install left-pad"},
                  cwd="/tmp", agent_pid=os.getpid())
with Client(socket_path=sock, role="agent", name="fake-agent", timeout=60) as c:
    print("DECISION", c.request(call, timeout=50).decision, flush=True)
web.terminate()
web.wait()
"""


def test_a_web_inbox_started_by_an_agent_cannot_answer_its_asks(daemon_factory: Any) -> None:
    """The agent starts nexus-web itself, so it sees the token: the daemon's guard still refuses the answer,
    because the web server's own process descends from the agent."""
    from nexusd.client import Client
    from tests.clients.web.conftest import WebHandle

    daemon = daemon_factory(pending_timeout=60)
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT_SCRIPT, str(daemon.socket)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split("open ", 1)[1].strip()
        web = WebHandle(daemon, proc, url)  # type: ignore[arg-type]
        cookie, csrf = web.login()
        with Client(socket_path=str(daemon.socket), role="ui", name="person") as person:
            deadline = time.monotonic() + 20
            items: list[Any] = []
            while not items and time.monotonic() < deadline:
                items = person.subscribe().items
                time.sleep(0.1)
            assert items, "the agent's request never became pending"
            time.sleep(0.8)  # past the arrival guard
            headers = {"Cookie": cookie, "Origin": web.base, "X-Nexus-CSRF": csrf, "Content-Type": "application/json"}
            body = json.dumps({"id": items[0].id, "decision": "allow"}).encode()
            status, _, reply = web.http("POST", "/api/answer", headers, body)
            assert status == 403 and json.loads(reply)["code"] == "self_approval", reply
            person.answer(items[0].id, "deny", message="a person decided")
        assert "DECISION deny" in proc.stdout.readline()
        with Client(socket_path=str(daemon.socket), role="admin", name="test") as c:
            events = [r.event for r in c.call(protocol.Audit()).records if r.session == "sess-agent"]
        assert "self_approval_refused" in events
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the script and the nexus-web it started
        proc.wait(10)


def test_qr_code_of_the_link(daemon: DaemonHandle) -> None:
    import segno

    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_clients.web.app", "--port", "0", "--qr", "--socket", str(daemon.socket)],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split("open ", 1)[1].strip()
        lines = [proc.stdout.readline() for _ in range(5)]
        assert any(ch in "".join(lines) for ch in "▀▄█"), lines  # a terminal QR code follows the URL
        assert segno.make(url, error="l").version >= 1
    finally:
        proc.terminate()
        proc.wait(10)


def test_tls_gives_a_secure_cookie_and_an_https_origin(daemon: DaemonHandle) -> None:
    import http.client
    import shutil
    import ssl

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (only used to make a throwaway certificate)")
    root = short_tmpdir()
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nexus_clients.web.app",
            "--port",
            "0",
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--socket",
            str(daemon.socket),
        ],
        env=daemon.env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split("open ", 1)[1].strip()
        assert url.startswith("https://127.0.0.1:")
        hostport = url.split("/")[2]
        port = int(hostport.rsplit(":", 1)[1])
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False

        def get(path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            r.read()
            conn.close()
            return r

        r = get("/?" + url.split("?", 1)[1], {})
        cookie = r.getheader("set-cookie") or ""
        assert r.status == 303 and "Secure" in cookie and "HttpOnly" in cookie
        sid = cookie.split(";")[0]
        # the link is printed before nexus-web's link to the daemon is up (503 "not connected" meanwhile):
        # a loaded machine took longer than the first request
        deadline = time.monotonic() + 30
        while (status := get("/api/status", {"Cookie": sid, "Origin": f"https://{hostport}"}).status) == 503:
            assert time.monotonic() < deadline, "nexus-web never connected to the daemon"
            time.sleep(0.1)
        assert status == 200
        assert get("/api/status", {"Cookie": sid, "Origin": f"http://{hostport}"}).status == 403
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_subagent_is_shown_escaped() -> None:
    import msgspec
    from nexus_clients.tui.state import Entry
    from nexus_clients.web import render

    item = _item()
    call = msgspec.structs.replace(item.call, subagent_id="agent-1", subagent_type="Explore\u202e")
    view = render.item_view(Entry(msgspec.structs.replace(item, call=call), 0.0))
    assert view["subagent"].startswith("Explore") and "agent-1" in view["subagent"] and "\u202e" not in view["subagent"]
    assert render.item_view(Entry(_item(), 0.0))["subagent"] == ""
