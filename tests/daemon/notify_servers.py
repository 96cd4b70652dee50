"""Real counterparts for notification tests: a private D-Bus session bus (``dbus-daemon``) with a small
notification server on it, and a local HTTP server that records webhook POSTs.

The notification server is ours (no desktop here runs one): it implements the parts of the freedesktop
Notifications interface nexusd uses (GetCapabilities, Notify, CloseNotification) and emits the
ActionInvoked signal on request, the way a real one does when a person clicks.
"""

from __future__ import annotations

import http.server
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IFACE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


@contextmanager
def session_bus(root: Path) -> Iterator[str]:
    exe = shutil.which("dbus-daemon")
    if exe is None:
        import pytest

        pytest.skip("dbus-daemon is not installed (scripts/bootstrap installs the dbus package as root)")
    address = f"unix:path={root / 'bus'}"
    proc = subprocess.Popen(
        [exe, "--session", "--nofork", "--nopidfile", f"--address={address}", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        printed = proc.stdout.readline().strip()
        assert printed.startswith("unix:"), printed
        yield printed
    finally:
        proc.terminate()
        proc.wait(10)


@dataclass
class NotificationServer:
    address: str
    capabilities: list[str] = field(default_factory=lambda: ["actions", "body"])
    notified: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    closed: queue.Queue[int] = field(default_factory=queue.Queue)
    _emit: queue.Queue[tuple[int, str]] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    _next: int = 0

    def start(self) -> NotificationServer:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import Proxy, open_dbus_connection

        self.conn = open_dbus_connection(self.address)
        Proxy(message_bus, self.conn).RequestName(IFACE)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def invoke(self, nid: int, key: str) -> None:
        """What a person's click does: the server emits ActionInvoked."""
        self._emit.put((nid, key))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.conn.close()

    def _loop(self) -> None:
        from jeepney import DBusAddress, MessageType, new_error, new_method_return, new_signal

        emitter = DBusAddress(PATH, interface=IFACE)
        while not self._stop.is_set():
            while not self._emit.empty():
                nid, key = self._emit.get()
                self.conn.send(new_signal(emitter, "ActionInvoked", "us", (nid, key)))
            try:
                msg = self.conn.receive(timeout=0.05)
            except TimeoutError:
                continue
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(3)  # HeaderFields.member
            if member == "GetCapabilities":
                self.conn.send(new_method_return(msg, "as", (self.capabilities,)))
            elif member == "Notify":
                app, _replaces, _icon, summary, body, actions, hints, _timeout = msg.body
                self._next += 1
                self.notified.put(
                    {
                        "id": self._next,
                        "app": app,
                        "summary": summary,
                        "body": body,
                        "actions": list(actions),
                        "hints": hints,
                    }
                )
                self.conn.send(new_method_return(msg, "u", (self._next,)))
            elif member == "CloseNotification":
                self.closed.put(int(msg.body[0]))
                self.conn.send(new_method_return(msg))
            else:
                self.conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod"))


@contextmanager
def webhook_server() -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    """A loopback HTTP server; each POST lands in the queue as {path, headers, body}."""
    got: queue.Queue[dict[str, Any]] = queue.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            got.put({"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(size)})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()
