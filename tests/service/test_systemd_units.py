"""The systemd user units: the options the issue requires, verified by systemd-analyze itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nexusd.service import systemd


def _options(text: str) -> dict[str, list[str]]:
    """Section.Key -> values, ignoring comments, as systemd reads them."""
    section = ""
    opts: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        opts.setdefault(f"{section}.{key}", []).append(value)
    return opts


def test_socket_unit_options() -> None:
    o = _options(systemd.render_socket())
    assert o["Socket.ListenStream"] == ["%t/nexus/nexusd.sock"]
    assert o["Socket.SocketMode"] == ["0600"]  # systemd's default would be 0666
    assert o["Socket.DirectoryMode"] == ["0700"]
    assert o["Socket.Accept"] == ["no"]
    assert o["Socket.FileDescriptorName"] == ["nexusd"]  # what activation looks for with several fds
    assert o["Install.WantedBy"] == ["sockets.target"]


def test_service_unit_options() -> None:
    o = _options(systemd.render_service("/opt/nexus/bin/nexusd"))
    assert o["Service.Type"] == ["notify"]
    assert o["Service.NotifyAccess"] == ["main"]
    assert o["Service.ExecStart"] == ["/opt/nexus/bin/nexusd"]
    assert o["Service.Restart"] == ["on-failure"]
    assert int(o["Service.WatchdogSec"][0].rstrip("s")) == systemd.WATCHDOG_SEC > 0
    assert o["Service.ExecReload"] == ["kill -HUP $MAINPID"]
    assert o["Unit.Requires"] == ["nexusd.socket"]
    # The hardening choices the sandbox probe depends on are explicit, not defaults left to chance.
    assert o["Service.NoNewPrivileges"] == ["yes"]
    assert o["Service.RestrictNamespaces"] == ["no"]
    assert o["Service.PrivateUsers"] == ["no"]
    # Options that imply PrivateUsers= in the user manager, or whose seccomp filters the probe inherits,
    # must stay off (see the comments in the unit and docs/SERVICE.md).
    for implied in (
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "PrivateDevices",
        "SystemCallFilter",
        "RestrictAddressFamilies",
        "ProtectKernelTunables",
    ):
        assert f"Service.{implied}" not in o


def test_every_hardening_choice_is_commented_in_the_unit() -> None:
    text = systemd.render_service("/x/nexusd")
    for option in ("NoNewPrivileges=", "RestrictNamespaces=", "PrivateUsers="):
        i = text.index("\n" + option)
        comment = text[:i].rsplit("\n\n", 1)[-1]
        assert "#" in comment and ("probe" in comment or "bwrap" in comment or "namespace" in comment), option


@pytest.mark.parametrize(
    "bad", ["nexusd", "relative/nexusd", "/a b/nexusd", "/a/%h/nexusd", "/a/$X", "/a\nExecStartPre=/x"]
)
def test_paths_systemd_would_mangle_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        systemd.render_service(bad)


def test_unit_dir_follows_xdg_config_home() -> None:
    assert systemd.unit_dir({"XDG_CONFIG_HOME": "/c", "HOME": "/h"}) == Path("/c/systemd/user")
    assert systemd.unit_dir({"HOME": "/h"}) == Path("/h/.config/systemd/user")
    assert systemd.unit_dir({"XDG_CONFIG_HOME": "rel", "HOME": "/h"}) == Path("/h/.config/systemd/user")


def test_units_pass_systemd_analyze_verify() -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
    try:
        # ExecStart must exist for verify: use the nexusd console script of this environment.
        nexusd = Path(sys.executable).parent / "nexusd"
        assert nexusd.exists(), "the nexusd console script is installed beside python"
        for path, text in systemd.files(str(nexusd), {"XDG_CONFIG_HOME": str(d)}).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        units = d / "systemd" / "user"
        # --user needs a runtime dir to resolve %t; an empty private one is enough (no manager runs).
        env = dict(os.environ, XDG_RUNTIME_DIR=str(d))
        r = subprocess.run(
            [analyze, "verify", "--user", str(units / "nexusd.socket"), str(units / "nexusd.service")],
            capture_output=True,
            text=True,
            env=env,
            cwd=units,
            timeout=60,
        )
        if r.returncode != 0 and re.search(r"Failed to (initialize manager|lookup RuntimeDirectory)", r.stderr):
            pytest.skip(f"systemd-analyze cannot run here: {r.stderr.strip()}")
        # systemd reports unknown or malformed options as warnings on stderr, even with exit code 0.
        assert (r.returncode, r.stderr.strip()) == (0, "")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_verify_catches_a_broken_unit() -> None:
    # The test above can fail: verify does reject what it should (here a malformed SocketMode).
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
    try:
        (d / "nexusd.socket").write_text(systemd.render_socket().replace("SocketMode=0600", "SocketMode=rw"))
        r = subprocess.run(
            [analyze, "verify", "--user", str(d / "nexusd.socket")],
            capture_output=True,
            text=True,
            env=dict(os.environ, XDG_RUNTIME_DIR=str(d)),
            cwd=d,
            timeout=60,
        )
        assert "SocketMode" in r.stderr or "mode" in r.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)
