"""sd_notify without libsystemd: one datagram per state change to ``$NOTIFY_SOCKET``.

The protocol is newline-separated ``KEY=VALUE`` assignments in one datagram. Sends never block and never
raise: the event loop calls them, and a vanished service manager must not take the daemon down.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time


class Notifier:
    """Silent no-op when not run by systemd (no NOTIFY_SOCKET)."""

    def __init__(self, address: str | None) -> None:
        self._address: str | None = None
        self._sock: socket.socket | None = None
        if address and address[0] in "/@":
            # "@name" is the abstract namespace. Other schemes (vsock:) are not for a user daemon.
            self._address = "\0" + address[1:] if address.startswith("@") else address
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # A manager that stops reading must not stall the event loop: drop the datagram instead.
            self._sock.setblocking(False)

    @classmethod
    def from_env(cls) -> Notifier:
        # Popped so policy hooks and sandboxed commands we spawn cannot speak for us.
        return cls(os.environ.pop("NOTIFY_SOCKET", None))

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *lines: str) -> None:
        if self._sock is None or self._address is None:
            return
        with contextlib.suppress(OSError):
            self._sock.sendto("\n".join(lines).encode(), self._address)

    def ready(self, status: str = "") -> None:
        """Listening with the policy loaded: systemd starts counting the service as up."""
        self.send("READY=1", *([_status_line(status)] if status else []))

    def reloading(self) -> None:
        # MONOTONIC_USEC lets a manager that understands notify-reload match this to its reload job.
        self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def status(self, text: str) -> None:
        self.send(_status_line(text))

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @staticmethod
    def watchdog_interval() -> float | None:
        """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None when no watchdog.

        Mirrors sd_watchdog_enabled(): WATCHDOG_PID, when set, must be ours. The variables stay in the
        environment (children see a foreign WATCHDOG_PID and ignore them), so this may be called anytime.
        """
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID")
        if pid is not None and (not pid.isdigit() or int(pid) != os.getpid()):
            return None
        if not usec.isdigit() or int(usec) == 0:
            return None
        return int(usec) / 2_000_000


def _status_line(text: str) -> str:
    # A newline would let the text smuggle its own assignments (e.g. "READY=1") into the datagram.
    return "STATUS=" + " ".join(text.splitlines())[:200]
