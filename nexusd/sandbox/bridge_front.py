"""Inside a filtered sandbox: bind the bridge's loopback ports, fork the relay, exec the command.

``python -I -S -c "$(cat bridge_front.py)" RELAY_SOURCE FD HTTP_PORT SOCKS_PORT -- CMD ARGS...``

This is the part of the bridge that stands between bubblewrap and the command, so it is kept to what the
command must wait for: the interpreter's start, ``_socket`` (no ``socket`` module: it pulls in
``selectors``, ``enum`` and more, ~5-10 ms), four ``bind``/``listen`` calls and a ``fork``. The relay
(``nexusd/sandbox/bridge.py``, passed as its source in ``RELAY_SOURCE``) is compiled and imported only in
the forked child, while the command already runs; a connection the command makes at once waits in the
listener's backlog until the relay accepts it, as before. Standard library only, no nexusd imports: the
sandbox replaces ``/tmp``, where a checkout or a virtualenv may lie.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False  # mypy reads this name as typing's
if TYPE_CHECKING:
    import signal as _sig
else:
    import _signal as _sig  # the C module behind ``signal``, which adds an enum import

# The bridge's ports are on the sandbox's own loopback: no loss, no queue, nothing to be fair to. The
# system's default congestion control may be BBR, which paces every send with timers: on loopback that
# cost the bridge a third of its CPU and the program reading a download a third of its own. Reno is
# built into every Linux kernel and allowed to unprivileged sockets by default (refused: we go on without);
# accepted sockets inherit it.
_LOOPBACK_CC = b"reno"
HANDSHAKE_TIMEOUT_S = 5.0


def listen(port: int) -> list[_socket.socket]:
    """Listening sockets on 127.0.0.1 and ::1 (no IPv6 loopback in the namespace: v4 alone)."""
    out = []
    for family, addr in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):
        try:
            s = _socket.socket(family, _socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            s.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
            if family == _socket.AF_INET6:
                s.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
            s.bind((addr, port))
            try:  # noqa: SIM105 (no contextlib: an import the command would wait for)
                s.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_CONGESTION, _LOOPBACK_CC)
            except (OSError, AttributeError):
                pass
            s.listen(128)
            out.append(s)
        except OSError:
            s.close()
    return out


def handshake(channel: int) -> bool:
    """The broker's answer to the token the runner sent (``netexec.open_channel``): ``ok`` or a refusal.
    Anything else, an error or 5 s of silence is no network, said on stderr. Read a byte at a time: the
    relay's first reply must stay in the socket."""
    line = b""
    try:
        s = _socket.socket(fileno=channel)
    except OSError as e:
        why = str(e)
    else:
        try:
            s.settimeout(HANDSHAKE_TIMEOUT_S)
            while not line.endswith(b"\n") and len(line) < 64:
                b = s.recv(1)
                if not b:
                    break
                line += b
            s.settimeout(None)
        except OSError:
            pass
        finally:
            s.detach()
        if line == b"ok\n":
            return True
        why = "the proxy refused the token" if line else "the proxy did not answer"
    os.write(2, f"nexus: cannot reach the nexusd proxy ({why}): the sandboxed command has no network\n".encode())
    return False


def _relay(source: str, channel: int, listeners: list[tuple[int, bytes]], parent: int) -> None:
    """The forked child: no stdio of the command's, then the relay loop until the command is gone."""
    null = os.open(os.devnull, os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(null, n)
    ns: dict[str, object] = {"__name__": "nexus_bridge_relay"}
    exec(compile(source, "nexus-bridge-relay", "exec"), ns)  # the relay's code, given by nexusd, not the workspace
    serve = ns["serve_fds"]
    assert callable(serve)
    serve(channel, listeners, parent)


def main(argv: list[str]) -> int:
    if len(argv) < 6 or argv[4] != "--":
        os.write(2, b"nexus-bridge: usage: RELAY_SOURCE FD HTTP_PORT SOCKS_PORT -- CMD ...\n")
        return 126
    source = argv[0]
    fd, http_port, socks_port = (int(x) for x in argv[1:4])
    cmd = argv[5:]
    listeners: list[tuple[_socket.socket, bytes]] = []
    if fd >= 0 and not handshake(fd):
        try:  # noqa: SIM105 (no contextlib, as below)
            os.close(fd)
        except OSError:
            pass
        fd = -1
    if fd >= 0:
        for port, kind in ((http_port, b"H"), (socks_port, b"S")):
            listeners += [(s, kind) for s in listen(port)]
    parent = os.getpid()
    if listeners and os.fork() == 0:
        try:
            _relay(source, fd, [(s.detach(), kind) for s, kind in listeners], parent)
        finally:
            os._exit(0)
    for s, _ in listeners:  # not the command's (they are close-on-exec too)
        s.close()
    if fd >= 0:  # nor is the channel
        try:  # noqa: SIM105 (no contextlib, as above)
            os.close(fd)
        except OSError:
            pass
    _sig.signal(_sig.SIGPIPE, _sig.SIG_DFL)  # Python ignores it, and exec would pass that on
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        os.write(2, f"nexus-bridge: cannot run {cmd[0]}: {e}\n".encode("utf-8", "replace"))
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
