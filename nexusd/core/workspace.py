"""Which workspace a call belongs to: the agent's project root, else the cwd's git root, else the cwd.

Pure (the file system is injected): the gate computes it once per request and carries it; the sandbox
and the CLI ask the same function. Never cached across calls: a ``.git`` created or a symlink swapped
between two calls must count.
"""

from __future__ import annotations

from typing import Protocol

from nexusd.protocol import CallInfo


class WorkspaceFileSystem(Protocol):
    """The three file-system facts the walk needs (``nexusd.policy.filesystem.RealFileSystem`` + isdir)."""

    def realpath(self, path: str) -> str: ...
    def lexists(self, path: str) -> bool: ...
    def isdir(self, path: str) -> bool: ...


def workspace_of(call: CallInfo, fs: WorkspaceFileSystem) -> str:
    """The canonical workspace root of ``call`` (see the module docstring)."""
    if call.workspace and call.workspace.startswith("/") and fs.isdir(call.workspace):
        return fs.realpath(call.workspace)
    cwd = fs.realpath(call.cwd) if call.cwd.startswith("/") else "/"
    d = cwd
    while True:
        if fs.lexists(d + "/.git" if d != "/" else "/.git"):
            return d
        parent = d.rpartition("/")[0] or "/"
        if parent == d:
            return cwd
        d = parent
