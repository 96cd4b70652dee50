"""The channel a filtered sandbox's bridge talks through, and ``exec`` with it: for ``nexusctl run`` and for
the agents' generated wrapper alike.

The runner (outside the sandbox) connects to the daemon's proxy broker, presents the one-time token the
daemon registered for this command, and hands the connection into the sandbox as a descriptor numbered
above 9 (3 carries the seccomp filter); the plan's argv holds ``FD_PLACEHOLDER`` where the bridge reads
its number. Without a channel the placeholder becomes ``-1`` and the command simply has no network.

``python -I -m nexusd.sandbox.netexec BROKER TOKEN -- ARGV...``: what the wrapper runs for a filtered plan
(a Python start only for those; isolated and open plans exec bubblewrap from ``sh`` directly).
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
from typing import TextIO

FD_PLACEHOLDER = "@NEXUS_PROXY_FD@"


def open_channel(broker: str | None, token: str | None, err: TextIO) -> int | None:
    """A descriptor (>= 10, inheritable) connected to the broker under ``token``; None: no network."""
    if not broker or not token:
        print("nexus: no nexusd proxy (no daemon): the sandboxed command has no network", file=err, flush=True)
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect(broker)
        s.sendall(token.encode("ascii") + b"\n")
        if s.recv(3) != b"ok\n":
            raise OSError("the proxy refused the token")
        s.settimeout(None)
        fd = fcntl.fcntl(s.fileno(), fcntl.F_DUPFD, 10)
        os.set_inheritable(fd, True)
        return fd
    except (OSError, UnicodeEncodeError) as e:
        print(f"nexus: cannot reach the nexusd proxy ({e}): the sandboxed command has no network", file=err, flush=True)
        return None
    finally:
        s.close()


def fill(argv: list[str], channel: int | None) -> list[str]:
    """``argv`` with its first ``FD_PLACEHOLDER`` (the bridge's, before the command) set to the channel."""
    out = list(argv)
    if FD_PLACEHOLDER in out:
        out[out.index(FD_PLACEHOLDER)] = str(channel) if channel is not None else "-1"
    return out


def main(args: list[str] | None = None) -> int:
    args = sys.argv[1:] if args is None else args
    if len(args) < 4 or args[2] != "--":
        print("usage: python -I -m nexusd.sandbox.netexec BROKER TOKEN -- ARGV...", file=sys.stderr)
        return 126
    broker, token, argv = args[0], args[1], args[3:]
    channel = open_channel(broker, token, sys.stderr)
    try:
        os.execv(argv[0], fill(argv, channel))
    except OSError as e:
        print(f"nexus: cannot start the sandbox ({argv[0]}): {e}", file=sys.stderr, flush=True)
    return 126


if __name__ == "__main__":
    sys.exit(main())
