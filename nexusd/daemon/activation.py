"""Adopting a listening socket handed over by a service manager (systemd LISTEN_FDS, launchd).

An adopted socket belongs to the service manager: the daemon never unlinks or chmods it.
"""

from __future__ import annotations

import os
import socket

SD_LISTEN_FDS_START = 3


class ActivationError(RuntimeError):
    """The environment claims a socket but it is not one we can serve on: refuse to start."""


def inherited_listener() -> socket.socket | None:
    """The listening Unix stream socket passed by systemd, or None when not socket-activated."""
    fds = os.environ.get("LISTEN_FDS")
    if not fds:
        return None
    pid = os.environ.get("LISTEN_PID")
    if pid is not None and pid.isdigit() and int(pid) != os.getpid():
        return None  # meant for another process (e.g. our parent)
    try:
        count = int(fds)
    except ValueError as e:
        raise ActivationError(f"LISTEN_FDS={fds!r} is not a number") from e
    if count != 1:
        raise ActivationError(f"expected exactly one inherited socket, got LISTEN_FDS={count}")
    for var in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        os.environ.pop(var, None)  # do not leak them to children
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise ActivationError(f"inherited fd 3 is {sock.family!r}/{sock.type!r}, not a Unix stream socket")
    if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        raise ActivationError("inherited fd 3 is not listening (use Accept=no)")
    os.set_inheritable(sock.fileno(), False)
    return sock
