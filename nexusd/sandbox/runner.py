"""``nexusctl run``: get a plan, run it, scrub what it planted, pass the exit code on.

The plan comes from the daemon (it holds the policy and the probe). When no daemon answers on the
default socket (``NEXUS_SOCKET``, else the per-user one), the runner builds the same plan itself from
the policy files of the same defaults and a probe in its own context, so ``nexusctl run`` works without
a daemon and never runs less confined because the daemon is down. A socket named explicitly is a
particular daemon with its own policy: when it cannot be reached the command is refused, never planned
with another policy. (Agents' calls do not come through here: see ``nexusd.sandbox.wrapper``.)
"""

from __future__ import annotations

import fcntl
import io
import os
import signal
import stat
import subprocess
import sys
import threading
from typing import IO, TextIO

from nexusd import locations
from nexusd.protocol import SandboxPlan, SandboxPlanReply
from nexusd.sandbox import netjoin, violations
from nexusd.sandbox.scrub import after

EXIT_REFUSED = 126  # like a shell's "found but cannot execute": the command did not run


def local_plan(command: str, cwd: str, workspace: str | None) -> SandboxPlanReply:
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import plan_command
    from nexusd.sandbox.probe import probe

    sock_dir = os.path.abspath(locations.socket_path().parent)
    store = PolicyStore(
        config_dir=locations.config_dir().absolute(),
        state_dir=locations.state_dir().absolute(),
        managed_dir=locations.MANAGED_POLICY.absolute(),
        protected_dirs=(sock_dir,),
    )
    errors = store.load()
    if errors:
        return SandboxPlanReply(allowed=False, reason="the policy does not load: " + "; ".join(errors))
    return plan_command(command, cwd, store, probe(), workspace=workspace)


def fetch_plan(command: str, cwd: str, workspace: str | None, socket: str | None) -> SandboxPlanReply:
    from nexusd.client import Client, DaemonUnreachable, NexusClientError

    query = SandboxPlan(command=command, cwd=cwd, workspace=workspace)
    try:
        with Client(socket_path=socket, role="agent", name="nexus-sandbox", timeout=10.0) as c:
            reply = c.call(query)
    except DaemonUnreachable as e:
        if socket is not None and os.path.abspath(socket) != os.path.abspath(locations.socket_path()):
            return SandboxPlanReply(
                allowed=False,
                reason=f"the daemon on {socket} cannot be reached ({e}); not planning with another policy",
            )
        return local_plan(command, cwd, workspace)
    except NexusClientError as e:
        return SandboxPlanReply(allowed=False, reason=f"the daemon did not give a plan: {e}")
    if not isinstance(reply, SandboxPlanReply):
        return SandboxPlanReply(allowed=False, reason=f"the daemon answered {type(reply).__name__}, not a plan")
    return reply


def execute(
    plan: SandboxPlanReply,
    *,
    stdout: IO[bytes] | None = None,
    err: TextIO | None = None,
    command: str | None = None,
    cwd: str | None = None,
    socket: str | None = None,
) -> int:
    """Run the plan with our stdio (``stdout``/``err``: other streams, for tests); the command's exit code
    is ours. Signals we get go to the sandbox (bwrap's --die-with-parent takes it down if we die instead).
    The command's error output passes through a tap: refusals seen there and files it planted are reported
    to the daemon (``violations``) when ``command`` is given."""
    err = err or sys.stderr
    if not plan.allowed or not plan.argv:
        print(f"nexus: refused to run the command: {plan.reason or 'no plan'}", file=err, flush=True)
        return EXIT_REFUSED
    if plan.backend is None:
        print(f"nexus: warning: {plan.reason}", file=err, flush=True)
    argv = list(plan.argv)
    fds: tuple[int, ...] = ()
    at = netjoin.words_at(argv)
    if at is not None:  # a filtered network: bubblewrap reports to the daemon and waits for its ports
        fds = port_fds(plan, err)
        argv[at + 1], argv[at + 3] = str(fds[0]), str(fds[1])
    try:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, pass_fds=fds)
    except OSError as e:
        print(f"nexus: cannot start the sandbox ({plan.argv[0]}): {e}", file=err, flush=True)
        return EXIT_REFUSED
    finally:
        for fd in fds:
            os.close(fd)
    tap = violations.StderrTap()
    pump = threading.Thread(target=_pump, args=(proc, err, tap), daemon=True)
    pump.start()

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        pump.join(5)
        found = tap.violations() + after(plan.scrub, plan.scrub_below, plan.protected_before, err)
    if found and command is not None:
        violations.report(
            found, command=command, cwd=cwd or os.getcwd(), socket=socket, exit_code=128 - rc if rc < 0 else rc
        )
    return 128 - rc if rc < 0 else rc


def _pump(proc: subprocess.Popen[bytes], err: TextIO, tap: violations.StderrTap) -> None:
    """The command's error output to ours, unchanged, and into the tap."""
    assert isinstance(proc.stderr, io.BufferedReader)  # read1: what is there now, not a full 64 KiB
    raw = getattr(err, "buffer", None) if err is sys.stderr else None
    while chunk := proc.stderr.read1(65536):
        tap.feed(chunk)
        try:
            if raw is not None:
                raw.write(chunk)
                raw.flush()
            else:
                err.write(chunk.decode("utf-8", "replace"))
                err.flush()
        except (OSError, ValueError):
            pass  # our stderr went away: the command still runs to its end


def port_fds(plan: SandboxPlanReply, err: TextIO) -> tuple[int, int]:
    """The descriptors for bubblewrap's ``--info-fd`` and ``--block-fd``: the plan's FIFOs, which the daemon
    serves (it makes the proxy's ports inside, then lets the command start), or /dev/null twice when it
    gave none (the command then starts at once, with no network)."""
    if plan.proxy_info and plan.proxy_go:
        fds: list[int] = []
        try:
            fds.append(os.open(plan.proxy_info, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW))
            fds.append(os.open(plan.proxy_go, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW))
            if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in fds):
                raise OSError("not FIFOs")
            os.set_blocking(fds[1], True)  # bubblewrap waits on it for the daemon's byte (or its end)
            return _high(fds[0]), _high(fds[1])
        except OSError as e:
            for fd in fds:
                os.close(fd)
            why = f"cannot open the proxy's FIFOs ({e})"
    else:
        why = "no nexusd proxy (no daemon)"
    print(f"nexus: {why}: the sandboxed command has no network", file=err, flush=True)
    return _high(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)), _high(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))


def _high(fd: int) -> int:
    """``fd`` moved above 9: the plan's shell opens the seccomp filter on 3 (``3<FILE``), over anything there."""
    if fd > 9:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(fd)


def run(command: str, *, cwd: str | None = None, workspace: str | None = None, socket: str | None = None) -> int:
    cwd = os.path.abspath(cwd or os.getcwd())
    if workspace is not None:
        workspace = os.path.abspath(workspace)
    return execute(fetch_plan(command, cwd, workspace, socket), command=command, cwd=cwd, socket=socket)
