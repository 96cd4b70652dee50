"""``allow_unix_sockets`` on Linux: a seccomp user-notification supervisor that connects for the sandbox.

A classic seccomp filter sees a system call's number and registers, never the path a ``connect`` names,
so a filter alone can close every Unix socket or none. With named sockets, the plan runs:

``python -I -S -c SOURCE supervise PATH... -- bwrap ... -- python -I -S -c SOURCE load FD PROGRAM -- CMD``

- **outside** (``supervise``): this process makes a socket pair, starts bubblewrap with one end
  inherited (its number replaces ``PLACEHOLDER``), receives the filter's listener descriptor from the
  loader, and answers every ``connect`` of the sandbox until bubblewrap exits; bubblewrap's exit status
  is its own (a signal forwarded to bubblewrap, death by a signal passed on);
- **inside** (``load``): the loader sets ``no_new_privs``, installs ``PROGRAM`` (``seccomp.notify_filter``:
  every ``connect`` becomes ``SECCOMP_RET_USER_NOTIF``) with ``SECCOMP_FILTER_FLAG_NEW_LISTENER``, sends the
  listener out over the pair, closes both, and execs the command. Any failure: the command does not run
  (exit 126), so a sandbox without its supervisor never starts.

Each ``connect`` is decided and **made by the supervisor**, never let through: the address is read once
from the target's memory (``/proc/PID/mem``, the notification re-validated after the read), the target's
socket is taken with ``pidfd_getfd`` (the same open socket), and the supervisor calls ``connect`` on it
with its own copy of the address. Nothing the sandbox changes afterwards (the address in its memory, the
descriptor table, a symlink) reaches a decision already made. ``SECCOMP_USER_NOTIF_FLAG_CONTINUE`` is never
used: the kernel would read the address again after the check.

- A Unix socket (the socket's own family, ``SO_DOMAIN``, not the address's): the path must be absolute
  and, normalised, one of the named paths; the supervisor then connects to that configured path, in the
  host's file system. Abstract addresses, relative paths and every other path: ``EACCES``. The filter
  below lets only Unix *stream* sockets be made (``seccomp.unix_socket_filter(named=True)``): a datagram
  socket could ``sendto`` any path without ``connect``.
- Any other family (the proxy's loopback ports, the sandbox's own network): connected as asked, in the
  sandbox's network namespace (a socket keeps the namespace it was made in).

Standard library only, no nexusd imports (the loader runs inside the sandbox, where a checkout under
``/tmp`` is hidden); ``ctypes`` for ``seccomp``, ``pidfd_open``, ``pidfd_getfd`` and ``connect`` with a raw
address. Linux 5.6 or later (``pidfd_getfd``); where a call is missing, connects fail closed.
"""

import _socket
import contextlib
import ctypes
import errno
import fcntl
import os
import select
import signal
import struct
import sys
import threading

PLACEHOLDER = "@NEXUS_UNIX_FD@"
EXIT_REFUSED = 126
MAX_HANDLERS = 64  # connects answered at once; more wait for none: EAGAIN

# linux/seccomp.h: struct seccomp_notif (80 bytes), struct seccomp_notif_resp (24 bytes), the ioctls
_NOTIF = struct.Struct("=QIIiIQ6Q")  # id, pid, flags, data.nr, data.arch, data.instruction_pointer, data.args
_RESP = struct.Struct("=QqiI")  # id, val, error (a negative errno), flags
IOCTL_RECV = 0xC0502100  # _IOWR('!', 0, struct seccomp_notif)
IOCTL_SEND = 0xC0182101  # _IOWR('!', 1, struct seccomp_notif_resp)
IOCTL_ID_VALID = 0x40082102  # _IOW('!', 2, __u64)
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
PR_SET_NO_NEW_PRIVS = 38
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # the same on every architecture
PIDFD_THREAD = os.O_EXCL  # a pidfd for a thread, not its process (Linux 6.9)
SO_DOMAIN = 39
AF_UNIX = 1
SUN_PATH_MAX = 108
MAX_ADDR = 128  # sizeof(struct sockaddr_storage): the kernel refuses longer addresses


def _say(line: str) -> None:
    os.write(2, (line + "\n").encode("utf-8", "replace"))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


