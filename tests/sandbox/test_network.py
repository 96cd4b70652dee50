"""Filtered networking, end to end: a real daemon, real bubblewrap, real curl and git inside, servers on loopback.

``localhost``, ``127.0.0.1`` and ``127.0.0.2`` are three distinct names here: the proxy matches the name
the client asked for, never an address it resolves to. Nothing is mocked.
"""

from __future__ import annotations

import http.server
import json
import os
import select
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd import protocol as p
from nexusd.client import Client
from nexusd.client_errors import NexusClientError
from tests.person import Answer, Person
from tests.sandbox.conftest import wrapper_script

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("curl") is None,
    reason="needs bubblewrap and curl (scripts/bootstrap installs them)",
)
NEXUSCTL = str(Path(sys.executable).parent / "nexusctl")
# inside the sandbox: the base interpreter (a venv in a checkout under /tmp is hidden by the sandbox's /tmp)
PY = getattr(sys, "_base_executable", None) or sys.executable
BODY = "hello from the loopback server\n"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(directory: Path, host: str = "127.0.0.1", tls: tuple[Path, Path] | None = None) -> Iterator[int]:
    handler = lambda *a, **kw: _Quiet(*a, directory=str(directory), **kw)  # noqa: E731
    srv = http.server.ThreadingHTTPServer((host, 0), handler)
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls[0]), str(tls[1]))
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("site")
    (d / "index.html").write_text(BODY)
    (d / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    repo = d / "work"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("a repository served over dumb http\n")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "-C", str(repo), "add", "README"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(d / "repo.git")], check=True)
    subprocess.run(["git", "-C", str(d / "repo.git"), "update-server-info"], check=True)
    return d


@pytest.fixture(scope="module")
def http_port(site: Path) -> Iterator[int]:
    yield from serve(site)


@pytest.fixture(scope="module")
def http_port2(site: Path) -> Iterator[int]:
    yield from serve(site, "127.0.0.2")


@pytest.fixture(scope="module")
def tls_port(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
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
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    yield from serve(site, tls=(cert, key))


def policy(allowed: list[str] = (), denied: list[str] = (), extra: str = "") -> str:  # type: ignore[assignment]
    return (
        f'[sandbox.network]\nmode = "filtered"\nallowed_domains = {json.dumps(list(allowed))}\n'
        f"denied_domains = {json.dumps(list(denied))}\n{extra}"
    )


def run(h, *argv: str, timeout: float = 15, workspace: Path | None = None) -> subprocess.CompletedProcess[str]:
    ws = workspace or h.root
    return subprocess.run(
        [NEXUSCTL, "run", "--", *argv], env=h.env, cwd=str(ws), capture_output=True, text=True, timeout=timeout
    )


def audit(h) -> list[dict]:
    path = h.state_dir / "audit.jsonl"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        if any(r.get("event") == "network_close" for r in lines) or any(r["tool"] == "Network" for r in lines):
            return [r for r in lines if r["tool"] == "Network"]
        time.sleep(0.05)
    return []


def UI(h, answer: Answer) -> Person:
    """A person at a UI answering the daemon's Network prompts with ``answer(item)``."""
    return Person(h.socket, answer, tool="Network", timeout=5)


# ---------------------------------------------------------------------- allowed


def test_allowed_http_https_socks_and_bytes_in_the_audit(daemon_factory, http_port: int, tls_port: int) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}", f"localhost:{tls_port}"]))
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")
    assert r.returncode == 0 and r.stdout == BODY, r.stderr
    r = run(h, "curl", "-sSk", "-m", "20", f"https://localhost:{tls_port}/index.html")
    assert r.returncode == 0 and r.stdout == BODY, r.stderr
    r = run(
        h, "curl", "-sS", "-m", "20", "--socks5-hostname", "127.0.0.1:1080", f"http://LocalHost.:{http_port}/index.html"
    )
    assert r.returncode == 0 and r.stdout == BODY, r.stderr
    records = audit(h)
    allows = [x for x in records if x.get("event", "decision") == "decision"]
    assert allows and all(x["decision"] == "allow" for x in allows)
    assert allows[0]["summary"].startswith(f"http://localhost:{http_port}")
    closes = [x for x in records if x.get("event") == "network_close"]
    assert closes and all(x["bytes_down"] > len(BODY) and x["bytes_up"] > 0 for x in closes)


