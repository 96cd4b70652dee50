"""A filtered sandbox's proxy ports, made from outside: the daemon listens on the sandbox's own loopback.

bubblewrap names the sandbox's first process (``--info-fd``) and holds the command back (``--block-fd``)
until the ports exist. The *joiner*, a long-lived single-threaded child of the daemon, is handed both
FIFOs with the call and reads the report itself (the daemon's loop is not on the way to the command's
start). It opens a pidfd for the process the report names and hands it to a fork made ahead; the fork
enters the sandbox's network namespace through the user namespace that owns it (ours: bubblewrap made
it, so we hold every capability there), makes listening sockets on 127.0.0.1 and ::1 at the proxy's
ports, writes the byte that starts the command, and sends the sockets and the pidfd to the daemon. A
socket keeps the namespace it was made in, so the daemon's proxy accepts the command's connections
itself: no process runs inside the sandbox for the network, and a call starts no interpreter for it (a
filtered call used to start two).

What gets no ports (the command then runs with no network): a report that is not a positive pid in
bubblewrap's JSON, or none within ``WATCH_TTL``; a process that ended before its pidfd was opened or
before the fork joined (so a reused pid cannot lend another namespace); a network namespace that is the
daemon's own (listening there would open the proxy to every local process); a user namespace owned by
another uid.

Standard library only: ``python -I -S -c SOURCE CONTROL_FD`` (``nexusd.sandbox.helper_argv``), started by
``Joiner``; the daemon's side is ``nexusd.sandbox.proxy`` (``NetworkProxy.attach``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False  # typing costs the joiner an import; mypy reads this name as typing's
if TYPE_CHECKING:
    import subprocess

INFO_FD = 5  # bubblewrap writes {"child-pid": N} here (the wrapper opens net.TAG.info on it)
GO_FD = 6  # and reads one byte here before it runs the command (net.TAG.go); end of file: no network

NS_GET_USERNS = 0xB701  # linux/nsfs.h: _IO(0xb7, 0x1)
NS_GET_OWNER_UID = 0xB704  # _IO(0xb7, 0x4)
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
IP_FREEBIND = 15  # bind before the sandbox's loopback is up (bubblewrap raises it in the blocked child)
IPV6_FREEBIND = 78
# the sandbox's loopback: no loss and no queue; a system default of BBR paces every send with timers,
# which cost a download a third of its CPU there. Reno is in every kernel and allowed unprivileged.
LOOPBACK_CC = b"reno"
REQUEST_MAX = 256
REPORT_MAX = 4096  # bubblewrap's report is ~100 bytes; more is not its
FDS = 3  # with each request: three descriptors (the daemon's: info, go, reply; a fork's: pidfd, reply, go)
WATCH_TTL = 125.0  # a report that has not come by then never will (the daemon's own wait is 120 s)
MAX_WATCHES = 4096


def bwrap_words() -> list[str]:
    """The words a filtered plan gives bubblewrap (the runner and the wrapper put the FIFOs on these)."""
    return ["--info-fd", str(INFO_FD), "--block-fd", str(GO_FD)]


def words_at(argv: list[str]) -> int | None:
    """Where ``bwrap_words`` stand in a plan's argv (None: not a filtered plan). Only our own words can
    hold four in a row like these: the command is one word, the last."""
    words = bwrap_words()
    for i in range(len(argv) - len(words)):
        if argv[i : i + len(words)] == words:
            return i
    return None


# --------------------------------------------------------------------------- the joiner process


def _listen(family: int, address: str, port: int) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
        else:
            s.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
        with contextlib.suppress(OSError, AttributeError):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, LOOPBACK_CC)
        s.bind((address, port))
        s.listen(128)
        return s
    except BaseException:
        s.close()
        raise


def _setns(libc: ctypes.CDLL, fd: int, kind: int, what: str) -> None:
    if libc.setns(fd, kind) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"cannot enter the sandbox's {what} namespace: {os.strerror(e)}")


def join(libc: ctypes.CDLL, pidfd: int, pid: int, ports: list[int]) -> list[socket.socket]:
    """In a fresh fork (it never leaves the namespaces it enters): the listening sockets, for each port
    one on 127.0.0.1 and, where the namespace has IPv6, one on ::1, in that order. Raises with the reason."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    if poller.poll(0):  # a pidfd is readable once its process has ended: the pid may be another's now
        raise OSError("the sandbox ended before its ports were made")
    if os.fstat(net).st_ino == os.stat("/proc/self/ns/net").st_ino:
        raise OSError("the process is not in a network namespace of its own")
    user = fcntl.ioctl(net, NS_GET_USERNS)
    (owner,) = struct.unpack("I", fcntl.ioctl(user, NS_GET_OWNER_UID, b"\0" * 4))
    if owner != os.geteuid():
        raise OSError(f"the sandbox's user namespace belongs to uid {owner}, not to us")
    if os.fstat(user).st_ino != os.stat("/proc/self/ns/user").st_ino:
        _setns(libc, user, CLONE_NEWUSER, "user")
    _setns(libc, net, CLONE_NEWNET, "network")
    out: list[socket.socket] = []
    for port in ports:
        out.append(_listen(socket.AF_INET, "127.0.0.1", port))
        with contextlib.suppress(OSError):  # no IPv6 in the namespace: IPv4 alone
            out.append(_listen(socket.AF_INET6, "::1", port))
    return out


