"""Both outcomes of the probe: the real one on this machine, and forced failures through injected runners."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nexusd.sandbox.probe import detect_container, detect_platform, probe


def test_real_probe_runs_bwrap_here() -> None:
    p = probe()
    assert p.available and p.backend == "bwrap" and p.checks["bwrap"] == "ok"
    assert p.checks["userns"] == "ok"


def test_nothing_installed_is_unavailable_with_reasons() -> None:
    p = probe(which=lambda name: None, sys_platform="linux")
    assert not p.available and p.backend is None
    assert "bwrap not found" in p.reason and "unshare not found" in p.reason


def test_namespaces_refused_is_unavailable() -> None:
    def run(argv: list[str], timeout: float) -> tuple[int, str]:
        return 1, "unshare: unshare failed: Operation not permitted"

    p = probe(run=run, which=lambda n: f"/usr/bin/{n}", sys_platform="linux")
    assert not p.available
    assert "Operation not permitted" in p.checks["userns"] and "Operation not permitted" in p.checks["bwrap"]


def test_hung_probe_times_out() -> None:
    def run(argv: list[str], timeout: float) -> tuple[int, str]:
        raise subprocess.TimeoutExpired(argv, timeout)

    p = probe(run=run, which=lambda n: f"/usr/bin/{n}", sys_platform="linux")
    assert not p.available and "timed out" in p.checks["bwrap"]


def test_bwrap_broken_unshare_works_falls_back_with_reduced_guarantees() -> None:
    def run(argv: list[str], timeout: float) -> tuple[int, str]:
        return (1, "bwrap: setting up uid map: Permission denied") if "bwrap" in argv[0] else (0, "")

    p = probe(run=run, which=lambda n: f"/usr/bin/{n}", sys_platform="linux")
    assert p.available and p.backend == "unshare" and "/dev stays visible" in p.reason


def test_real_path_without_the_tools(tmp_path: Path) -> None:
    p = probe(which=lambda n: __import__("shutil").which(n, path=str(tmp_path)), sys_platform="linux")
    assert not p.available


def _fake_root(tmp_path: Path, release: str) -> Path:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(release)
    return tmp_path


def test_platforms(tmp_path: Path) -> None:
    assert detect_platform("darwin") == "macos"
    assert detect_platform("win32") == "other"
    assert detect_platform("linux", _fake_root(tmp_path / "a", "5.15.90.1-microsoft-standard-WSL2")) == "wsl2"
    assert detect_platform("linux", _fake_root(tmp_path / "b", "4.4.0-19041-Microsoft")) == "wsl1"
    assert detect_platform("linux", _fake_root(tmp_path / "c", "6.1.0-13-amd64")) == "linux"
    p = probe(sys_platform="linux", root=_fake_root(tmp_path / "d", "4.4.0-19041-Microsoft"))
    assert p.platform == "wsl1" and not p.available and "WSL1" in p.reason


def test_macos_probe_runs_sandbox_exec() -> None:
    """sandbox-exec cannot run here: its runner is faked (the argv it is given is checked)."""
    seen: list[list[str]] = []

    def ok(argv: list[str], timeout: float) -> tuple[int, str]:
        seen.append(argv)
        return 0, ""

    m = probe(sys_platform="darwin", which=lambda n: "/usr/bin/sandbox-exec", run=ok)
    assert m.platform == "macos" and m.available and m.backend == "seatbelt" and m.checks["sandbox-exec"] == "ok"
    assert "untested on real hardware" in m.reason
    assert seen[0][:2] == ["/usr/bin/sandbox-exec", "-p"] and "(deny network*)" in seen[0][2]
    bad = probe(
        sys_platform="darwin",
        which=lambda n: "/usr/bin/sandbox-exec",
        run=lambda argv, timeout: (65, "sandbox-exec: sandbox_apply: Operation not permitted"),
    )
    assert not bad.available and "Operation not permitted" in bad.reason
    none = probe(sys_platform="darwin", which=lambda n: None)
    assert not none.available and none.checks["sandbox-exec"] == "sandbox-exec not found"


def test_containers(tmp_path: Path) -> None:
    assert detect_container(tmp_path, {"container": "podman"}) == "podman"
    (tmp_path / ".dockerenv").write_text("")
    assert detect_container(tmp_path, {}) == "docker"
    (tmp_path / ".dockerenv").unlink()
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/besteffort/pod1\n")
    assert detect_container(tmp_path, {}) == "kubernetes"
    (tmp_path / "proc/1/cgroup").write_text("0::/\n")
    assert detect_container(tmp_path, {}) is None


def test_real_probe_installs_the_unix_socket_filter_here() -> None:
    p = probe()
    assert p.checks["seccomp"] == "ok" and "seccomp" not in p.reason


def test_seccomp_refused_keeps_bwrap_and_names_the_reduced_guarantee() -> None:
    def run(argv: list[str], timeout: float) -> tuple[int, str]:
        if "--seccomp" in argv:
            return 1, "bwrap: prctl(PR_SET_SECCOMP): Invalid argument"
        return 0, ""

    p = probe(run=run, which=lambda n: f"/usr/bin/{n}", sys_platform="linux")
    assert p.available and p.backend == "bwrap"
    assert "Invalid argument" in p.checks["seccomp"]
    assert "Unix sockets" in p.reason
