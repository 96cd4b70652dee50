"""Start a real nexusd whose file system stalls where a test says (a FUSE mount whose server never answers,
or a very slow tree), then run it as ``nexusd`` would run. Test-only: the stall is injected here, by
wrapping the real file-system module's entry points; the daemon's code is unchanged.

``NEXUS_TEST_STALL=PREFIX``: every file-system question of a call's facts about a path under PREFIX
blocks for ever. ``NEXUS_TEST_SLOW=PREFIX:SECONDS``: the sandbox plan's scan of a tree under PREFIX
sleeps SECONDS before it lists the tree's root (each time it is walked, in the daemon's walker processes,
which run this launcher with ``--walker``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from nexusd.policy import filesystem
from nexusd.sandbox import nested

_never = threading.Event()


def _stalling(prefix: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def stalled(self: Any, path: str, *args: Any) -> Any:
        if isinstance(path, str) and path.startswith(prefix):
            _never.wait()  # never set: a question that never returns
        return fn(self, path, *args)

    return stalled


stall = os.environ.get("NEXUS_TEST_STALL")
if stall:
    for cls, name in (
        (filesystem.RealFileSystem, "realpath"),
        (filesystem.RealFileSystem, "lexists"),
        (filesystem.DecisionFileSystem, "realpath_if_lexists"),
    ):
        setattr(cls, name, _stalling(stall, getattr(cls, name)))

slow = os.environ.get("NEXUS_TEST_SLOW")
if slow:
    slow_prefix, _, seconds = slow.rpartition(":")

    def _slow_root(d: str) -> None:
        if d == slow_prefix:
            time.sleep(float(seconds))

    nested.stall_hook = _slow_root
    # the daemon walks in walker processes: they are this launcher too, so the same stall reaches them
    from nexusd.sandbox import walkers

    walkers.CHILD_ARGV = [sys.executable, __file__, "--walker"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--walker"]:
        from nexusd.sandbox.walkers import serve

        serve()
    else:
        from nexusd.cli.daemon_main import main

        sys.argv[0] = "nexusd"
        main()