def _answer(libc: ctypes.CDLL, pid: int, ports: list[int], fds: list[int]) -> None:
    """One sandbox's ports, in a fork: ``fds`` are the sandbox process's pidfd, the reply socket and the
    sandbox's go FIFO. With the ports made, the byte that starts the command is written here at once (a
    connection made before the daemon accepts waits in the backlog); then ``ok`` goes to the daemon with
    the pidfd (it watches the sandbox's end) and the listening sockets."""
    pidfd, reply_fd, go = fds
    with socket.socket(fileno=reply_fd) as reply:
        try:
            listeners = join(libc, pidfd, pid, ports)
        except OSError as e:
            reply.send(f"error: {e.strerror or e}".encode("utf-8", "replace")[:REQUEST_MAX])
            return
        with contextlib.suppress(OSError):
            os.write(go, b"x")
        names = " ".join(f"{6 if s.family == socket.AF_INET6 else 4}:{s.getsockname()[1]}" for s in listeners)
        socket.send_fds(reply, [f"ok {names}".encode()], [pidfd, *(s.fileno() for s in listeners)])


def _keep_only(fds: list[int]) -> None:
    """In a fork: every descriptor above 2 closed but ``fds``. Other sandboxes' FIFOs and answer sockets
    must not live on in it: the daemon learns that a report never came from its answer socket's end, and
    bubblewrap that the daemon is gone from its go FIFO's."""
    low = 3
    for fd in sorted(fds):
        if fd > low:
            os.closerange(low, fd)
        low = max(low, fd + 1)
    os.closerange(low, 1 << 20)


def _fork_spare(control: socket.socket, libc: ctypes.CDLL) -> socket.socket | None:
    """A fork made ahead of the next sandbox's report, waiting on the returned socket for it (a fork of
    this process costs ~1 ms: it happens after a sandbox is served, not while one waits for its ports)."""
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        try:
            control.close()
            ours.close()
            _keep_only([theirs.fileno()])
            request, fds, _flags, _addr = socket.recv_fds(theirs, REQUEST_MAX, FDS)
            words = [int(w) for w in request.split()]
            if len(fds) == FDS and len(words) >= 2:
                _answer(libc, words[0], words[1:], fds)
        finally:
            os._exit(0)
    theirs.close()
    return ours


class _Watch:
    """One filtered sandbox whose bubblewrap has not reported yet."""

    __slots__ = ("buf", "deadline", "go", "ports", "reply")

    def __init__(self, go: int, reply: int, ports: list[int], deadline: float) -> None:
        self.go, self.reply, self.ports, self.deadline = go, reply, ports, deadline
        self.buf = b""

    def close(self, info: int) -> None:
        for fd in (info, self.go, self.reply):
            with contextlib.suppress(OSError):
                os.close(fd)


