"""The lean launcher agents' shell calls are rewritten to: ``python -I -m nexusd.sandbox.launcher``.

``--workspace W [--socket S] [--cwd D] (-c COMMAND | -- ARGV...)``. Spawned once per sandboxed shell
call, so it avoids click and the daemon's imports; ``-I`` keeps the cwd and PYTHON* variables from
putting a hostile workspace's modules in front of ours (this process runs outside the sandbox).
"""

from __future__ import annotations

import argparse
import shlex
import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in args:
        i = args.index("--")
        args, rest = args[:i], args[i + 1 :]
    ap = argparse.ArgumentParser(prog="nexus-sandbox", add_help=True)
    ap.add_argument("--cwd")
    ap.add_argument("--workspace")
    ap.add_argument("--socket")
    ap.add_argument("-c", dest="command")
    ns = ap.parse_args(args)
    if (ns.command is None) == (not rest):
        print("nexus-sandbox: give exactly one of -c COMMAND or -- ARGV...", file=sys.stderr)
        return 2
    command = ns.command if ns.command is not None else shlex.join(rest)
    from nexusd.sandbox.runner import run

    return run(command, cwd=ns.cwd, workspace=ns.workspace, socket=ns.socket)


if __name__ == "__main__":
    sys.exit(main())