def test_git_clone_over_http(daemon_factory, http_port: int, tmp_path: Path) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    ws = tmp_path / "ws"
    ws.mkdir()
    r = run(h, "git", "clone", "-q", f"http://localhost:{http_port}/repo.git", "clone", workspace=ws)
    assert r.returncode == 0, r.stderr
    assert (ws / "clone" / "README").read_text().startswith("a repository")


def test_large_download_through_connect_is_whole(daemon_factory, site: Path, tls_port: int, tmp_path: Path) -> None:
    h = daemon_factory(policy=policy([f"localhost:{tls_port}"]))
    r = run(h, "sh", "-c", f"curl -sSk -m 30 https://localhost:{tls_port}/big.bin | sha256sum", workspace=tmp_path)
    import hashlib

    assert r.stdout.split()[0] == hashlib.sha256((site / "big.bin").read_bytes()).hexdigest(), r.stderr


class Counted:
    """A loopback HTTP/1.1 server that counts every byte it receives and sends per connection (what the
    audit's ``bytes_up`` / ``bytes_down`` must equal) and answers ``GET /N`` with N bytes of ``blob``
    and any request with a body with that body's sha256."""

    def __init__(self, blob: bytes) -> None:
        self.blob = blob
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.counts: list[tuple[int, int]] = []  # (received, sent) per finished connection
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        import hashlib

        received = sent = 0
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            received += len(data)
            head, body = data.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:")), 0)
            digest = hashlib.sha256(body)
            while len(body) < length:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                received += len(chunk)
                body += chunk
                digest.update(chunk)
            path = lines[0].split(" ")[1]
            payload = digest.hexdigest().encode() if length else self.blob[: int(path.strip("/"))]
            answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(payload) + payload
            conn.sendall(answer)
            sent += len(answer)
            conn.shutdown(socket.SHUT_WR)
            while chunk := conn.recv(65536):  # until the client closes: nothing more is counted after this
                received += len(chunk)
        self.counts.append((received, sent))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def blob() -> bytes:
    return os.urandom(48 * 1024 * 1024)


@pytest.fixture()
def counted(blob: bytes) -> Iterator[Counted]:
    srv = Counted(blob)
    yield srv
    srv.close()


def test_bulk_through_connect_both_ways_byte_exact_and_counted(
    daemon_factory, counted: Counted, blob: bytes, tmp_path: Path
) -> None:
    """A download and an upload of tens of megabytes through the bridge and the daemon (both splice bulk
    bytes): content checked by hash, and the audit's byte counts equal what the server saw, exactly."""
    import hashlib

    h = daemon_factory(policy=policy([f"localhost:{counted.port}"]))
    url = f"http://localhost:{counted.port}"
    (tmp_path / "up.bin").write_bytes(blob[: 40 * 1024 * 1024 + 11])
    r = run(
        h,
        "sh",
        "-c",
        f"curl -sS -p -m 60 {url}/{len(blob)} | sha256sum; curl -sS -p -m 60 --data-binary @up.bin {url}/",
        workspace=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    down_hash, up_hash = r.stdout.split()[0], r.stdout.split()[-1]
    assert down_hash == hashlib.sha256(blob).hexdigest()
    assert up_hash == hashlib.sha256(blob[: 40 * 1024 * 1024 + 11]).hexdigest()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        closes = [x for x in audit(h) if x.get("event") == "network_close"]
        if len(closes) == 2 and len(counted.counts) == 2:
            break
        time.sleep(0.1)
    assert sorted((x["bytes_up"], x["bytes_down"]) for x in closes) == sorted(counted.counts)
    assert max(x["bytes_down"] for x in closes) > len(blob) and max(x["bytes_up"] for x in closes) > 40 * 1024 * 1024


def test_a_pipe_into_head_ends_quietly(daemon_factory, http_port: int) -> None:
    """The bridge execs the command: it must not pass on Python's ignored SIGPIPE (``yes | head`` would
    then fail with a write error instead of ending quietly)."""
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    r = run(h, "sh", "-c", "yes | head -n 1; grep SigIgn /proc/self/status")
    assert r.returncode == 0 and r.stdout.startswith("y\n") and r.stderr == "", r.stderr
    ignored = int(r.stdout.split("SigIgn:")[1].split()[0], 16)
    assert not ignored & (1 << (13 - 1))  # SIGPIPE is 13


# ---------------------------------------------------------------------- refused


def test_denied_names_get_an_answer_never_a_hang(
    daemon_factory, http_port: int, http_port2: int, tls_port: int
) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}"], ["127.0.0.2", "*.evil.test"]))
    r = run(h, "curl", "-sS", "-m", "20", f"http://127.0.0.2:{http_port2}/index.html")
    assert r.stdout.startswith("nexusd: network access to 127.0.0.2") and "denied domain" in r.stdout
    r = run(
        h,
        "curl",
        "-sS",
        "-m",
        "20",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        f"http://127.0.0.2:{http_port2}/index.html",
    )
    assert r.stdout == "403"
    # TLS: the CONNECT is refused with 403; curl says so (exit 56), at once
    started = time.monotonic()
    r = run(h, "curl", "-sSk", "-m", "20", f"https://0x7f000002:{tls_port}/")
    assert r.returncode == 56 and "403" in r.stderr and time.monotonic() - started < 15
    r = run(h, "curl", "-sS", "-m", "20", "--socks5-hostname", "127.0.0.1:1080", f"http://127.2:{http_port2}/")
    assert r.returncode == 97 and "(2)" in r.stderr  # SOCKS reply 0x02: not allowed by ruleset
    records = audit(h)
    assert [x["decision"] for x in records if x.get("event", "decision") == "decision"] == ["deny"] * 4


