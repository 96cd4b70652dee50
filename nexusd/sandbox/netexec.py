"""The channel a filtered sandbox's bridge talks through, and ``exec`` with it: for ``nexusctl run`` and for
the agents' generated wrapper alike.

The runner (outside the sandbox) connects to the daemon's proxy broker, presents the one-time token the
daemon registered for this command, and hands the connection into the sandbox as a descriptor numbered
above 9 (3 carries the seccomp filter); the plan's argv holds ``FD_PLACEHOLDER`` where the bridge reads
its number. Without a channel the placeholder becomes ``-1`` and the command simply has no network.

``python -I -S -c "$(cat netexec.py)" BROKER TOKEN -- ARGV...``: what the wrapper runs for a filtered plan
(a Python start only for those; isolated and open plans exec bubblewrap from ``sh`` directly). The base
interpreter without ``site`` and this file's source as ``-c`` (written into the wrapper by the daemon, so
nothing from a checkout the command may change runs outside the sandbox), importing only ``_socket``,
``_signal`` and ``fcntl``: the command waits for this start (``socket``, ``typing`` and a virtualenv's ``site`` cost
~25 ms more under load).
"""

from __future__ import annotations

import _socket
import fcntl
import os
import sys

TYPE_CHECKING = False  # typing costs an import the command would wait for; mypy reads this name as typing's
if TYPE_CHECKING:
    import signal as _sig
    from typing import TextIO
else:
    import _signal as _sig  # the C module behind ``signal``, which adds an enum import

FD_PLACEHOLDER = "@NEXUS_PROXY_FD@"
TIMEOUT_S = 5.0


def _say(err: TextIO | None, line: str) -> None:
    if err is None:  # run as the wrapper's helper: no io layer needed for one line
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    else:
        print(line, file=err, flush=True)


def open_channel(broker: str | None, token: str | None, err: TextIO | None) -> int | None:
    """A descriptor (>= 10, inheritable) connected to the broker, ``token`` sent; None: no network.
    ``err``: where to say why not (None: descriptor 2).

    The broker's answer (``ok``, or a refusal) is not awaited here: the bridge's front reads it inside
    the sandbox before it listens (``bridge_front.handshake``), so the daemon's reply travels while
    bubblewrap sets the sandbox up instead of before it starts. A refused token still means no network,
    said on the command's stderr."""
    if not broker or not token:
        _say(err, "nexus: no nexusd proxy (no daemon): the sandboxed command has no network")
        return None
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(TIMEOUT_S)
        s.connect(broker)
        s.sendall(token.encode("ascii") + b"\n")
        s.settimeout(None)
        fd = fcntl.fcntl(s.fileno(), fcntl.F_DUPFD, 10)
        os.set_inheritable(fd, True)
        return fd
    except (OSError, UnicodeEncodeError) as e:
        _say(err, f"nexus: cannot reach the nexusd proxy ({e}): the sandboxed command has no network")
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
        _say(None, "usage: python -I -S -c NETEXEC_SOURCE BROKER TOKEN -- ARGV...")
        return 126
    broker, token, argv = args[0], args[1], args[3:]
    # as ``env --default-signal=INT,QUIT`` would (the wrapper skips that exec for filtered plans): a
    # background job of a non-interactive sh starts with both ignored, and exec keeps what is ignored
    _sig.signal(_sig.SIGINT, _sig.SIG_DFL)
    _sig.signal(_sig.SIGQUIT, _sig.SIG_DFL)
    channel = open_channel(broker, token, None)
    try:
        os.execv(argv[0], fill(argv, channel))
    except OSError as e:
        _say(None, f"nexus: cannot start the sandbox ({argv[0]}): {e}")
    return 126


if __name__ == "__main__":
    sys.exit(main())
