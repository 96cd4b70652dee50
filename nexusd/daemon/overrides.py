"""A person's mode override per session, kept across restarts in ``<state-dir>/modes.json``.

Issue 34: the override (``nexusctl mode``, the TUI) lived only in the daemon's session table, so a restart
(or a kill -9) silently put the session back on the agent's own mode, which may be wider than what the person
chose (plan → bypass). Overrides are now written atomically before the change is acknowledged, applied to a
session whenever the daemon (re)creates it, and dropped only when a person clears them. Only people set them:
``set_mode`` from an agent's process tree is refused by the guard (daemon/guard.py), so agents cannot grow
this table. A file that cannot be read applies no override and says so (the agent's mode, bounded by policy,
is what decides then: the same as before overrides were kept).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import structlog

from nexusd.atomicfile import write_atomic

OVERRIDES_NAME = "modes.json"
MAX_OVERRIDES = 10_000  # people set these one at a time; past this the oldest are dropped
log = structlog.get_logger("nexusd")


class _Saved(msgspec.Struct, forbid_unknown_fields=True):
    modes: dict[str, str] = {}
    version: int = 1


class ModeOverrides:
    """Session id -> the mode a person set, persisted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.modes: dict[str, str] = {}
        self.error: str | None = None

    def load(self) -> str | None:
        """Read the file; returns the error (and keeps no override) when it exists but cannot be read."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            self.error = f"{self.path}: {e.strerror or e}"
            return self.error
        try:
            self.modes = dict(msgspec.json.decode(data, type=_Saved).modes)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            self.error = f"{self.path}: not a mode override file ({e}); no person's mode override applies"
            return self.error
        return None

    def get(self, session: str) -> str | None:
        return self.modes.get(session)

    def set(self, session: str, mode: str | None) -> None:
        """Save the change first (raises OSError: nothing changes), then keep it."""
        modes = dict(self.modes)
        modes.pop(session, None)
        if mode is not None:
            modes[session] = mode
            while len(modes) > MAX_OVERRIDES:
                del modes[next(iter(modes))]
        write_atomic(self.path, msgspec.json.encode(_Saved(modes=modes)).decode() + "\n", 0o600)
        self.modes = modes
