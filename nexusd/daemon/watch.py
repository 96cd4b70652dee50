"""Reload the policy when one of its files changes (an editor's save, a sync, a config-management run).

docs/POLICY.md promises that a changed policy file is picked up; without this only ``nexusctl reload`` or
SIGHUP did. watchfiles (inotify on Linux, FSEvents/kqueue on macOS) watches the *directories* of the
global layers, non-recursively, because editors replace files by rename and a file that does not exist
yet cannot be watched; a layer whose directory is missing is watched through its nearest existing
ancestor, and the set is recomputed after every reload (the directory may have appeared). Project layers
need no watch: they are stat-ed on every call. Reload keeps each file's last good parse, so a half-saved
file never drops rules in force.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import structlog

log = structlog.get_logger("nexusd.watch")

DEBOUNCE_MS = 150  # an editor's write-rename-chmod arrives as one change


def watch_targets(files: list[Path]) -> tuple[list[Path], set[Path]]:
    """(directories to watch, the paths whose change means a reload: the files and their missing parents)."""
    dirs: list[Path] = []
    relevant: set[Path] = set()
    for f in files:
        relevant.add(f)
        d = f.parent
        while not d.is_dir() and d != d.parent:
            relevant.add(d)  # its creation is the first step towards the file
            d = d.parent
        if f.is_dir():
            dirs.append(f)  # policy.d: files inside it are layers
        if d not in dirs:
            dirs.append(d)
    return dirs, relevant


def _matters(changed: str, relevant: set[Path]) -> bool:
    p = Path(changed)
    return p in relevant or p.parent in relevant


async def watch_policy(
    files: Callable[[], list[Path]], reload: Callable[[], Awaitable[object]], stop: anyio.Event | None = None
) -> None:
    """Run until cancelled or ``stop`` is set: call ``reload`` after a change to any of ``files()``
    (recomputed each time).

    Why ``stop``: watchfiles waits for changes in a thread that a cancellation cannot interrupt; it
    returns at its next ``step`` once ``stop`` is set, and otherwise only at ``rust_timeout``. Without it
    every daemon took up to five seconds to stop (set ``stop``, then cancel).

    Never raises: a convenience must not take the gate down (no descriptors left, an inotify limit, a
    missing module). It says so and tries again later; SIGHUP and ``nexusctl reload`` always work."""
    warned = False
    while stop is None or not stop.is_set():
        dirs: list[Path] = []
        try:
            from watchfiles import awatch

            dirs, relevant = watch_targets(files())
            if not dirs:
                await anyio.sleep(5)
                continue
            async for changes in awatch(
                *dirs,
                recursive=False,
                debounce=DEBOUNCE_MS,
                step=50,
                rust_timeout=5000,
                yield_on_timeout=False,
                stop_event=stop,
            ):
                if any(_matters(path, relevant) for _, path in changes):
                    log.info("policy file changed; reloading", paths=sorted({p for _, p in changes})[:5])
                    await reload()
                    break  # recompute: a directory may have appeared or gone
            warned = False
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as e:
            if not warned:
                log.warning("cannot watch the policy files; retrying", error=str(e), dirs=[os.fspath(d) for d in dirs])
                warned = True
            await anyio.sleep(5)