def test_unknown_domain_with_no_ui_is_denied_at_once(daemon_factory, http_port: int, http_port2: int) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    r = run(h, "curl", "-sS", "-m", "20", f"http://127.0.0.2:{http_port2}/index.html")
    assert "no nexusd UI is connected" in r.stdout
    # an allowed name on a port it was not allowed on is its own decision
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port2 + 1}/")
    assert "but not port" in r.stdout


def test_nothing_leaves_without_the_proxy(daemon_factory, http_port: int) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}", f"127.0.0.1:{http_port}"]))
    r = run(h, "curl", "-sS", "-m", "10", "--noproxy", "*", f"http://127.0.0.1:{http_port}/index.html")
    assert r.returncode == 7 and BODY not in r.stdout
    r = run(h, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{http_port} && echo CONNECTED")
    assert r.returncode != 0 and "CONNECTED" not in r.stdout
    r = run(
        h,
        "env",
        "-i",
        f"PATH={os.environ['PATH']}",
        "curl",
        "-sS",
        "-m",
        "10",  # a program that ignores them
        f"http://127.0.0.1:{http_port}/index.html",
    )
    assert r.returncode == 7


def test_control_socket_and_the_calls_fifos_stay_unreachable(daemon_factory, http_port: int) -> None:
    """Inside, the daemon's socket cannot be connected to, and the FIFOs that start a sandbox's ports (the
    run directory's, with the daemon's state) can be neither opened nor seen: a command cannot report a
    process of its choosing to the proxy."""
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        plan = c.call(p.SandboxPlan(command="true", cwd=str(h.root)))
    assert plan.proxy_info and plan.proxy_go
    fifos = [plan.proxy_info, plan.proxy_go, str(Path(plan.proxy_info).parent)]
    probe = (
        "import os,socket,sys\n"
        "try:\n"
        "  s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('REACHED', sys.argv[1])\n"
        "except OSError as e: print('refused', e.errno)\n"
        "for path in sys.argv[2:]:\n"
        "  try:\n"
        "    fd=os.open(path, os.O_WRONLY|os.O_NONBLOCK); print('OPENED', path)\n"
        "  except OSError as e: print('refused', e.errno)\n"
        "  print('listed' if os.path.isdir(path) and os.listdir(path) else 'unlisted')\n"
    )
    for extra in ("", "allow_all_unix_sockets = true\n"):
        h.write_policy(policy([f"localhost:{http_port}"], extra=extra))
        with Client(socket_path=str(h.socket), role="admin", name="t") as c:
            c.call(p.Reload())
        r = run(h, PY, "-I", "-c", probe, str(h.socket), *fifos)
        assert "REACHED" not in r.stdout and "OPENED" not in r.stdout, r.stdout + r.stderr
        assert r.stdout.count("refused") == 4 and "listed\n" not in r.stdout.replace("unlisted", ""), r.stdout


def test_without_a_daemon_there_is_no_network(http_port: int, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "policy.toml").write_text(policy([f"localhost:{http_port}"]))
    env = {
        **os.environ,
        "NEXUS_SOCKET": str(tmp_path / "none.sock"),
        "NEXUS_CONFIG_DIR": str(cfg),
        "NEXUS_STATE_DIR": str(tmp_path / "st"),
        "NEXUS_MANAGED_DIR": str(tmp_path / "mg"),
    }
    r = subprocess.run(
        [NEXUSCTL, "run", "--", "curl", "-sS", "-m", "10", f"http://localhost:{http_port}/"],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 7 and "no network" in r.stderr


# ---------------------------------------------------------------------- asked


def test_asked_then_allowed_once_shows_host_port_and_command(daemon_factory, http_port2: int) -> None:
    h = daemon_factory(policy=policy(["never.test"]))
    ui = UI(h, lambda item: ("allow", "once"))
    try:
        r = run(h, "curl", "-sS", "-m", "30", f"http://127.0.0.2:{http_port2}/index.html")
    finally:
        ui.close()
    assert r.stdout == BODY, r.stderr
    item = ui.seen[0]
    assert item.call.input["host"] == "127.0.0.2" and item.call.input["port"] == http_port2
    assert "curl" in item.call.input["sandboxed_command"] and "curl" in item.verdict.reason
    assert item.verdict.suggestions == ["WebFetch(domain:127.0.0.2)"]


def test_asked_then_denied(daemon_factory, http_port2: int) -> None:
    h = daemon_factory(policy=policy(["never.test"]))
    ui = UI(h, lambda item: ("deny", "once"))
    try:
        r = run(h, "curl", "-sS", "-m", "30", f"http://127.0.0.2:{http_port2}/index.html")
    finally:
        ui.close()
    assert "denied by person" in r.stdout and BODY not in r.stdout


def test_always_learns_a_rule_for_the_domain(daemon_factory, http_port2: int) -> None:
    h = daemon_factory(policy=policy(["never.test"], extra=f"allowed_ports = [{http_port2}]\n"))
    ui = UI(h, lambda item: ("allow", "always"))
    try:
        r = run(h, "curl", "-sS", "-m", "30", f"http://127.0.0.2:{http_port2}/index.html")
    finally:
        ui.close()
    assert r.stdout == BODY, r.stderr
    # no UI now: the learned WebFetch(domain:127.0.0.2) allows it
    r = run(h, "curl", "-sS", "-m", "30", f"http://127.0.0.2:{http_port2}/index.html")
    assert r.stdout == BODY, r.stdout + r.stderr


def test_nobody_answers_then_timeout_denies(daemon_factory, http_port2: int) -> None:
    h = daemon_factory(policy=policy(["never.test"]), pending_timeout=1.5)
    ui = UI(h, lambda item: None)
    try:
        r = run(h, "curl", "-sS", "-m", "30", f"http://127.0.0.2:{http_port2}/index.html")
    finally:
        ui.close()
    assert "nobody answered" in r.stdout


def test_parallel_connections_to_one_host_are_one_ask(daemon_factory, http_port2: int) -> None:
    h = daemon_factory(policy=policy(["never.test"]))
    answered = threading.Event()

    def slow_allow(item: p.PendingItem) -> tuple[str, str]:
        time.sleep(0.5)
        answered.set()
        return ("allow", "once")

    ui = UI(h, slow_allow)
    url = f"http://127.0.0.2:{http_port2}/index.html"
    try:
        r = run(h, "sh", "-c", f"for i in 1 2 3 4 5; do curl -sS -m 30 {url} & done; wait")
    finally:
        ui.close()
    assert r.stdout == BODY * 5 and len(ui.seen) == 1


# ---------------------------------------------------------------------- hostile clients


HOSTILE = r"""
import socket, sys, time
def conn(port=3128):
    s = socket.create_connection(("127.0.0.1", port), timeout=30); return s
def answer(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk: break
        data += chunk
    return data
out = []
# garbage, a bad request line, a non-proxy request, an unterminated IPv6, a huge head
huge = b"GET http://a.test/ HTTP/1.1\r\nX: " + b"a" * 200000 + b"\r\n\r\n"
for payload in (b"\x00\xff garbage\r\n\r\n", b"GET\r\n\r\n", b"GET /local HTTP/1.1\r\nHost: x\r\n\r\n",
                b"CONNECT [::1:443 HTTP/1.1\r\n\r\n", huge):
    s = conn(); s.sendall(payload); s.shutdown(socket.SHUT_WR) if len(payload) < 1000 else None
    out.append(answer(s)[:12].decode("latin-1")); s.close()
print("ANSWERS", out)
# slowloris: heads that never finish do not block anyone else
lazy = [conn() for _ in range(40)]
for s in lazy: s.sendall(b"GET http://x.test/ HTTP/1.1\r\n")
# SOCKS garbage
s = conn(1080); s.sendall(b"\x04\x01garbage"); s.shutdown(socket.SHUT_WR); print("SOCKS4", answer(s)); s.close()
s = conn(1080); s.sendall(b"\x05\x01\x00\x05\x02\x00\x01" + bytes(6)); print("BIND", answer(s)[2:4]); s.close()
# many CONNECTs to a denied host, none of which may open anything
n = int(sys.argv[1]); refused = 0
for i in range(n):
    s = conn(); s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
    if answer(s).startswith(b"HTTP/1.1 403"): refused += 1
    s.close()
print("REFUSED", refused, "OF", n)
print("WAITING", flush=True)  # the test counts the daemon's descriptors now, then lets us end
sys.stdin.readline()
"""


@pytest.mark.slow
def test_hostile_clients_neither_crash_nor_open(daemon_factory, http_port: int) -> None:
    h = daemon_factory(policy=policy([f"localhost:{http_port}"], ["denied.test"]))
    assert h.proc is not None
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")  # warm: one of everything
    assert r.stdout == BODY
    fds = f"/proc/{h.proc.pid}/fd"
    before = len(os.listdir(fds))
    n = 10_000
    proc = subprocess.Popen(
        [NEXUSCTL, "run", "--", PY, "-I", "-c", HOSTILE, str(n)],
        env=h.env,
        cwd=str(h.root),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("WAITING"):
            break
    # the 40 slowloris connections are still open (one descriptor each in the daemon); 10,000 closed ones
    # left none, and the sandbox's four listening sockets are all it holds besides
    held = len(os.listdir(fds)) - before
    out, err = proc.communicate("\n", timeout=300)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines) + out, err)
    assert f"REFUSED {n} OF {n}" in r.stdout, r.stdout + r.stderr
    assert held < 60, held
    answers = r.stdout.split("ANSWERS ", 1)[1].splitlines()[0]
    assert answers.count("HTTP/1.1 400") == 4 and "HTTP/1.1 431" in answers
    assert "SOCKS4 b''" in r.stdout and "BIND b'\\x05\\x07'" in r.stdout
    assert h.proc is not None and h.proc.poll() is None  # the daemon lives
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")
    assert r.stdout == BODY
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        assert c.status().pending == 0
    deadline = time.monotonic() + 20  # the sandbox is gone: so is every descriptor it cost the daemon
    while len(os.listdir(fds)) > before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(os.listdir(fds)) <= before + 2, sorted(os.readlink(f"{fds}/{x}") for x in os.listdir(fds))


FORGED_REPORTS = [
    b"",  # the runner ends before bubblewrap reports
    b"not json at all",
    b'{"child-pid": "12"}',
    b'{"child-pid": -1}',
    b'{"child-pid": true}',
    b"[1, 2]",
    b"{" * 5000,  # never a whole object: given up after 4 KiB
    b'{"child-pid": 1}\n',  # init: not a namespace of ours (its user namespace is not our uid's)
    b"SELF",  # a process in the daemon's own network namespace: never listened in
]


def test_a_forged_or_broken_report_opens_nothing(daemon_factory, http_port: int) -> None:
    """What reaches the info FIFO is bubblewrap's word on where the ports go; whatever else arrives there
    (written by a process outside, never by one inside: the FIFOs are hidden there) makes no port anywhere,
    releases a waiting bubblewrap with no network, and leaves the daemon serving. One daemon for all."""
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    for report in FORGED_REPORTS:
        with Client(socket_path=str(h.socket), role="agent", name="t") as c:
            plan = c.call(p.SandboxPlan(command="true", cwd=str(h.root)))
        assert plan.network == "filtered" and plan.proxy_info and plan.proxy_go
        assert Path(plan.proxy_info).parent.stat().st_mode & 0o777 == 0o700
        sleeper = None
        if report == b"SELF":
            sleeper = subprocess.Popen(["sleep", "30"])
            report = json.dumps({"child-pid": sleeper.pid}).encode()
        go = os.open(plan.proxy_go, os.O_RDONLY | os.O_NONBLOCK)
        try:
            with open(plan.proxy_info, "wb") as f:
                f.write(report)
            os.set_blocking(go, True)
            ready, _, _ = select.select([go], [], [], 20)
            assert ready, f"a waiting bubblewrap would never be released ({report[:40]!r})"
            assert os.read(go, 1) in (b"x", b""), report[:40]
        finally:
            os.close(go)
            if sleeper is not None:
                sleeper.kill()
                sleeper.wait()
        with socket.socket() as s:  # nothing listens on the host's loopback for it
            assert s.connect_ex(("127.0.0.1", 3128)) != 0, report[:40]
        assert not os.path.exists(plan.proxy_info) and not os.path.exists(plan.proxy_go), report[:40]
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")
    assert r.stdout == BODY, r.stderr


def test_agents_transparent_sandbox_uses_it(daemon_factory, http_port: int, tmp_path: Path) -> None:
    """An agent's allowed shell call comes back as the fast-path wrapper; for a filtered network the wrapper
    hands bubblewrap the call's FIFOs, which the deciding daemon serves (nexusd/sandbox/netjoin.py)."""
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(curl *)"]\n[sandbox]\nenabled = true\n'
        + policy([f"localhost:{http_port}"])
    )
    call = p.CallInfo(
        provider="claude",
        session="s-net",
        tool="Bash",
        cwd=str(tmp_path),
        workspace=str(tmp_path),
        input={"command": f"curl -sS -m 20 http://localhost:{http_port}/index.html"},
    )
    with Client(socket_path=str(h.socket), role="agent", name="hook") as c:
        d = c.request(call)
    assert d.decision == "allow" and d.updated_input is not None, d
    text = d.updated_input["command"]
    script = Path(wrapper_script(text)).read_text()
    assert '5<>"$nx_ni" 6<"$nx_ng"' in script and "--info-fd 5 --block-fd 6" in script
    assert " -I -S -c " not in script  # no interpreter starts for the network
    # the daemon's walks run in walker processes: their list of directories reaches the epilogue
    assert "-files0-from" in script
    r = subprocess.run(
        ["/bin/bash", "-c", text], env=h.env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert r.stdout == BODY, r.stderr
    # the FIFOs are one call's: the same wrapped text run again has no network, and says so
    again = subprocess.run(
        ["/bin/bash", "-c", text], env=h.env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert again.stdout != BODY and "no network" in again.stderr


def test_an_agents_filtered_call_stays_interruptible(daemon_factory, http_port: int, tmp_path: Path) -> None:
    """The wrapper starts bubblewrap as a background job, which a non-interactive sh starts with SIGINT and
    SIGQUIT ignored; ``env --default-signal`` restores both before bubblewrap, filtered plans included."""
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(grep *)"]\n[sandbox]\nenabled = true\n'
        + policy([f"localhost:{http_port}"])
    )
    call = p.CallInfo(
        provider="claude",
        session="s-int",
        tool="Bash",
        cwd=str(tmp_path),
        workspace=str(tmp_path),
        input={"command": "python3 -I -S -c 'import signal as s; print(s.getsignal(2), s.getsignal(3))'"},
    )
    with Client(socket_path=str(h.socket), role="agent", name="hook") as c:
        d = c.request(call)
    assert d.decision == "allow" and d.updated_input is not None, d
    text = d.updated_input["command"]
    script = Path(wrapper_script(text)).read_text()
    start = next(line for line in script.splitlines() if "( exec " in line).split("( exec ", 1)[1]
    assert start.split()[1] == "--default-signal=INT,QUIT"  # env restores both, as for every plan
    r = subprocess.run(
        ["/bin/bash", "-c", text], env=h.env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60
    )
    # Python installs its own SIGINT handler unless SIGINT was ignored when it started; 0 is SIG_DFL
    want = ["<built-in", "function", "default_int_handler>", "0"]
    assert r.stdout.split() == want, r.stdout + r.stderr


def test_an_agents_session_answer_lasts_for_its_session(daemon_factory, http_port2: int, tmp_path: Path) -> None:
    """An agent's allowed Bash call comes back wrapped; its sandbox's network asks carry the agent session,
    so a "session" answer covers the next call of that session, and no other session."""
    url = f"http://127.0.0.2:{http_port2}/index.html"
    h = daemon_factory(
        policy='[permissions]\nallow = ["Bash(curl *)"]\n[sandbox]\nenabled = true\n'
        '[sandbox.network]\nmode = "filtered"\n'
        f"allowed_ports = [{http_port2}]\n"
    )

    def agent_call(session: str) -> subprocess.CompletedProcess[str]:
        call = p.CallInfo(
            provider="claude",
            session=session,
            tool="Bash",
            cwd=str(tmp_path),
            input={"command": f"curl -sS -m 30 {url}"},
            workspace=str(tmp_path),
        )
        with Client(socket_path=str(h.socket), role="agent", name="hook") as c:
            d = c.request(call)
        assert d.decision == "allow" and d.updated_input is not None
        return subprocess.run(
            ["/bin/bash", "-c", d.updated_input["command"]],
            env=h.env,
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )

    ui = UI(h, lambda item: ("allow", "session"))
    try:
        r = agent_call("sess-A")
    finally:
        ui.close()
    assert r.stdout == BODY, r.stderr
    assert ui.seen[0].call.provider == "claude" and ui.seen[0].call.session == "sess-A"
    assert agent_call("sess-A").stdout == BODY  # no UI now: the session's grant
    assert "no nexusd UI" in agent_call("sess-B").stdout  # another session asks again (and nobody answers)


def test_the_users_own_proxy_port_carries_the_bytes(daemon_factory, tmp_path: Path) -> None:
    """http_proxy_port hands the sandbox the user's proxy on the host's loopback (here a tiny one that
    answers every request itself), and nothing else."""
    lst = socket.create_server(("127.0.0.1", 0))
    port = lst.getsockname()[1]

    def own_proxy() -> None:
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return
            with c:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                line = data.split(b"\r\n", 1)[0]
                body = b"own proxy saw " + line
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))

    threading.Thread(target=own_proxy, daemon=True).start()
    h = daemon_factory(policy=f"[sandbox.network]\nhttp_proxy_port = {port}\n")
    try:
        r = run(h, "curl", "-sS", "-m", "20", "http://anything.test/x", workspace=tmp_path)
    finally:
        lst.close()
    assert r.stdout == "own proxy saw GET http://anything.test/x HTTP/1.1", r.stderr


