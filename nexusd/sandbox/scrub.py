"""After a sandboxed command: remove the protected paths it planted. Shared by ``nexusctl run`` and the
agent's generated wrapper (``python -I -m nexusd.sandbox.scrub PLAN.json``, started by the wrapper only
when its cheap check saw something planted).

A path is planted when it is protected, exists now, and did not exist when the call was decided: the
top-level names the plan lists as missing (``scrub``), and the nested protected names below the writable
roots (``scrub_below``) that are not in ``protected_before``. Removal is the symlink-proof walk of
``nexusd.sandbox.gitscrub``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import TextIO

from nexusd.sandbox import violations
from nexusd.sandbox.gitscrub import scrub


def after(
    scrub_paths: Iterable[str], scrub_below: Iterable[str], protected_before: Iterable[str], err: TextIO
) -> list[str]:
    """Remove what the command planted; returns it as sandbox violations (``violations.planted``)."""
    planted: list[str] = list(scrub_paths)
    roots = list(scrub_below)
    if roots:
        from nexusd.sandbox.nested import planted as nested_planted

        before = frozenset(protected_before)
        for root in roots:
            planted += [p for p in nested_planted(root, before) if p not in planted]
    if not planted:
        return []
    removed, failed = scrub(planted)
    for path in removed:
        print(f"nexus: removed {path}, planted by the sandboxed command", file=err, flush=True)
    for path in failed:
        print(f"nexus: WARNING: could not remove {path}, planted by the sandboxed command", file=err, flush=True)
    return violations.planted(removed, failed)


def main(argv: list[str] | None = None) -> int:
    """``PLAN.json [COMMAND [REFUSALS EXIT_CODE PLANTED]]``: the wrapper's three extra words are the tap's
    findings file ("" when none), the command's exit status and "1" when its cheap check saw a planting
    (""/absent with a REFUSALS file: only report, do not walk for plantings)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2, 5):
        print("usage: python -I -m nexusd.sandbox.scrub PLAN.json [COMMAND [REFUSALS EXIT PLANTED]]", file=sys.stderr)
        return 2
    refusals, exit_code, scrub_now = (args[2], args[3], args[4] == "1") if len(args) == 5 else ("", "", True)
    try:
        with open(args[0], encoding="utf-8", errors="surrogateescape") as f:
            data = json.load(f)
        lists = [data.get(k, []) for k in ("scrub", "scrub_below", "protected_before")]
        if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists):
            raise ValueError("malformed")
    except (OSError, ValueError) as e:
        what = "check what the sandboxed command planted" if scrub_now else "report what the sandbox refused"
        print(f"nexus: WARNING: cannot {what} ({args[0]}: {e})", file=sys.stderr, flush=True)
        return 1
    found = violations.read_tap(refusals) if refusals else []
    if scrub_now:
        found += after(lists[0], lists[1], lists[2], err=sys.stderr)
    socket, session = data.get("socket"), data.get("session")
    if (
        found
        and len(args) >= 2
        and (socket is None or isinstance(socket, str))
        and (session is None or isinstance(session, str))
    ):  # COMMAND: report what was refused and planted
        code = int(exit_code) if exit_code.isdigit() and len(exit_code) < 4 else None
        violations.report(found, command=args[1], cwd=os.getcwd(), socket=socket, session=session, exit_code=code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
