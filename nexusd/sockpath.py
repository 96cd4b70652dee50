"""Where the daemon's socket is, as text: the one location the per-call hook needs.

Kept apart from ``nexusd.locations`` (which hands out ``pathlib.Path``s) because the hook starts once per
tool call and ``pathlib`` costs it ~2 ms of imports (fnmatch, urllib.parse, ipaddress), and ``os`` ~1.4 ms
(``nexusd.leanos`` stands in). ``locations`` builds its ``socket_path`` on this, so the rule is written once.
"""

import sys

from nexusd import leanos

APP = "nexus"


def socket_path_text(override: str | None = None) -> str:
    """``--socket`` beats ``NEXUS_SOCKET`` beats ``$XDG_RUNTIME_DIR/nexus/nexusd.sock``."""
    if override:
        return override
    env = leanos.getenv("NEXUS_SOCKET")
    if env:
        return env
    return leanos.join(runtime_dir_text(), "nexusd.sock")


def runtime_dir_text() -> str:
    xdg = leanos.getenv("XDG_RUNTIME_DIR")
    if xdg and sys.platform != "darwin":
        return leanos.join(xdg, APP)
    if sys.platform == "darwin":
        # launchd agents have no XDG runtime dir; a per-user dir under ~/Library is private by default.
        import os

        return os.path.join(os.path.expanduser("~"), "Library", "Application Support", APP, "run")
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back to /tmp/runtime-<uid>; the daemon
        # checks that directory's owner and mode itself, so the warning is only noise on every command.
        warnings.simplefilter("ignore")
        return str(platformdirs.user_runtime_dir(APP, appauthor=False, ensure_exists=False))
