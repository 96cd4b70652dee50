"""``nexusctl sandbox probe`` and ``nexusctl run`` against a real daemon, over the wire."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nexusd.client import Client
from tests.conftest import DaemonHandle

CTL = [sys.executable, "-c", "from nexusd.cli.ctl import main; main()"]


def ctl(
    h: DaemonHandle, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    e = dict(h.env)
    e.update(env or {})
    return subprocess.run([*CTL, *args], env=e, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _wait_probe(h: DaemonHandle) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with Client(socket_path=str(h.socket), role="ui", name="t") as c:
            if c.status().sandbox is not None:
                return
        time.sleep(0.05)
    raise AssertionError("the daemon never reported a probe")


def test_probe_from_the_daemon_and_here(daemon: DaemonHandle) -> None:
    r = ctl(daemon, "sandbox", "probe", "--json")
    assert r.returncode == 0, r.stderr
    probe = json.loads(r.stdout)
    assert probe["available"] is True and probe["backend"] == "bwrap" and probe["checks"]["bwrap"] == "ok"
    r = ctl(daemon, "sandbox", "probe", "--refresh")
    assert r.returncode == 0 and "the daemon's view" in r.stdout and "check bwrap: ok" in r.stdout
    r = ctl(daemon, "sandbox", "probe", "--here")
    assert r.returncode == 0 and "probed here" in r.stdout


def test_probe_here_without_the_tools_is_unavailable(daemon: DaemonHandle, tmp_path: Path) -> None:
    r = ctl(daemon, "sandbox", "probe", "--here", "--json", env={"PATH": str(tmp_path)})
    assert r.returncode == 1
    probe = json.loads(r.stdout)
    assert probe["available"] is False and "bwrap not found" in probe["reason"]


def test_status_carries_the_probe(daemon: DaemonHandle) -> None:
    _wait_probe(daemon)
    with Client(socket_path=str(daemon.socket), role="ui", name="t") as c:
        st = c.status()
        assert st.sandbox is not None and st.sandbox.available and st.sandbox.backend == "bwrap"
        assert c.welcome.sandbox is not None


def test_run_passes_output_and_exit_code(daemon: DaemonHandle, tmp_path: Path) -> None:
    r = ctl(daemon, "run", "--cwd", str(tmp_path), "--", "sh", "-c", "echo out; echo err >&2; exit 5")
    assert (r.returncode, r.stdout, r.stderr) == (5, "out\n", "err\n")


def test_run_cannot_reach_the_daemon_or_read_its_policy(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Path
) -> None:
    h = daemon_factory(policy="# secret-policy-marker\n")
    reach = (
        f"import socket; print('RAN', flush=True); s=socket.socket(socket.AF_UNIX); "
        f"s.connect({str(h.socket)!r}); print('CONNECTED')"
    )
    # The base interpreter: a venv under /tmp is invisible in the sandbox's fresh /tmp, and a probe
    # that cannot start must not pass for a blocked one (hence RAN).
    r = ctl(h, "run", "--cwd", str(tmp_path), "--", getattr(sys, "_base_executable", sys.executable), "-c", reach)
    assert "RAN" in r.stdout, r.stderr
    assert r.returncode != 0 and "CONNECTED" not in r.stdout
    r = ctl(h, "run", "--cwd", str(tmp_path), "--", "cat", str(h.config_dir / "policy.toml"))
    assert r.returncode != 0 and "secret-policy-marker" not in r.stdout
    # the control: outside the sandbox both work
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(h.socket))
    assert "secret-policy-marker" in (h.config_dir / "policy.toml").read_text()


def test_run_through_the_daemon_scrubs_a_planted_bare_repo(daemon: DaemonHandle, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    cmd = "mkdir objects refs && echo 'ref: refs/heads/main' > HEAD && echo hi"
    r = ctl(daemon, "run", "--cwd", str(ws), "--workspace", str(ws), "--", "sh", "-c", cmd)
    assert r.returncode == 0 and r.stdout == "hi\n", r.stderr
    assert sorted(os.listdir(ws)) == []


def test_sandbox_status_says_what_applies_to_a_workspace(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "sub/.git/hooks").mkdir(parents=True)
    off = daemon_factory()
    _wait_probe(off)
    r = ctl(off, "sandbox", "status", "--workspace", str(ws))
    assert r.returncode == 1 and "NOT sandboxed" in r.stdout and "auto-allow if sandboxed: off" in r.stdout
    on = daemon_factory(policy="[sandbox]\nenabled = true\nauto_allow_bash_if_sandboxed = true\n")
    _wait_probe(on)
    r = ctl(on, "sandbox", "status", "--workspace", str(ws))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run sandboxed" in r.stdout and "auto-allow if sandboxed: on" in r.stdout
    assert "host Unix sockets: closed" in r.stdout and "network: isolated" in r.stdout
    plan = json.loads(ctl(on, "sandbox", "status", "--workspace", str(ws), "--json").stdout)
    assert plan["transparent"] and plan["auto_allow"] and str(ws / "sub/.git/hooks") in plan["protected_before"]


def test_status_notes_sandbox_first_by_default_and_gate_only_without_a_sandbox(
    daemon_factory: Callable[..., DaemonHandle], tmp_path: Path
) -> None:
    from nexusd.cli.ctl_daemon import sandbox_mode_note
    from nexusd.protocol import SandboxProbe

    h = daemon_factory(sandbox=True)  # no [sandbox] anywhere: nexusd's own default
    _wait_probe(h)
    r = ctl(h, "status")
    assert "agents' shell calls: SANDBOX-FIRST" in r.stdout and "enabled = false" in r.stdout, r.stdout
    ws = tmp_path / "ws"
    ws.mkdir()
    r = ctl(h, "sandbox", "status", "--workspace", str(ws))
    assert (
        r.returncode == 0 and "run sandboxed (sandbox-first)" in r.stdout and "auto-allow if sandboxed: on" in r.stdout
    )
    off = SandboxProbe(platform="linux", available=False, reason="user namespaces are disabled")
    assert "GATE-ONLY" in sandbox_mode_note(off) and "probe --here" in sandbox_mode_note(off)
    assert "gate-only until" in sandbox_mode_note(None)