def test_policy_changes_apply_to_the_next_command(daemon_factory, http_port: int, tmp_path: Path) -> None:
    """[sandbox.network] is reloaded like the rest of the policy: a domain denied now is denied to the next
    command; a broken edit keeps the last good policy (the gate's rule), never an open network."""
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    assert run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html").stdout == BODY
    h.write_policy(policy([f"localhost:{http_port}"], ["localhost"]))
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        c.call(p.Reload())
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")
    assert "denied domain" in r.stdout
    h.write_policy('[sandbox.network]\nmode = "filtered"\nallowed_domains = ["exa mple"]\n')
    with Client(socket_path=str(h.socket), role="admin", name="t") as c, pytest.raises(NexusClientError):
        c.call(p.Reload())
    r = run(h, "curl", "-sS", "-m", "20", f"http://localhost:{http_port}/index.html")
    assert BODY not in r.stdout


def _wheel(directory: Path) -> None:
    """A minimal pure wheel and a PEP 503 simple index page for it, written by hand."""
    import hashlib
    import zipfile

    name = "nexusdemo-1.0-py3-none-any.whl"
    files = {
        "nexusdemo/__init__.py": "VALUE = 1\n",
        "nexusdemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: nexusdemo\nVersion: 1.0\n",
        "nexusdemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{k},,\n" for k in files) + "nexusdemo-1.0.dist-info/RECORD,,\n"
    (directory / "simple" / "nexusdemo").mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(directory / "simple" / "nexusdemo" / name, "w") as z:
        for k, v in {**files, "nexusdemo-1.0.dist-info/RECORD": record}.items():
            z.writestr(k, v)
    digest = hashlib.sha256((directory / "simple" / "nexusdemo" / name).read_bytes()).hexdigest()
    (directory / "simple" / "nexusdemo" / "index.html").write_text(
        f'<html><body><a href="{name}#sha256={digest}">{name}</a></body></html>\n'
    )