# --------------------------------------------------------------------------- inside: the loader


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load(fd_text: str, program_hex: str, argv: list[str]) -> int:
    """Install the notifying filter, hand its listener out on descriptor ``fd_text``, exec ``argv``."""
    try:
        pair = int(fd_text)
        program = bytes.fromhex(program_hex)
        number = SYS_SECCOMP[os.uname().machine]
    except (ValueError, KeyError) as e:
        _say(f"nexus: the Unix-socket supervisor cannot start here ({e}): the command was not run")
        return EXIT_REFUSED
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _say(f"nexus: no_new_privs: {os.strerror(ctypes.get_errno())}: the command was not run")
        return EXIT_REFUSED
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.addressof(code))
    listener = libc.syscall(number, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, ctypes.byref(fprog))
    if listener < 0:
        why = os.strerror(ctypes.get_errno())
        _say(f"nexus: the Unix-socket supervisor's filter cannot be installed ({why}): the command was not run")
        return EXIT_REFUSED
    try:
        out = _socket.socket(fileno=pair)
        out.sendmsg([b"L"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, listener.to_bytes(4, sys.byteorder))])
        out.close()
        os.close(listener)
    except OSError as e:
        _say(f"nexus: the Unix-socket supervisor cannot be reached ({e}): the command was not run")
        return EXIT_REFUSED
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        _say(f"nexus: cannot run {argv[0]}: {e}")
    return EXIT_REFUSED


# --------------------------------------------------------------------------- outside: the supervisor


def unix_path(addr: bytes) -> str | None:
    """The absolute, normalised path of a ``sockaddr_un``; None for an abstract, unnamed or relative one."""
    if len(addr) <= 2:
        return None
    raw = addr[2 : 2 + SUN_PATH_MAX].split(b"\0", 1)[0]
    if not raw.startswith(b"/") or addr[2] == 0:
        return None
    return os.path.normpath(os.fsdecode(raw))


def sockaddr_un(path: str) -> bytes:
    raw = os.fsencode(path)
    if len(raw) >= SUN_PATH_MAX:
        raise OSError(errno.ENAMETOOLONG, "socket path too long")
    return AF_UNIX.to_bytes(2, sys.byteorder) + raw + b"\0"


class Supervisor:
    """Answers the listener's notifications: each ``connect`` in a thread of its own (a TCP connect may
    block), at most ``MAX_HANDLERS`` at once."""

    def __init__(self, listener: int, allowed: list[str]) -> None:
        self.listener = listener
        self.allowed = {os.path.normpath(p) for p in allowed if p.startswith("/")}
        self.libc = _libc()
        self.slots = threading.BoundedSemaphore(MAX_HANDLERS)

    def serve(self) -> None:
        """Until the listener fails (the sandbox is gone): receive, hand each notification to a thread."""
        while True:
            buf = bytearray(_NOTIF.size)
            try:
                fcntl.ioctl(self.listener, IOCTL_RECV, buf, True)
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno == errno.ENOENT:  # the caller went away before we read it
                    continue
                return
            notif = _NOTIF.unpack(buf)
            if not self.slots.acquire(blocking=False):
                self.respond(notif[0], errno.EAGAIN)
                continue
            try:
                threading.Thread(target=self._handle, args=(notif,), daemon=True).start()
            except BaseException:  # no thread to be had: answered at once, never left waiting
                self.slots.release()
                self.respond(notif[0], errno.EAGAIN)

    def _handle(self, notif: tuple[int, ...]) -> None:
        try:
            self.respond(notif[0], self.decide(notif))
        except BaseException:  # never answered is a stuck caller: answer refused
            self.respond(notif[0], errno.EACCES)
        finally:
            self.slots.release()

    def decide(self, notif: tuple[int, ...]) -> int:
        """0 when connected, else the errno the sandboxed ``connect`` returns."""
        ident, pid, args = notif[0], notif[1], notif[6:12]
        fd_number, address, length = ctypes.c_int32(args[0] & 0xFFFFFFFF).value, args[1], args[2] & 0xFFFFFFFF
        if not 0 < length <= MAX_ADDR:
            return errno.EINVAL
        pidfd = self.pidfd(pid)
        if pidfd < 0:
            return errno.EACCES
        try:
            if not self.valid(ident):  # pidfd refers to the caller: it still waits in this notification
                return errno.EACCES
            sock = self.libc.syscall(SYS_PIDFD_GETFD, pidfd, fd_number, 0)
            if sock < 0:
                return ctypes.get_errno() or errno.EBADF
        finally:
            os.close(pidfd)
        try:
            addr = self.read(pid, address, length)
            if addr is None or not self.valid(ident):
                return errno.EFAULT if addr is None else errno.EACCES
            if self.domain(sock) == AF_UNIX:  # the socket's own family: the address's may lie
                path = unix_path(addr)
                if path is None or path not in self.allowed:
                    return errno.EACCES
                addr = sockaddr_un(path)
            return self.connect(sock, addr)
        finally:
            os.close(sock)

    def pidfd(self, tid: int) -> int:
        """A pidfd for the thread that called (the notification names a thread): the thread itself where
        the kernel can (``PIDFD_THREAD``, Linux 6.9), else its process, whose descriptor table its threads
        share. -1 when neither can be had."""
        fd = int(self.libc.syscall(SYS_PIDFD_OPEN, tid, PIDFD_THREAD))
        if fd >= 0:
            return fd
        try:
            with open(f"/proc/{tid}/status", "rb") as f:
                tgid = next(int(line.split()[1]) for line in f if line.startswith(b"Tgid:"))
        except (OSError, StopIteration, ValueError, IndexError):
            return -1
        return int(self.libc.syscall(SYS_PIDFD_OPEN, tgid, 0))

    def domain(self, sock: int) -> int:
        value = ctypes.c_int(0)
        size = ctypes.c_uint32(ctypes.sizeof(value))
        if self.libc.getsockopt(sock, _socket.SOL_SOCKET, SO_DOMAIN, ctypes.byref(value), ctypes.byref(size)) != 0:
            raise OSError(ctypes.get_errno(), "getsockopt(SO_DOMAIN)")
        return value.value

    def connect(self, sock: int, addr: bytes) -> int:
        buf = ctypes.create_string_buffer(addr, len(addr))
        if self.libc.connect(sock, buf, len(addr)) == 0:
            return 0
        return ctypes.get_errno() or errno.EACCES

    @staticmethod
    def read(pid: int, address: int, length: int) -> bytes | None:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.pread(fd, length, address)
        except (OSError, OverflowError):
            return None
        finally:
            os.close(fd)
        return data if len(data) == length else None

    def valid(self, ident: int) -> bool:
        try:
            fcntl.ioctl(self.listener, IOCTL_ID_VALID, struct.pack("=Q", ident))
        except OSError:
            return False
        return True

    def respond(self, ident: int, error: int) -> None:
        with contextlib.suppress(OSError):  # the caller is gone (a signal ended its wait): nothing to answer
            fcntl.ioctl(self.listener, IOCTL_SEND, _RESP.pack(ident, 0, -error if error else 0, 0))


