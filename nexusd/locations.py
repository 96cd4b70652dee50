"""Where nexusd keeps its socket, configuration and state, per user.

Imported by hooks on their hot path: standard library only, platformdirs imported lazily.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP = "nexus"


def socket_path(override: str | None = None) -> Path:
    """``--socket`` beats ``NEXUS_SOCKET`` beats ``$XDG_RUNTIME_DIR/nexus/nexusd.sock``."""
    if override:
        return Path(override)
    env = os.environ.get("NEXUS_SOCKET")
    if env:
        return Path(env)
    return runtime_dir() / "nexusd.sock"


def runtime_dir() -> Path:
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and sys.platform != "darwin":
        return Path(xdg) / APP
    if sys.platform == "darwin":
        # launchd agents have no XDG runtime dir; a per-user dir under ~/Library is private by default.
        return Path.home() / "Library" / "Application Support" / APP / "run"
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back to /tmp/runtime-<uid>; the daemon
        # checks that directory's owner and mode itself, so the warning is only noise on every command.
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP, appauthor=False, ensure_exists=False))


def config_dir() -> Path:
    env = os.environ.get("NEXUS_CONFIG_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    env = os.environ.get("NEXUS_STATE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_state_dir(APP, appauthor=False))


# The audit trail in the state directory; its rotations (``.1``...) and chain checkpoint (``.chain``) extend
# this name, and no agent may write any of them (nexusd/core/classify/paths.py ``touches_audit``).
AUDIT_NAME = "audit.jsonl"
MANAGED_POLICY = Path(os.environ.get("NEXUS_MANAGED_DIR", "/etc/nexus"))
