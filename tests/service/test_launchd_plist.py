"""The LaunchAgent plist: parsed back with plistlib (launchd itself cannot run here)."""

from __future__ import annotations

import plistlib
from pathlib import Path

import pytest

from nexusd.daemon.activation import LAUNCHD_SOCKET_NAME
from nexusd.service import launchd

HOME = Path("/Users/alice & bob <x>")  # characters that would break string-templated XML


def test_plist_keys_modes_and_paths() -> None:
    data = plistlib.loads(launchd.render_plist("/opt/n/bin/nexusd", HOME).encode())
    assert data["Label"] == launchd.LABEL
    assert data["ProgramArguments"] == ["/opt/n/bin/nexusd"]
    assert data["RunAtLoad"] is True
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    sock = data["Sockets"][LAUNCHD_SOCKET_NAME]  # the name the daemon asks launch_activate_socket for
    assert sock["SockPathMode"] == 384 == 0o600
    assert sock["SockPathName"] == str(HOME / "Library/Application Support/nexus/run/nexusd.sock")
    assert sock["SockType"] == "stream" and sock["SockFamily"] == "Unix"
    assert data["StandardOutPath"] == data["StandardErrorPath"] == str(HOME / "Library/Logs/nexusd.log")
    assert data["Umask"] == 0o077


def test_socket_path_matches_what_clients_use_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    from nexusd import locations, sockpath

    monkeypatch.setattr(sockpath.sys, "platform", "darwin")  # the socket's place is sockpath's (lean, for the hook)
    monkeypatch.setenv("HOME", str(HOME))
    monkeypatch.delenv("NEXUS_SOCKET", raising=False)
    assert locations.socket_path() == launchd.socket_path(HOME)


def test_agent_path() -> None:
    assert launchd.agent_path(HOME) == HOME / "Library/LaunchAgents/io.nexus.nexusd.plist"


def test_relative_nexusd_is_refused() -> None:
    with pytest.raises(ValueError):
        launchd.render_plist("nexusd", HOME)
