"""``nexusctl service status``: what is installed, what the service manager says, whether nexusd answers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from nexusd.service import launchd, systemd
from nexusd.service.installer import Out

_SOCKET_PROPS = ("LoadState", "ActiveState", "SubState", "UnitFileState", "Listen")
_SERVICE_PROPS = ("ActiveState", "SubState", "Result", "MainPID", "NRestarts", "StatusText")


def report(manager: str, socket_path: Path, out: Out, environ: Mapping[str, str] | None = None) -> bool:
    """Print the three views; True when the daemon answers on socket_path."""
    env = os.environ if environ is None else environ
    if manager == "systemd":
        _systemd_files(env, out)
        _systemd_manager(out)
    elif manager == "launchd":
        _launchd_files(Path(env.get("HOME") or str(Path.home())), out)
    else:
        raise ValueError(f"unknown service manager {manager!r}")
    return daemon_answers(socket_path, out)


def _systemd_files(env: Mapping[str, str], out: Out) -> None:
    d = systemd.unit_dir(env)
    for name in (systemd.SOCKET_NAME, systemd.SERVICE_NAME):
        path = d / name
        if not path.is_file():
            out(f"{name}: not installed ({path} missing; run `nexusctl service install`)")
            continue
        text = path.read_text(errors="replace")
        line = f"{name}: installed at {path}"
        if name == systemd.SERVICE_NAME:
            m = re.search(r"^ExecStart=(\S+)", text, re.MULTILINE)
            exe = m.group(1) if m else None
            if exe is None:
                line += "; no ExecStart= (edited by hand?)"
            else:
                ok = os.path.isfile(exe) and os.access(exe, os.X_OK)
                line += f"; ExecStart={exe}" + ("" if ok else " (MISSING or not executable: reinstall)")
                try:
                    expected = systemd.render_service(exe)
                except ValueError:
                    expected = None
                if expected is not None and text != expected:
                    line += "; differs from what this nexusctl installs (reinstall to update)"
        elif text != systemd.render_socket():
            line += "; differs from what this nexusctl installs (reinstall to update)"
        out(line)


def _systemd_manager(out: Out) -> None:
    exe = shutil.which("systemctl")
    if exe is None:
        out("systemd: systemctl not found")
        return
    for unit, props in ((systemd.SOCKET_NAME, _SOCKET_PROPS), (systemd.SERVICE_NAME, _SERVICE_PROPS)):
        try:
            r = subprocess.run(
                [exe, "--user", "show", unit, "-p", ",".join(props)], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            out(f"systemd: {unit}: systemctl --user show failed: {e}")
            return
        if r.returncode != 0:
            why = " ".join(r.stderr.strip().splitlines()[-2:]) or f"exit {r.returncode}"
            out(f"systemd: cannot ask the user manager: {why}")
            return
        values = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        state = f"{values.get('ActiveState', '?')} ({values.get('SubState', '?')})"
        extra = []
        if unit == systemd.SOCKET_NAME:
            extra.append(values.get("UnitFileState") or "unit file state unknown")
            if values.get("LoadState") not in (None, "loaded"):
                extra.append(f"load state {values['LoadState']}")
            if values.get("Listen"):
                extra.append(f"listening on {values['Listen']}")
        else:
            if values.get("MainPID", "0") != "0":
                extra.append(f"pid {values['MainPID']}")
            if values.get("Result") not in (None, "", "success"):
                extra.append(f"last result {values['Result']}")
            if values.get("NRestarts", "0") not in ("", "0"):
                extra.append(f"restarted {values['NRestarts']} times")
            if values.get("StatusText"):
                extra.append(f"status: {values['StatusText']}")
        out(f"systemd: {unit}: {state}" + (f"; {'; '.join(extra)}" if extra else ""))


def _launchd_files(home: Path, out: Out) -> None:
    path = launchd.agent_path(home)
    if not path.is_file():
        out(f"launchd: agent not installed ({path} missing; run `nexusctl service install --launchd`)")
    else:
        out(f"launchd: agent installed at {path}")
    exe = shutil.which("launchctl")
    if exe is None:
        out("launchd: launchctl not found (launchd is macOS only)")
        return
    target = f"gui/{os.getuid()}/{launchd.LABEL}"
    try:
        r = subprocess.run([exe, "print", target], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        out(f"launchd: launchctl print failed: {e}")
        return
    if r.returncode != 0:
        out(f"launchd: {target} is not loaded")
        return
    wanted = ("state", "pid", "last exit code", "runs")
    for line in r.stdout.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key in wanted:
            out(f"launchd: {key}: {value}")


def daemon_answers(socket_path: Path, out: Out) -> bool:
    """Connect and ask. Under socket activation this starts the daemon if it is not running yet."""
    from nexusd.client import Client, NexusClientError

    try:
        with Client(socket_path, role="admin", name="nexusctl service status", timeout=5.0) as c:
            st = c.status()
    except NexusClientError as e:
        out(f"daemon: does not answer on {socket_path}: {e}")
        return False
    up = f"up {st.uptime:.0f}s, {st.pending} pending"
    out(f"daemon: answers on {socket_path}: nexusd {st.version}, pid {st.pid}, {up}")
    if st.policy_errors:
        out(f"daemon: policy errors: {'; '.join(st.policy_errors)}")
    return True
