"""Whole-file replacement that a crash cannot tear: temp file, fsync, rename, fsync the directory.

Standard library only, so clients (agent settings installers) may import it too.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(
    path: Path,
    text: str,
    mode: int = 0o600,
    *,
    dir_mode: int = 0o700,
    durable: bool = True,
    errors: str = "strict",
) -> None:
    """Leave either the old file or the new one at ``path``, never half of one.

    The temporary file gets a random name in the same directory (``mkstemp``: O_EXCL, so nothing
    planted there is written through, and writers in several threads never share one), and the rename
    replaces a symlink at ``path`` rather than following it. ``dir_mode`` applies only to directories this
    call creates. ``durable`` False skips the two fsyncs (a file made again when lost: the sandbox's
    per-plan scripts); ``errors``: how text that is not UTF-8 is encoded (paths: ``surrogateescape``).
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors) as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if not durable:
        return
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
