"""Processes under measurement: a daemon or the echo floor on a temporary socket, and their memory.

The daemon is started the way the test fixtures start it (``python -m nexusd.cli.daemon_main`` with
``NEXUS_*`` locations under a fresh ``/tmp`` directory), so a benchmark never touches a person's real
configuration, policy or audit log.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from nexusd import protocol

# The user-layer policy every rule-decided scenario relies on (see nexusd/bench/scenarios.py); the test
# runners are allowed the way a person working with an agent allows them (the agent scenario runs them).
BENCH_POLICY = """\
[permissions]
allow = ["Bash(echo *)", "Bash(pytest *)", "Bash(python -m pytest *)", "Bash(ruff check *)"]
ask = ["Bash(git push *)"]
deny = ["Bash(rm *)"]

[limits]  # the load generator is a runaway agent by design
calls_per_minute = 0
repeats_per_minute = 0

[trust]  # its thousands of sessions measure decisions, not the new-session question a UI would get
ask_new_sessions = false
"""

_UVLOOP_BOOT = (
    "import sys, uvloop; uvloop.install(); sys.argv[0] = 'nexusd'; "
    "from nexusd.cli.daemon_main import main; sys.exit(main())"
)


def raise_nofile(wanted: int) -> int:
    """Raise this process's open-file soft limit toward ``wanted`` (children inherit it); returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid``, None if it is gone or unreadable."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used so far (``/proc/<pid>/stat`` utime + stime), None if gone.

    The kernel counts in clock ticks (10 ms), so differences are meaningful over cells of a second or more."""
    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(t.user + t.system)


class RssSampler:
    """Samples a process's RSS on a thread every ``interval`` seconds; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            value = rss_bytes(self.pid)
            if value is not None:
                self.samples.append(value)
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> int | None:
        return max(self.samples) if self.samples else None


def hello_once(path: Path, timeout: float = 1.0) -> bool:
    """True when the socket accepts a connection and answers a hello with a welcome."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(
                protocol.encode(protocol.Hello(proto=protocol.PROTOCOL_VERSION, role="admin", name="nexus-bench"))
            )
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    return False
                buf += chunk
            return isinstance(protocol.decode_server(buf), protocol.Welcome)
    except (OSError, ValueError):
        return False


def line_echo_once(path: Path, timeout: float = 1.0) -> bool:
    """True when the socket answers one line with one line (the echo server's readiness)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(b'{"type":"ping"}\n')
            return s.recv(65536).endswith(b"\n")
    except OSError:
        return False


@dataclass
class Spawned:
    """A process we started on a temporary socket; ``ready_s`` is spawn-to-first-good-reply."""

    socket: Path
    proc: subprocess.Popen[bytes]
    root: Path
    env: dict[str, str]
    ready_s: float
    log: Path
    config_dir: Path = field(default_factory=Path)
    ready_cpu_s: float | None = None  # its user + system CPU up to ready: steadier than wall time on a busy host

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _wait_ready(
    proc: subprocess.Popen[bytes], path: Path, probe: object, timeout: float, log: Path, t0: float
) -> float:
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited {proc.returncode}:\n{_tail(log)}")
        if path.exists() and probe(path):  # type: ignore[operator]
            return time.perf_counter() - t0
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"not ready within {timeout}s:\n{_tail(log)}")


def _tail(log: Path, n: int = 4000) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def bench_env(root: Path) -> dict[str, str]:
    """Environment that points every nexus program at ``root`` instead of the user's real locations."""
    env = dict(os.environ)
    env.update(
        NEXUS_SOCKET=str(root / "run" / "nexusd.sock"),
        NEXUS_CONFIG_DIR=str(root / "config"),
        NEXUS_STATE_DIR=str(root / "state"),
        NEXUS_MANAGED_DIR=str(root / "managed"),
    )
    for var in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        env.pop(var, None)
    return env


def cpu_split() -> tuple[set[int], set[int]] | None:
    """(server CPUs, client CPUs) to keep the server under test and the load generator apart, or None
    with fewer than two usable CPUs (or no affinity API)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(cpus) < 2:
        return None
    return {cpus[-1]}, set(cpus[:-1])


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` onto ``cpus`` (a thread started before the call keeps its own mask)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def make_project(path: Path) -> Path:
    """Make ``path`` look like a fresh ``git init`` (without needing git): agents work in repositories,
    and the gate's workspace lookup stops at the first ``.git`` it finds going up from the cwd."""
    git = path / ".git"
    for d in ("objects", "refs/heads", "refs/tags"):
        (git / d).mkdir(parents=True, exist_ok=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
    )
    return path


def start_daemon(
    policy: str | None = BENCH_POLICY,
    args: Sequence[str] = (),
    *,
    uvloop: bool = False,
    timeout: float = 20.0,
    extra_env: dict[str, str] | None = None,
) -> Spawned:
    """Start ``nexusd`` on a fresh temporary socket with ``policy`` as the user layer; wait for a welcome."""
    root = Path(tempfile.mkdtemp(prefix="nxb", dir="/tmp"))
    for d in ("run", "config", "state", "managed", "workspace"):
        (root / d).mkdir(mode=0o700)
    make_project(root / "workspace")
    env = bench_env(root)
    if extra_env:
        env.update(extra_env)
    if policy is not None:
        (root / "config" / "policy.toml").write_text(policy)
    sock = Path(env["NEXUS_SOCKET"])
    log = root / "nexusd.log"
    cmd = [sys.executable, "-c", _UVLOOP_BOOT] if uvloop else [sys.executable, "-m", "nexusd.cli.daemon_main"]
    cmd += list(args)
    with open(log, "ab") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        ready = _wait_ready(proc, sock, hello_once, timeout, log, t0)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Spawned(sock, proc, root, env, ready, log, root / "config", cpu_seconds(proc.pid))


def start_echo(*, uvloop: bool = False, timeout: float = 20.0) -> Spawned:
    """Start the bare echo server (``nexusd.bench.echo``) on a fresh temporary socket."""
    root = Path(tempfile.mkdtemp(prefix="nxe", dir="/tmp"))
    sock = root / "echo.sock"
    log = root / "echo.log"
    cmd = [sys.executable, "-m", "nexusd.bench.echo", str(sock)] + (["--uvloop"] if uvloop else [])
    with open(log, "ab") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        ready = _wait_ready(proc, sock, line_echo_once, timeout, log, t0)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Spawned(sock, proc, root, dict(os.environ), ready, log)


@contextlib.contextmanager
def daemon(policy: str | None = BENCH_POLICY, args: Sequence[str] = (), **kw: object) -> Iterator[Spawned]:
    d = start_daemon(policy, args, **kw)  # type: ignore[arg-type]
    try:
        yield d
    finally:
        d.cleanup()


@contextlib.contextmanager
def echo_server(**kw: object) -> Iterator[Spawned]:
    e = start_echo(**kw)  # type: ignore[arg-type]
    try:
        yield e
    finally:
        e.cleanup()