def _report(info: int, w: _Watch) -> int | None:
    """The pid once bubblewrap's report on ``info`` is whole; 0 while it is not; None: never (end of
    file, garbage, too long, or not a positive integer)."""
    try:
        chunk = os.read(info, 4096)
    except BlockingIOError:
        return 0
    except OSError:
        return None
    if not chunk:
        return None
    w.buf += chunk
    if len(w.buf) > REPORT_MAX:
        return None
    try:
        data = json.loads(w.buf)
    except ValueError:
        return 0  # not all of it yet
    pid = data.get("child-pid") if isinstance(data, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _ports(request: bytes) -> list[int] | None:
    try:
        ports = [int(w) for w in request.decode("ascii").split()]
    except (UnicodeDecodeError, ValueError):
        return None
    return ports if ports and all(0 < p < 65536 for p in ports) else None


def serve(control: socket.socket) -> None:
    """Each request from the daemon is ``PORT...`` with three descriptors (``FDS``): a sandbox's info FIFO
    (read end), its go FIFO, and the socket the answer goes on. The joiner reads bubblewrap's report on
    the info FIFO itself (the daemon's loop is not on the way), opens a pidfd for the process it names, and
    hands the rest to a fork made ahead (``_answer``); a report that never comes is dropped after
    ``WATCH_TTL`` seconds (the daemon sees the answer socket end). Ends when the daemon does."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    libc = ctypes.CDLL(None, use_errno=True)
    spare = _fork_spare(control, libc)
    watches: dict[int, _Watch] = {}
    poller = select.poll()
    poller.register(control, select.POLLIN)
    while True:
        now = time.monotonic()
        for info in [i for i, w in watches.items() if w.deadline <= now]:
            poller.unregister(info)
            watches.pop(info).close(info)
        timeout = min((w.deadline for w in watches.values()), default=now + 3600) - now
        try:
            events = poller.poll(max(0, int(timeout * 1000)) + 1)
        except InterruptedError:
            continue
        for fd, _mask in events:
            if fd == control.fileno():
                try:
                    request, fds, _flags, _addr = socket.recv_fds(control, REQUEST_MAX, FDS)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return
                if not request and not fds:
                    return  # the daemon is gone
                ports = _ports(request)
                if len(fds) != FDS or ports is None or len(watches) >= MAX_WATCHES:
                    if len(fds) == FDS:
                        with contextlib.suppress(OSError):
                            why = b"error: a malformed request" if ports is None else b"error: too many sandboxes"
                            os.write(fds[2], why)
                    for x in fds:
                        os.close(x)
                    continue
                info, go, reply = fds
                os.set_blocking(info, False)
                watches[info] = _Watch(go, reply, ports, time.monotonic() + WATCH_TTL)
                poller.register(info, select.POLLIN)
                continue
            w = watches.get(fd)
            if w is None:
                continue
            pid = _report(fd, w)
            if pid == 0:
                continue
            poller.unregister(fd)
            del watches[fd]
            if pid is None:
                w.close(fd)  # the daemon sees its answer socket end: bubblewrap gets no network
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.write(w.reply, f"error: the sandbox's process is gone ({e.strerror})".encode())
                w.close(fd)
                continue
            handed = False
            msg = " ".join(str(n) for n in (pid, *w.ports)).encode()
            if spare is not None:
                try:
                    socket.send_fds(spare, [msg], [pidfd, w.reply, w.go])
                    handed = True
                    # the next fork once this one is done: a fork now would take the CPU its answer needs
                    select.select([spare], [], [], 1.0)
                except OSError:  # it died (killed): fork for this one on the spot
                    pass
                spare.close()
                spare = None
            if not handed and os.fork() == 0:
                try:
                    control.close()
                    _keep_only([pidfd, w.reply, w.go])
                    _answer(libc, pid, w.ports, [pidfd, w.reply, w.go])
                finally:
                    os._exit(0)
            os.close(pidfd)
            w.close(fd)
            spare = _fork_spare(control, libc)


# --------------------------------------------------------------------------- the daemon's side


class Joiner:
    """The daemon's handle on the joiner process (started on first use, again if it died)."""

    def __init__(self, argv: list[str] | None = None) -> None:
        import threading  # (here: the joiner process, which runs this module's source, needs neither)

        self._argv = argv
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def start(self) -> None:
        with self._lock:
            self._running()

    def running(self) -> bool:
        """Whether the joiner process is up (a dead one is started again by ``start`` or ``watch``)."""
        proc = self._proc
        return proc is not None and proc.poll() is None and self._control is not None

    def _running(self) -> socket.socket:
        if self._proc is not None and self._proc.poll() is None and self._control is not None:
            return self._control
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = self._argv
            if argv is None:
                from nexusd.sandbox import helper_argv

                argv = helper_argv("netjoin")
            import subprocess

            self._proc = subprocess.Popen(
                [*argv, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a terminal's ^C reaches the daemon, which stops it itself
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)  # the daemon's loop sends on it: a joiner that cannot keep up is started again
        self._control = ours
        return ours

    def watch(self, info: int, go: int, ports: list[int]) -> socket.socket:
        """Hand a filtered sandbox's FIFOs to the joiner, which waits for bubblewrap's report, makes
        ``ports`` inside and starts the command; returns the socket its answer comes on (``read_answer``).
        The caller keeps its own descriptors. Raises OSError."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            msg = " ".join(str(n) for n in ports).encode()
            with self._lock:
                control = self._running()
                try:
                    socket.send_fds(control, [msg], [info, go, theirs.fileno()])
                except OSError:  # it died since (or cannot keep up): once more with a new one
                    self._stop()
                    socket.send_fds(self._running(), [msg], [info, go, theirs.fileno()])
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        return ours

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(Exception):
                self._proc.wait(1)
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()


def read_answer(sock: socket.socket) -> tuple[int, list[socket.socket]]:
    """A joiner's answer (ready to read): the sandbox process's pidfd and the listening sockets; raises
    OSError with its reason (the end of the socket: no report came)."""
    msg, fds, _flags, _addr = socket.recv_fds(sock, REQUEST_MAX, 9)
    if not msg.startswith(b"ok") or not fds:
        for fd in fds:
            os.close(fd)
        why = msg.decode("utf-8", "replace").removeprefix("error: ") or "no report from the sandbox"
        raise OSError(why)
    listeners = [socket.socket(fileno=fd) for fd in fds[1:]]
    for s in listeners:
        s.setblocking(False)
    return fds[0], listeners


if __name__ == "__main__":
    if len(sys.argv) != 2:
        os.write(2, b"usage: python -I -S -c NETJOIN_SOURCE CONTROL_FD\n")
        sys.exit(2)
    serve(socket.socket(fileno=int(sys.argv[1])))
