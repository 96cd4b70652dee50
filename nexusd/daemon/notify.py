"""sd_notify without libsystemd: one datagram per state change to ``$NOTIFY_SOCKET``."""

from __future__ import annotations

import contextlib
import os
import socket


class Notifier:
    """Silent no-op when not run by systemd (no NOTIFY_SOCKET)."""

    def __init__(self, address: str | None) -> None:
        self._address: str | None = None
        self._sock: socket.socket | None = None
        if address:
            # "@name" is the abstract namespace.
            self._address = "\0" + address[1:] if address.startswith("@") else address
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @classmethod
    def from_env(cls) -> Notifier:
        addr = os.environ.pop("NOTIFY_SOCKET", None)
        return cls(addr)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *lines: str) -> None:
        if self._sock is None or self._address is None:
            return
        # The manager going away must not take the daemon down.
        with contextlib.suppress(OSError):
            self._sock.sendto("\n".join(lines).encode(), self._address)

    def ready(self, status: str = "") -> None:
        self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> None:
        import time

        self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    @staticmethod
    def watchdog_interval() -> float | None:
        """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None when no watchdog."""
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid.isdigit() and int(pid) != os.getpid()):
            return None
        try:
            return int(usec) / 2_000_000
        except ValueError:
            return None
