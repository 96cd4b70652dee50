"""The macOS LaunchAgent: launchd owns the socket (0600) and starts nexusd at login and on demand.

launchd creates ``SockPathName`` with ``SockPathMode`` before the job runs; the daemon fetches it with
``launch_activate_socket("Listeners")`` (``nexusd/daemon/launchd.py``). The plist is rendered with
plistlib (never string templating: a home path with ``&`` or ``<`` stays valid XML); the copy in the
repository's ``launchd/`` directory is rendered from here for review and packagers.
"""

from __future__ import annotations

import os
import plistlib
from pathlib import Path
from typing import Any

LABEL = "io.nexus.nexusd"
SOCKET_KEY = "Listeners"  # must match nexusd.daemon.activation.LAUNCHD_SOCKET_NAME
SOCK_PATH_MODE = 0o600  # launchd wants the decimal integer: 384


def socket_path(home: Path) -> Path:
    """The same path ``nexusd.locations.socket_path()`` gives on macOS, so clients find the agent."""
    return home / "Library" / "Application Support" / "nexus" / "run" / "nexusd.sock"


def log_path(home: Path) -> Path:
    return home / "Library" / "Logs" / "nexusd.log"


def agent_path(home: Path) -> Path:
    return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def plist_data(nexusd: str, home: Path) -> dict[str, Any]:
    if not os.path.isabs(nexusd):
        raise ValueError(f"nexusd path {nexusd!r} must be absolute")
    return {
        "Label": LABEL,
        "ProgramArguments": [nexusd],
        # Started at login, and again by launchd on the first connection after an exit.
        "RunAtLoad": True,
        # Restarted when it exits with an error or a signal; a clean exit (stop) stays stopped until
        # the next connection activates it.
        "KeepAlive": {"SuccessfulExit": False},
        "Sockets": {
            SOCKET_KEY: {
                "SockPathName": str(socket_path(home)),
                "SockPathMode": SOCK_PATH_MODE,
                "SockType": "stream",
                "SockFamily": "Unix",
            }
        },
        # Files the daemon creates (state, audit log, learned rules) are private.
        "Umask": 0o077,
        # The gate sits before every tool call: do not let the scheduler treat it as background work.
        "ProcessType": "Interactive",
        "StandardOutPath": str(log_path(home)),
        "StandardErrorPath": str(log_path(home)),
    }


def render_plist(nexusd: str, home: Path) -> str:
    return plistlib.dumps(plist_data(nexusd, home), sort_keys=False).decode()


def files(nexusd: str, home: Path) -> dict[Path, str]:
    return {agent_path(home): render_plist(nexusd, home)}