def _receive_listener(pair: _socket.socket, child: int) -> int | None:
    """The listener the loader sends; None if the pair closes first (the loader failed or never ran)."""
    poller = select.poll()
    poller.register(pair.fileno(), select.POLLIN)
    while True:
        if poller.poll(200):
            try:
                _msg, ancdata, _flags, _addr = pair.recvmsg(1, _socket.CMSG_SPACE(4))
            except InterruptedError:
                continue
            for level, kind, data in ancdata:
                if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(data) >= 4:
                    return int.from_bytes(data[:4], sys.byteorder)
            return None
        if os.waitpid(child, os.WNOHANG)[0]:
            return None


def supervise(allowed: list[str], argv: list[str]) -> int:
    """Run ``argv`` (bubblewrap) as a child and answer its sandbox's ``connect`` calls; its status is ours."""
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    os.set_inheritable(theirs.fileno(), True)
    argv = list(argv)
    if PLACEHOLDER in argv:
        argv[argv.index(PLACEHOLDER)] = str(theirs.fileno())
    child = os.fork()
    if child == 0:
        try:
            ours.close()
            os.execv(argv[0], argv)
        except BaseException as e:
            _say(f"nexus: cannot start the sandbox ({argv[0]}): {e}")
        os._exit(EXIT_REFUSED)
    theirs.close()

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.kill(child, signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    listener = _receive_listener(ours, child)
    ours.close()
    if listener is not None:
        threading.Thread(target=Supervisor(listener, allowed).serve, daemon=True).start()
    while True:
        try:
            _pid, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):  # die the same way, so the shell above sees what bubblewrap's death was
        dead = os.WTERMSIG(status)
        signal.signal(dead, signal.SIG_DFL)
        os.kill(os.getpid(), dead)
        return 128 + dead
    return os.WEXITSTATUS(status)


def main(args: list[str]) -> int:
    if len(args) >= 5 and args[0] == "load" and args[3] == "--":
        return load(args[1], args[2], args[4:])
    if len(args) >= 3 and args[0] == "supervise" and "--" in args:
        split = args.index("--")
        if split + 1 < len(args):
            return supervise(args[1:split], args[split + 1 :])
    _say("usage: python -I -S -c SOURCE supervise PATH... -- ARGV... | load FD PROGRAM_HEX -- ARGV...")
    return EXIT_REFUSED


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
