"""The last good text of every global policy layer, kept in the state directory.

A reload already keeps a broken file's last good parse in memory. A start had nothing to fall back on: an
editor crash, a bad sync or a half-written file dropped that layer's deny rules until someone noticed.
So each layer's text is copied here whenever it parses cleanly (0600, written atomically), and a start that
finds the layer unreadable or broken parses the copy instead, saying so loudly. With no copy either, the
policy is locked (``Policy.locked``): nothing is allowed by a rule or a mode until the file is fixed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from nexusd.atomicfile import write_atomic


@dataclass(frozen=True)
class Copy:
    text: str
    saved: float  # when it was last seen good (epoch seconds)


def _file(state_dir: Path, source: Path) -> Path:
    return Path(state_dir) / "lastgood" / f"{hashlib.sha256(str(source).encode()).hexdigest()[:24]}.json"


def save(state_dir: Path, source: Path, text: str) -> None:
    """Remember ``text`` as ``source``'s last good content (only when it changed: no write per reload)."""
    path = _file(state_dir, source)
    old = load(state_dir, source)
    if old is not None and old.text == text:
        return
    write_atomic(path, json.dumps({"path": str(source), "saved": time.time(), "text": text}), 0o600)


def load(state_dir: Path, source: Path) -> Copy | None:
    """The last good copy of ``source``, or None (none, unreadable, or the copy of another file)."""
    try:
        data = json.loads(_file(state_dir, source).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("path") != str(source) or not isinstance(data.get("text"), str):
        return None
    saved = data.get("saved")
    return Copy(data["text"], float(saved) if isinstance(saved, int | float) else 0.0)


def forget(state_dir: Path, source: Path) -> None:
    """The file is gone on purpose (deleted): its copy must not come back at the next start."""
    with contextlib.suppress(OSError):
        _file(state_dir, source).unlink()
