"""``nexusctl run`` and the agent launcher: get a plan, run it, scrub what it planted, pass the exit code on.

The plan comes from the daemon (it holds the policy and the probe). When no daemon answers, the
runner builds the same plan itself from the policy files and a probe in its own context, so
``nexusctl run`` works without a daemon and never runs less confined because the daemon is down.
Standard library plus our protocol and client on the fast path; the policy store only on the fallback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import IO, TextIO

from nexusd import locations
from nexusd.protocol import SandboxPlan, SandboxPlanQuery
from nexusd.sandbox.gitscrub import scrub

EXIT_REFUSED = 126  # like a shell's "found but cannot execute": the command did not run


def local_plan(command: str, cwd: str, workspace: str | None) -> SandboxPlan:
    from nexusd.policy.store import PolicyStore
    from nexusd.sandbox.plan import plan_command
    from nexusd.sandbox.probe import probe

    sock_dir = str(locations.socket_path().parent)
    store = PolicyStore(config_dir=locations.config_dir(), state_dir=locations.state_dir(),
                        managed_dir=locations.MANAGED_POLICY, protected_dirs=(sock_dir,))
    errors = store.load()
    if errors:
        return SandboxPlan(allowed=False, reason="the policy does not load: " + "; ".join(errors))
    return plan_command(command, cwd, store, probe(), workspace=workspace)


def fetch_plan(command: str, cwd: str, workspace: str | None, socket: str | None) -> SandboxPlan:
    from nexusd.client import Client, DaemonUnreachable, NexusClientError

    query = SandboxPlanQuery(command=command, cwd=cwd, workspace=workspace)
    try:
        with Client(socket_path=socket, role="agent", name="nexus-sandbox", timeout=10.0) as c:
            reply = c.call(query)
    except DaemonUnreachable:
        return local_plan(command, cwd, workspace)
    except NexusClientError as e:
        return SandboxPlan(allowed=False, reason=f"the daemon did not give a plan: {e}")
    if not isinstance(reply, SandboxPlan):
        return SandboxPlan(allowed=False, reason=f"the daemon answered {type(reply).__name__}, not a plan")
    return reply


def execute(plan: SandboxPlan, *, stdout: IO[bytes] | None = None, err: TextIO | None = None) -> int:
    """Run the plan with our stdio (``stdout``/``err``: other streams, for tests); the command's exit code
    is ours. Signals we get go to the sandbox (bwrap's --die-with-parent takes it down if we die instead)."""
    err = err or sys.stderr
    if not plan.allowed or not plan.argv:
        print(f"nexus: refused to run the command: {plan.reason or 'no plan'}", file=err, flush=True)
        return EXIT_REFUSED
    if plan.backend is None:
        print(f"nexus: warning: {plan.reason}", file=err, flush=True)
    argv, channel = list(plan.argv), None
    if plan.proxy_fd_arg is not None:
        channel = proxy_channel(plan, err)
        argv[plan.proxy_fd_arg] = str(channel) if channel is not None else "-1"
    try:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=None if err is sys.stderr else err,
                                pass_fds=(channel,) if channel is not None else ())
    except OSError as e:
        print(f"nexus: cannot start the sandbox ({plan.argv[0]}): {e}", file=err, flush=True)
        return EXIT_REFUSED
    finally:
        if channel is not None:
            os.close(channel)

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        planted: list[str] = list(plan.scrub)
        if plan.scrub_below:
            from nexusd.sandbox.nested import planted as nested_planted

            before = frozenset(plan.protected_before)
            for root in plan.scrub_below:
                planted += [p for p in nested_planted(root, before) if p not in planted]
        if planted:
            removed, failed = scrub(planted)
            for path in removed:
                print(f"nexus: removed {path}, planted by the sandboxed command", file=err, flush=True)
            for path in failed:
                print(f"nexus: WARNING: could not remove {path}, planted by the sandboxed command", file=err,
                      flush=True)
    return 128 - rc if rc < 0 else rc


def proxy_channel(plan: SandboxPlan, err: TextIO) -> int | None:
    """Our connection to the daemon's proxy broker, for the sandbox's bridge (nexusd/sandbox/proxy.py), as a
    descriptor numbered above 9 (3 carries the seccomp filter). None: the command runs with no network."""
    import socket

    if not plan.proxy_socket or not plan.proxy_token:
        print("nexus: no nexusd proxy (no daemon): the sandboxed command has no network", file=err, flush=True)
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect(plan.proxy_socket)
        s.sendall(plan.proxy_token.encode("ascii") + b"\n")
        if s.recv(3) != b"ok\n":
            raise OSError("the proxy refused the token")
        s.settimeout(None)
        import fcntl

        return fcntl.fcntl(s.fileno(), fcntl.F_DUPFD, 10)  # handed on through pass_fds only
    except OSError as e:
        print(f"nexus: cannot reach the nexusd proxy ({e}): the sandboxed command has no network", file=err,
              flush=True)
        return None
    finally:
        s.close()


def run(command: str, *, cwd: str | None = None, workspace: str | None = None, socket: str | None = None) -> int:
    cwd = os.path.abspath(cwd or os.getcwd())
    if workspace is not None:
        workspace = os.path.abspath(workspace)
    return execute(fetch_plan(command, cwd, workspace, socket))
