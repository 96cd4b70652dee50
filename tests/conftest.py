"""Shared fixtures: a real ``nexusd`` process on a temporary socket, spoken to over the wire."""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis: "quick" (the default) for the edit-and-test loop, "ci" (HYPOTHESIS_PROFILE=ci; scripts/test uses it)
# for the full run. Neither has a deadline or the too_slow health check: both time the machine, and on two
# cores shared by `pytest -n 8` any example can be slow; speed is the benchmark's business, never a test's.
QUICK_EXAMPLES, CI_EXAMPLES = 25, 150
_NOT_TIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("quick", max_examples=QUICK_EXAMPLES, **_NOT_TIMED)
settings.register_profile("ci", max_examples=CI_EXAMPLES, print_blob=True, **_NOT_TIMED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))

# Claude Code's permission rules are imported by default (docs/POLICY.md): no test may pick up the host user's
# ~/.claude/settings.json (CLAUDE_CONFIG_DIR is where Claude Code, and so nexusd, reads them)
os.environ["CLAUDE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="nx-claude-")
atexit.register(shutil.rmtree, os.environ["CLAUDE_CONFIG_DIR"], ignore_errors=True)  # (one per test process)


def examples(usual: int) -> int:
    """How many examples a property that needs more (or fewer) than the others runs under the loaded profile:
    ``usual`` at Hypothesis's usual size (100 per test), scaled like every other test (quick: a quarter, ci: 1.5x)."""
    return max(1, round(usual * settings.default.max_examples / 100))


# The files that take longest, longest first: the sum of their tests' durations under ``-n 4`` on the 2-core
# machine (``--durations=0``, 2026-11-28), then whole directories for files not listed. ``-n 4 --dist loadfile
# --no-loadscope-reorder`` (scripts/test) hands whole files to the workers in this order, so the workers end
# together on small files instead of one of them finishing a long file alone. (Without
# ``--no-loadscope-reorder`` xdist orders files by their number of tests instead, and the longest file, 23
# tests of real agent CLIs, started last.)
LONGEST_FIRST = (
    "tests/e2e/test_e2e_opencode.py",
    "tests/e2e/test_agents.py",
    "tests/daemon/test_burst_hostile.py",
    "tests/e2e/test_e2e_acp.py",
    "tests/daemon/test_server.py",
    "tests/clients/web/test_web_answering.py",
    "tests/sandbox/test_workflows.py",
    "tests/test_first_hour.py",
    "tests/oracle/test_oracle.py",
    "tests/clients/tui/test_tui_app.py",
    "tests/clients/web/test_web_browser.py",
    "tests/sandbox/test_network.py",
    "tests/undo/test_watch.py",
    "tests/e2e/test_e2e_copilot.py",
    "tests/clients/web/test_web_security.py",
    "tests/daemon/test_grants.py",
    "tests/daemon/test_hook_race.py",
    "tests/sandbox/test_preview_daemon.py",
    "tests/undo/test_properties.py",
    "tests/daemon/test_edit_answer.py",
    "tests/daemon/test_audit_durable.py",
    "tests/daemon/test_notify_person.py",
    "tests/sandbox/test_wrapper.py",
    "tests/daemon/test_parallel.py",
    "tests/daemon/test_burst.py",
    "tests/bench/test_sandbox_bench.py",
    "tests/daemon/test_audit_chain.py",
    "tests/clients/tui/test_tui_answering.py",
    "tests/test_protocol.py",
    "tests/sandbox/test_runner.py",
    "tests/clients/test_hook.py",
    "tests/test_attacks.py",
    "tests/clients/tui/test_tui_snapshots.py",
    "tests/policy/test_gate.py",
    "tests/sandbox/test_daemon_paths.py",
    "tests/daemon/test_fail_closed.py",
    "tests/bench/test_runner.py",
    "tests/clients/test_cursor.py",
    "tests/daemon/test_socket_watch.py",
    "tests/daemon/test_explain.py",
    "tests/cli/test_ctl_daemon.py",
    "tests/cli/test_ctl_sandbox.py",
    "tests/undo/test_daemon_undo.py",
    "tests/daemon/test_hold_and_rule_check.py",
    "tests/e2e/",
    "tests/oracle/",
    "tests/clients/",
    "tests/sandbox/",
    "tests/undo/",
    "tests/daemon/",
)


def _schedule_rank(item: pytest.Item) -> int:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every e2e test is also ``slow`` (real agent CLIs under node, each a few to tens of seconds), so
    ``-m "not slow"`` alone is the quick loop. The longest files go first (``LONGEST_FIRST``; the sort is
    stable, so each file's tests keep their order)."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=_schedule_rank)


@pytest.fixture
def anyio_backend() -> str:
    # The trio on this machine is too old for anyio 4: run async tests on asyncio only.
    return "asyncio"


_SHORT_ROOT: Path | None = None


def short_tmpdir() -> Path:
    """AF_UNIX paths are limited to ~107 bytes; pytest's tmp_path can be longer. Every such directory of
    this test process lives under one ``/tmp/nx…`` parent that is removed when the process exits: one per
    daemon test, never removed, filled the disk over a few hundred runs."""
    global _SHORT_ROOT
    if _SHORT_ROOT is None:
        _SHORT_ROOT = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
        _SHORT_ROOT.chmod(0o711)  # traversable, not listable: a test may open its own dir to another uid
        atexit.register(shutil.rmtree, _SHORT_ROOT, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=_SHORT_ROOT, prefix=""))


def pytest_unconfigure(config: pytest.Config) -> None:
    """This test process's ``/tmp`` roots, removed here as well as at exit: an xdist worker can end without
    running its exit handlers, and every suite run left three of each behind."""
    for d in (os.environ.get("CLAUDE_CONFIG_DIR"), _SHORT_ROOT):
        if d:
            shutil.rmtree(d, ignore_errors=True)


@dataclass
class DaemonHandle:
    """A running daemon and the environment a client process needs to reach it."""

    root: Path
    socket: Path
    config_dir: Path
    state_dir: Path
    managed_dir: Path
    env: dict[str, str]
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)
    # The daemon probes the sandbox, and the default is sandbox-first where it works. Tests of the gate
    # alone pin it off in their policy (``GATE_ONLY``, appended by ``write_policy`` unless the text has a
    # [sandbox] table of its own); ``daemon_factory(sandbox=True)`` keeps the default.
    gate_only: bool = True
    # A new session in a workspace nobody trusted asks "let it work here?" when a UI is connected (nexusd's
    # default). Tests pin it off (``NO_TRUST_QUESTION``) unless their policy has a [trust] table or they ask
    # for the default with ``daemon_factory(trust_question=True)``.
    trust_question: bool = False

    def __post_init__(self) -> None:
        self.log = self.root / "nexusd.log"

    def start(self, timeout: float = 10.0, nofile: int | None = None) -> DaemonHandle:
        """``nofile``: a hard RLIMIT_NOFILE for the daemon (fault tests: descriptor exhaustion)."""
        self.spawn(nofile)
        return self.wait_listening(timeout)

    def wait_listening(self, timeout: float = 10.0) -> DaemonHandle:
        """Until the started daemon (``proc``) listens on ``socket``; raises if it exits or never does."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nexusd exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(self.socket))
                    # The listener must be this daemon's (the kernel names the process that called listen):
                    # a socket file that accepts may still be a killed daemon's, held by a child it forked
                    # that has not yet reached exec, and that listener resets what queued on it.
                    pid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                if pid == self.proc.pid:
                    return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"nexusd did not listen within {timeout}s:\n{self.log.read_text()}")

    def spawn(self, nofile: int | None = None) -> None:
        """The daemon's process started, its output into ``log``; not waited for (``start`` waits)."""

        def limit() -> None:
            if nofile is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nexusd.cli.daemon_main", *self.args],
                env=self.env,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=limit if nofile is not None else None,
            )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # every thread's stack into the log (PYTHONFAULTHANDLER=1), then the log into the test's report
                self.proc.send_signal(signal.SIGABRT)
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                print(f"nexusd did not stop within {timeout}s of {signal.Signals(sig).name}; its log:", file=sys.stderr)
                print(self.log.read_text(errors="replace")[-20000:], file=sys.stderr)
        rc = self.proc.returncode
        self.proc = None
        self._wait_for_lock(timeout)
        return rc

    def _wait_for_lock(self, timeout: float) -> None:
        """Until no process holds the daemon's socket lock: a child the daemon forked keeps the lock and the
        listener until it reaches exec, after the daemon itself is gone (a kill -9 does not wait for it, as a
        service manager's stop waits for the whole unit). A daemon started again before then would find them
        held and exit ("another nexusd is running")."""
        try:
            fd = os.open(self.socket.with_name(self.socket.name + ".lock"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # never bound
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return  # closing the descriptor drops it
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"a stopped nexusd's socket lock still held after {timeout}s") from None
                    time.sleep(0.01)
        finally:
            os.close(fd)

    def restart(self) -> DaemonHandle:
        self.stop()
        return self.start()

    def write_policy(self, text: str, name: str = "policy.toml") -> Path:
        """Write the user-layer policy file (config_dir/policy.toml), pinned gate-only unless told otherwise."""
        path = self.config_dir / name
        if name == "policy.toml":
            if self.gate_only:
                text = gate_only_policy(text)
            if not self.trust_question and not _TRUST_TABLE.search(text):
                text += NO_TRUST_QUESTION
        path.write_text(text)
        return path


GATE_ONLY = "\n[sandbox]\nenabled = false  # gate-only: this test is about the permission gate alone\n"
_SANDBOX_TABLE = re.compile(r"^\s*\[\s*sandbox\s*[\].]", re.MULTILINE)
NO_TRUST_QUESTION = "\n[trust]\nask_new_sessions = false  # this test is not about the new-session question\n"
_TRUST_TABLE = re.compile(r"^\s*\[\s*trust\s*\]", re.MULTILINE)


def gate_only_policy(text: str) -> str:
    """``text`` with ``[sandbox] enabled = false`` appended, unless it says something about the sandbox."""
    return text if _SANDBOX_TABLE.search(text) else text + GATE_ONLY


@pytest.fixture
def daemon_factory() -> Iterator[Callable[..., DaemonHandle]]:
    """``start(policy=None, args=(), env=None, pending_timeout=None, autostart=True, sandbox=False,
    trust_question=False)``.

    ``sandbox=False`` (the default here): the policy pins ``[sandbox] enabled = false`` (gate-only) unless
    it has a [sandbox] table; True keeps nexusd's own default (sandbox-first where the sandbox works)."""
    handles: list[DaemonHandle] = []

    def make(
        policy: str | None = None,
        args: tuple[str, ...] | list[str] = (),
        env: dict[str, str] | None = None,
        pending_timeout: float | None = None,
        autostart: bool = True,
        sandbox: bool = False,
        trust_question: bool = False,
    ) -> DaemonHandle:
        root = short_tmpdir()
        run = root / "run"
        cfg, state, managed = root / "config", root / "state", root / "managed"
        for d in (cfg, state, managed):
            d.mkdir(parents=True)
        e = dict(os.environ)
        e.update(
            NEXUS_SOCKET=str(run / "nexusd.sock"),
            NEXUS_CONFIG_DIR=str(cfg),
            NEXUS_STATE_DIR=str(state),
            NEXUS_MANAGED_DIR=str(managed),
            PYTHONUNBUFFERED="1",
            PYTHONFAULTHANDLER="1",  # a daemon that will not stop is sent SIGABRT: its stacks go to the log
        )
        e.pop("NOTIFY_SOCKET", None)
        # Claude Code's permission rules are imported by default: never the host user's in a test daemon
        e["CLAUDE_CONFIG_DIR"] = str(root / "claude")
        e.pop("LISTEN_FDS", None)
        if env:
            e.update(env)
        a = ["--log-level", "debug", *args]
        if pending_timeout is not None:
            a += ["--pending-timeout", str(pending_timeout)]
        h = DaemonHandle(
            root, run / "nexusd.sock", cfg, state, managed, e, a, gate_only=not sandbox, trust_question=trust_question
        )
        if policy is not None or not sandbox or not trust_question:
            h.write_policy(policy or "")
        handles.append(h)
        return h.start() if autostart else h

    make.handles = handles  # type: ignore[attr-defined]  # (for the failure report below)
    yield make
    for h in handles:
        h.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A failed test that ran daemons carries the end of each daemon's log in its report: the log lives in
    the test's temporary directory, gone by the time anyone reads a CI run's failure."""
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        handles: list[DaemonHandle] = list(getattr(funcargs.get("daemon_factory"), "handles", []))
        if isinstance(funcargs.get("daemon"), DaemonHandle) and funcargs["daemon"] not in handles:
            handles.append(funcargs["daemon"])
        for i, h in enumerate(handles):
            try:
                text = h.log.read_text(errors="replace")[-6000:]
            except OSError as e:
                text = f"(unreadable: {e})"
            proc = h.proc
            now = "stopped" if proc is None else "running" if proc.poll() is None else f"exited {proc.returncode}"
            report.sections.append((f"nexusd log {i + 1} of {len(handles)}, {now} ({report.when})", text))
    return report


@pytest.fixture
def daemon(daemon_factory: Callable[..., DaemonHandle]) -> DaemonHandle:
    return daemon_factory()