def test_pip_download_from_a_local_index(daemon_factory, site: Path, http_port: int, tmp_path: Path) -> None:
    _wheel(site)
    h = daemon_factory(policy=policy([f"localhost:{http_port}"]))
    r = run(
        h,
        PY,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "--index-url",
        f"http://localhost:{http_port}/simple/",
        "-d",
        str(tmp_path / "out"),
        "nexusdemo",
        workspace=tmp_path,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "out" / "nexusdemo-1.0-py3-none-any.whl").exists()


NAMED_CONNECTS = """import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        print(path, s.recv(10).decode())
    except OSError as e:
        print(path, type(e).__name__)
"""


def test_named_unix_sockets_beside_a_filtered_network(daemon_factory, http_port: int, tmp_path: Path) -> None:
    """allow_unix_sockets and a filtered network together: the supervisor makes every connect, the
    bridge's loopback ports (curl through the proxy) as well as the named socket; its neighbour stays
    closed. Through ``nexusctl run`` and the agent's wrapper."""
    short = Path(tempfile.mkdtemp(prefix="nxu", dir="/var/tmp"))  # AF_UNIX paths: at most 107 bytes
    servers = []
    for name in ("named", "other"):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(short / f"{name}.sock"))
        srv.listen(8)
        servers.append(srv)

        def serve(srv: socket.socket = srv, reply: bytes = name.upper().encode()) -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(reply)

        threading.Thread(target=serve, daemon=True).start()
    try:
        extra = f'allow_unix_sockets = ["{short}/named.sock"]\n'
        h = daemon_factory(
            policy='[permissions]\nallow = ["Bash(sh *)"]\n[sandbox]\nenabled = true\n'
            + policy([f"localhost:{http_port}"], extra=extra)
        )
        py = getattr(sys, "_base_executable", sys.executable)
        script = tmp_path / "connects.py"
        script.write_text(NAMED_CONNECTS)
        command = (
            f"curl -sS -m 20 http://localhost:{http_port}/index.html && "
            f"{py} {script} {short}/named.sock {short}/other.sock"
        )
        r = run(h, "sh", "-c", command, workspace=tmp_path)
        assert r.stdout.startswith(BODY), r.stderr
        assert f"{short}/named.sock NAMED" in r.stdout and f"{short}/other.sock PermissionError" in r.stdout, r
        call = p.CallInfo(
            provider="claude", session="s-unix", tool="Bash", cwd=str(tmp_path), workspace=str(tmp_path),
            input={"command": f"sh -c {shlex.quote(command)}"},
        )  # fmt: skip
        with Client(socket_path=str(h.socket), role="agent", name="hook") as c:
            d = c.request(call)
        assert d.decision == "allow" and d.updated_input is not None, d
        text = d.updated_input["command"]
        assert "supervise" in Path(wrapper_script(text)).read_text()
        w = subprocess.run(
            ["/bin/bash", "-c", text], env=h.env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60
        )
        assert w.stdout.startswith(BODY) and f"{short}/named.sock NAMED" in w.stdout, w
        assert f"{short}/other.sock PermissionError" in w.stdout, w
    finally:
        for srv in servers:
            srv.close()
        shutil.rmtree(short, ignore_errors=True)
