"""Where nexusd keeps its socket, configuration and state, per user.

Standard library only, platformdirs imported lazily. The per-call hook imports ``nexusd.sockpath`` instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from nexusd.sockpath import APP, runtime_dir_text, socket_path_text

__all__ = ["APP", "AUDIT_NAME", "MANAGED_POLICY", "config_dir", "runtime_dir", "socket_path", "state_dir"]


def socket_path(override: str | None = None) -> Path:
    """``--socket`` beats ``NEXUS_SOCKET`` beats ``$XDG_RUNTIME_DIR/nexus/nexusd.sock`` (``nexusd.sockpath``)."""
    return Path(socket_path_text(override))


def runtime_dir() -> Path:
    return Path(runtime_dir_text())


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
