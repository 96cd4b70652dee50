"""The systemd user units: nexusd.socket (always listening) and nexusd.service (started on demand).

The unit text lives here, not in files beside the package, so the installed wheel carries it; the copies
in the repository's ``systemd/`` directory are rendered from it (``python -m nexusd.service.render``)
and a test keeps them identical. Every option is commented where it is set, hardening included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SOCKET_NAME = "nexusd.socket"
SERVICE_NAME = "nexusd.service"
WATCHDOG_SEC = 10

SOCKET_UNIT = """\
# nexusd.socket: the user's nexusd socket, held open by systemd so the daemon starts on the first
# connection and clients never see "connection refused" while it starts or restarts (the kernel
# queues their connections). Installed by `nexusctl service install`; see docs/SERVICE.md.

[Unit]
Description=nexusd permission daemon socket (AI coding agents)

[Socket]
# The same path clients use by default ($XDG_RUNTIME_DIR/nexus/nexusd.sock).
ListenStream=%t/nexus/nexusd.sock
# systemd's default is 0666. The daemon serves only its own uid (kernel peer credentials) and refuses to
# start on a socket other users can reach, but 0600 keeps them from even connecting.
SocketMode=0600
# The nexus directory is created private too (the daemon checks this when it binds by itself).
DirectoryMode=0700
# One daemon serves every connection; it is handed the listening socket (LISTEN_FDS).
Accept=no
# The name the daemon looks for in LISTEN_FDNAMES.
FileDescriptorName=nexusd
# No stale socket file once the unit is stopped. The daemon itself never unlinks an inherited socket.
RemoveOnStop=yes
Service=nexusd.service

[Install]
WantedBy=sockets.target
"""

SERVICE_UNIT = """\
# nexusd.service: the nexusd permission daemon, started by nexusd.socket on the first connection.
# Installed by `nexusctl service install`, which writes the absolute path of your nexusd into ExecStart=.
# See docs/SERVICE.md for why each option below is set the way it is.

[Unit]
Description=nexusd permission daemon (AI coding agents)
Requires=nexusd.socket
After=nexusd.socket

[Service]
# The daemon sends READY=1 to $NOTIFY_SOCKET once it listens with its policy loaded,
# RELOADING=1/READY=1 around reloads, STATUS= lines (pending requests) and STOPPING=1 on the way out.
Type=notify
# Only the daemon's own process may report state, never a policy hook or sandboxed command it runs.
NotifyAccess=main
ExecStart={nexusd}
# SIGHUP reloads the policy files; the daemon keeps serving with the old policy if the new one is broken.
ExecReload=kill -HUP $MAINPID
Restart=on-failure
RestartSec=1s
TimeoutStartSec=15s
# On stop the daemon denies what is pending and tells its clients; that is quick.
TimeoutStopSec=10s
# The daemon pings WATCHDOG=1 every WATCHDOG_USEC/2; a wedged event loop is killed and restarted
# (Restart=on-failure covers watchdog timeouts). Requests pending at that moment are denied: the
# requesters see the connection drop and fail closed.
WatchdogSec={watchdog}s
# State, audit log and learned rules are created private.
UMask=0077

# ---- Hardening, chosen knowingly --------------------------------------------------------------------
# The daemon runs the sandbox capability probe (bwrap/unshare). Its answer must match what the agent's
# own processes can do, because the agent runs the sandboxed commands. Anything set here is inherited
# by the probe and by policy hooks, so only options that cannot make the probe lie in the unsafe
# direction are enabled.
#
# NoNewPrivileges=yes: nexusd never needs setuid. Consequence: a *setuid* bwrap (distributions without
# unprivileged user namespaces) gains nothing, the probe reports the sandbox unavailable and commands
# that need it are asked or denied (fail closed). On such systems override with NoNewPrivileges=no.
NoNewPrivileges=yes
# RestrictNamespaces=no: bwrap and unshare create user, mount, pid, net, ipc and uts namespaces;
# restricting them would make the probe report "no sandbox" although the agent could use one.
RestrictNamespaces=no
# PrivateUsers=no: in a private user namespace every uid but ours shows as "nobody", so a root-owned
# managed policy (/etc/nexus) would fail its ownership check, and the probe would run nested in a
# namespace the agent is not in. Because the user manager turns on PrivateUsers= implicitly for
# ProtectSystem=, ProtectHome=, PrivateTmp=, PrivateDevices= and the ProtectKernel*= options, those are
# not set either (ProtectHome= would also hide the workspaces the classifier resolves paths in).
PrivateUsers=no
# MemoryDenyWriteExecute=no: it is inherited by policy hooks, and JIT runtimes (node) need W+X pages.
MemoryDenyWriteExecute=no
# No SystemCallFilter= or RestrictAddressFamilies=: seccomp filters are inherited by the probe
# (bwrap needs mount, pivot_root and netlink) and by policy hooks (which may use the network).
# Harmless for both, so enabled:
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
Also=nexusd.socket
"""


def render_socket() -> str:
    return SOCKET_UNIT


def render_service(nexusd: str) -> str:
    """The service unit with ExecStart= pointing at ``nexusd`` (an absolute path)."""
    if not os.path.isabs(nexusd) or any(c in nexusd for c in "\n\r\"'\\%$ "):
        # systemd would expand %, $ and split on spaces; a path needing quoting is refused, not mangled.
        raise ValueError(f"nexusd path {nexusd!r} must be absolute, without spaces, quotes, %, $ or backslashes")
    return SERVICE_UNIT.format(nexusd=nexusd, watchdog=WATCHDOG_SEC)


def unit_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where user units go: ``$XDG_CONFIG_HOME/systemd/user``, else ``~/.config/systemd/user``."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec says relative values are ignored
        return Path(xdg) / "systemd" / "user"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".config" / "systemd" / "user"


def files(nexusd: str, environ: Mapping[str, str] | None = None) -> dict[Path, str]:
    d = unit_dir(environ)
    return {d / SOCKET_NAME: render_socket(), d / SERVICE_NAME: render_service(nexusd)}
