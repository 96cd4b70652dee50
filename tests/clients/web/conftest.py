"""A real daemon with a real ``nexus-web`` in front of it, and a headless Debian chromium to drive it."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nexusd.client import Client
from nexusd.client_errors import ReplyTimeout
from tests.conftest import DaemonHandle

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class WebHandle:
    daemon: DaemonHandle
    proc: subprocess.Popen[str]
    url: str  # with the token
    lines: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        s = urlsplit(self.url)
        return f"{s.scheme}://{s.netloc}"

    @property
    def hostport(self) -> tuple[str, int]:
        s = urlsplit(self.url)
        return s.hostname or "", s.port or 80

    @property
    def token(self) -> str:
        return urlsplit(self.url).query.removeprefix("token=")

    def http(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        host: str | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """A raw request with full control of Host and Origin (what a rebinding or CSRF attacker sends)."""
        h, port = self.hostport
        conn = http.client.HTTPConnection(h, port, timeout=10)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host if host is not None else f"{h}:{port}")
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def login(self) -> tuple[str, str]:
        """Trade the token for a session: (cookie header value, CSRF token from the page)."""
        status, headers, _ = self.http("GET", f"/?token={self.token}")
        assert status == 303, status
        cookie = headers["set-cookie"].split(";")[0]
        status, _, page = self.http("GET", "/", {"Cookie": cookie})
        assert status == 200
        m = re.search(rb'name="nexus-csrf" content="([^"]+)"', page)
        assert m
        return cookie, m.group(1).decode()


def wait_for_ui(daemon: DaemonHandle, count: int = 1, timeout: float = 30.0) -> None:
    """Until ``count`` UIs are connected. Each question may take long on a loaded machine (a browser and
    several daemons per core): one that times out is asked again, until the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Client(socket_path=str(daemon.socket), role="admin", name="test", timeout=timeout) as c:
                if c.status().connections.get("ui", 0) >= count:
                    return
        except ReplyTimeout:
            continue
        time.sleep(0.05)
    raise AssertionError("nexus-web never subscribed to the daemon")


def start_web(daemon: DaemonHandle, *args: str) -> WebHandle:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_clients.web.app", "--port", "0", "--socket", str(daemon.socket), *args],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 20
    url = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"open (\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, f"nexus-web printed no URL: {''.join(lines)}"
    threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    handle = WebHandle(daemon, proc, url, lines)
    wait_for_ui(daemon)
    return handle


@pytest.fixture
def web_factory(daemon_factory: Callable[..., DaemonHandle]) -> Iterator[Callable[..., WebHandle]]:
    started: list[WebHandle] = []

    def make(*args: str, daemon: DaemonHandle | None = None, **daemon_kw: Any) -> WebHandle:
        d = daemon or daemon_factory(pending_timeout=daemon_kw.pop("pending_timeout", 60), **daemon_kw)
        w = start_web(d, *args)
        started.append(w)
        return w

    yield make
    for w in started:
        if w.proc.poll() is None:
            w.proc.terminate()
            try:
                w.proc.wait(10)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()


@pytest.fixture
def web(web_factory: Callable[..., WebHandle]) -> WebHandle:
    return web_factory()


def chromium_missing() -> str | None:
    if shutil.which("chromium") or Path(CHROMIUM).exists():
        return None
    if os.geteuid() == 0:
        return None  # root: the test fails loudly (scripts/bootstrap installs chromium)
    return "chromium is not installed and we are not root (scripts/bootstrap installs it as root)"


@pytest.fixture
def browser_factory(tmp_path: Path) -> Iterator[Callable[[str], Any]]:
    """``open(name)`` -> a fresh chromium context (own profile under tmp_path) as a Playwright page."""
    why = chromium_missing()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    contexts: list[Any] = []

    def open_page(name: str) -> Any:
        profile = tmp_path / f"profile-{name}"
        profile.mkdir()
        ctx = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 800},
        )
        contexts.append(ctx)
        return ctx.pages[0] if ctx.pages else ctx.new_page()

    try:
        yield open_page
    finally:
        for ctx in contexts:
            ctx.close()
        pw.stop()
