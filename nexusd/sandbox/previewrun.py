"""``python -I -m nexusd.sandbox.previewrun SPEC -- SANDBOX-ARGV...``: run, show the diff, apply or discard.

With ``[sandbox] preview = true`` the agent's wrapper script (``nexusd.sandbox.wrapper``) runs the sandbox
through this module instead of directly. It runs outside the sandbox, in the agent's environment, like the
rest of the wrapper:

1. ``Preview.start``: a private directory under the daemon's state (hidden from every sandbox), the
   workspace's fingerprints;
2. the sandbox argv on the overlay (``nexusd.sandbox.overlay``), its output passed straight through to the
   agent, signals forwarded, its exit code kept;
3. no change: one line, done. Otherwise the diff goes to the daemon as a request of the reserved tool
   ``nexus:preview``; the daemon puts it to a person (``nexusctl pending``, the TUI, the web inbox) and
   never to a rule or a mode. allow = apply, deny = discard; no answer before the deadline, a daemon that
   cannot be reached, a malformed reply or a signal: discard (fail closed);
4. one line on stderr tells the agent whether its changes were applied (and which were refused or in
   conflict), then the private directory is removed and the command's exit code is ours.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from nexusd.sandbox.netjoin import GO_FD, INFO_FD
from nexusd.sandbox.preview import Change, Preview, PreviewError, iter_lines, shown, summary

PREVIEW_TOOL = "nexus:preview"  # the daemon (nexusd.daemon.requests) never runs the engine on it: a person decides
PREVIEW_FLAG = "preview"  # the ask's flag: answered allow (apply) or deny (discard), once (nexusd.daemon.answers)
MODULE = "nexusd.sandbox.previewrun"
EXIT_REFUSED = 126
ASK_DIFF_LIMIT = 256 * 1024  # characters of diff sent to the daemon (and shown to the person)
WAIT_LIMIT = 3600.0  # seconds we wait at most for the person (the daemon's deadline comes first)


class _Interrupted(Exception):
    pass


def _say(line: str) -> None:
    print(f"nexus: preview: {line}", file=sys.stderr, flush=True)


def ask(
    spec: dict[str, Any],
    argv: list[str],
    changes: list[Change],
    diff: str,
    rc: int,
    conflicts: list[str] | None = None,
) -> tuple[bool, str]:
    """(apply?, why) from the person, through the daemon. Anything but an allow is a discard."""
    from nexusd.client import Client, NexusClientError
    from nexusd.protocol import CallInfo

    if not spec.get("socket"):  # never the environment's daemon: the agent's shell controls its environment
        return False, "no daemon to ask was named"
    if len(diff) > ASK_DIFF_LIMIT:
        diff = diff[:ASK_DIFF_LIMIT] + f"\n# ... cut at {ASK_DIFF_LIMIT} characters\n"
    call = CallInfo(
        provider=str(spec.get("provider") or "other"),
        session=str(spec.get("session") or ""),
        tool=PREVIEW_TOOL,
        input={
            "command": argv[-1] if argv else "",
            "exit_code": rc,
            "summary": summary(changes),
            "changes": [
                f"{c.kind} {c.what} {shown(c.path)}" + (f" (not applied: {c.refused})" if c.refused else "")
                for c in changes
            ][:500],
            "diff": diff,
            "conflicts": [shown(c) for c in conflicts or ()][:500],
        },
        cwd=str(spec.get("cwd") or spec["workspace"]),
        workspace=str(spec["workspace"]),
        agent_pid=os.getppid(),
    )
    try:
        with Client(socket_path=spec.get("socket"), role="agent", name="nexus-preview", timeout=10.0) as c:
            d = c.request(call, on_no_ui="ask", timeout=WAIT_LIMIT)
    except (NexusClientError, OSError, ValueError) as e:
        return False, f"the daemon could not be asked ({e})"
    if d.decision == "allow":
        return True, d.answered_by or "allowed"
    return False, d.reason or d.decision


def run(spec: dict[str, Any], argv: list[str]) -> int:
    try:
        pv = Preview.start(str(spec["workspace"]), Path(str(spec["parent"])))
    except (OSError, PreviewError, KeyError) as e:
        print(
            f"nexus: refused to run the command: the preview could not be prepared ({e})", file=sys.stderr, flush=True
        )
        return EXIT_REFUSED
    try:
        return _run(spec, argv, pv)
    finally:
        pv.discard()


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _run(spec: dict[str, Any], argv: list[str], pv: Preview) -> int:
    try:
        # 3: the seccomp filter; 5 and 6: a filtered network's FIFOs (nexusd.sandbox.netjoin)
        proc = subprocess.Popen(pv.argv(argv), pass_fds=tuple(fd for fd in (3, INFO_FD, GO_FD) if _fd_open(fd)))
    except OSError as e:
        print(f"nexus: cannot start the sandbox: {e}", file=sys.stderr, flush=True)
        return EXIT_REFUSED

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, forward) for s in sigs}
    try:
        raw = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    rc = 128 - raw if raw < 0 else raw
    if not os.path.isdir(os.path.join(pv.work, "work")):  # overlayfs makes it at mount: never mounted
        return rc  # the command did not run (the overlay helper said why)
    try:
        return _review(spec, argv, pv, rc)
    except Exception as e:  # anything unexpected: the changes are discarded, never half-decided
        _say(f"the preview failed ({type(e).__name__}: {e}); the command's changes were DISCARDED")
        return rc


def _review(spec: dict[str, Any], argv: list[str], pv: Preview, rc: int) -> int:
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        changes = pv.changes()
    except (OSError, PreviewError) as e:
        _say(f"the command's changes could not be read ({e}); they were DISCARDED")
        return rc
    live = [c for c in changes if not c.refused]
    for c in changes:
        if c.refused:
            _say(f"not applied: {shown(c.path)}: {c.refused}")
    if not live:
        _say("the command changed nothing in the workspace; nothing to apply")
        return rc

    def interrupted(signum: int, _frame: object) -> None:
        raise _Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupted) for s in sigs}
    try:
        try:
            known = pv.conflicts(live)  # shown to the person: their allow overwrites these
            apply, why = ask(spec, argv, changes, pv.diff_text(changes, frozenset(known)), rc, known)
        except _Interrupted as e:
            _say(f"interrupted ({e}) while a person was reviewing; the command's changes were DISCARDED")
            return rc
        if not apply:
            _say(f"the command's changes to the workspace were DISCARDED ({why}); the workspace is as it was")
            return rc
        for sig in sigs:  # a person allowed it: the apply is not cut short by a signal
            signal.signal(sig, signal.SIG_IGN)
        result = pv.apply(changes=changes, overwrite=frozenset(known))
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    for line in iter_lines(result):
        _say(line)
    if result.conflicts:
        _say(
            "the command's changes were NOT APPLIED: the paths above changed in the workspace while the "
            "person reviewed them (nothing was written)"
        )
    elif result.errors:
        _say(
            f"the command's changes were PARTLY APPLIED by {why}: {len(result.applied)} paths; "
            "the errors above were not"
        )
    else:
        _say(f"the command's changes were APPLIED by {why}: {summary(changes)}")
    return rc


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(f"nexus preview: usage: python -m {MODULE} SPEC -- ARGV...", file=sys.stderr)
        return EXIT_REFUSED
    try:
        spec = json.loads(argv[0])
        if not isinstance(spec, dict):
            raise ValueError("not an object")
    except ValueError as e:
        print(f"nexus: refused to run the command: a bad preview spec ({e})", file=sys.stderr)
        return EXIT_REFUSED
    return run(spec, argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
