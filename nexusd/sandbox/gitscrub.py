"""The bare-repository defence (as in Claude Code's sandbox), and the scrub of protected paths a sandboxed command
planted.

git treats a directory holding ``HEAD``, ``objects`` and ``refs`` as a bare repository. A sandboxed
command that plants those (plus a ``config`` with ``core.fsmonitor``) in the cwd gets code run by the
next *unsandboxed* git there. So: what exists before the command is bound read-only; what did not
exist and exists afterwards is removed.

Removal walks from ``/`` with ``O_NOFOLLOW`` file descriptors: the command may have swapped a parent
directory for a symlink to make the scrub delete something elsewhere.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable

BARE_REPO_FILES = ("HEAD", "objects", "refs", "hooks", "config")


def bare_repo_paths(cwd: str) -> tuple[list[str], list[str]]:
    """(existing, missing) among the bare-repository files directly in ``cwd``."""
    existing: list[str] = []
    missing: list[str] = []
    for name in BARE_REPO_FILES:
        p = os.path.join(cwd, name)
        (existing if os.path.lexists(p) else missing).append(p)
    return existing, missing


def _open_parent(path: str) -> tuple[int, str] | None:
    """A directory fd of ``path``'s parent reached without following any symlink, and the leaf name."""
    parts = [p for p in path.split("/") if p]
    if not parts or not path.startswith("/") or any(p in (".", "..") for p in parts):
        return None
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for comp in parts[:-1]:
            nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except OSError:
        os.close(fd)
        return None
    return fd, parts[-1]


def scrub(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """Remove each path that exists now (it did not before the command). Returns (removed, failed)."""
    removed, failed = [], []
    for path in paths:
        opened = _open_parent(path)
        if opened is None:
            # A parent is missing (nothing planted) or is a symlink (planted elsewhere: refuse to follow).
            if os.path.lexists(path):
                failed.append(path)
            continue
        fd, name = opened
        try:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=fd)  # the fd-based walk: resistant to symlink swaps
            else:
                os.unlink(name, dir_fd=fd)
            removed.append(path)
        except OSError:
            failed.append(path)
        finally:
            os.close(fd)
    return removed, failed
