"""Whether a sandbox can run here, probed honestly: run a real (minimal) sandbox instead of looking for a binary.

A binary on PATH proves nothing: user namespaces can be disabled by sysctl, by AppArmor, by a container
runtime or by a hardened service unit (``RestrictNamespaces=``). So the probe runs
``unshare --user --map-root-user true`` and a ``bwrap`` sandbox with the very flags the plans use, each
with a 5 s timeout, and says why whatever failed failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nexusd.protocol import SandboxProbe

TIMEOUT = 5.0

# (returncode, stderr) of running argv; an exception means it could not run at all.
Runner = Callable[[list[str], float], tuple[int, str]]
Which = Callable[[str], str | None]

# The flags every bwrap plan uses (bwrap.py), minus the mounts; the probe runs exactly these.
BWRAP_FULL = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--unshare-net",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
]
# Older bubblewrap (< 0.8) has no --disable-userns; kernels that refuse a user namespace to root-run bwrap.
BWRAP_COMPAT = [
    "--unshare-user-try",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--unshare-net",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
]

# A profile that denies something, so the probe sees Seatbelt compile and apply a profile.
SEATBELT_PROBE = "(version 1)(allow default)(deny network*)"
SEATBELT_UNTESTED = (
    "seatbelt (sandbox-exec): untested on real hardware until the escape corpus runs on a Mac "
    "(docs/SANDBOX.md); no pid namespace, the shared /tmp is read-only"
)
UNSHARE_GUARANTEES = (
    "unshare fallback (bwrap unusable): new user/mount/pid/ipc/uts(/net) namespaces, every mount remounted "
    "read-only except the workspace and allow_write, masks as with bwrap, capabilities dropped; but the "
    "host /dev stays visible and there is no seccomp filter"
)


SECCOMP_MISSING = "no seccomp filter: sandboxed commands can connect to the host's Unix sockets"


def _seccomp_check(run: Runner, bwrap_argv: list[str]) -> str:
    """Whether bubblewrap installs the Unix-socket filter (``ok`` or why not)."""
    import platform as _platform
    import tempfile

    from nexusd.sandbox.seccomp import unix_socket_filter, with_filter

    try:
        data = unix_socket_filter(_platform.machine())
    except ValueError as e:
        return str(e)
    # An unlinked file, opened by the child through this process's descriptor table: a daemon killed
    # mid-probe leaves nothing behind in the temporary directory.
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        return _attempt(run, with_filter(bwrap_argv, Path(f"/proc/{os.getpid()}/fd/{f.fileno()}")))


def _run(argv: list[str], timeout: float) -> tuple[int, str]:
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return r.returncode, r.stderr.decode(errors="replace").strip()


def _attempt(run: Runner, argv: list[str]) -> str:
    """``ok`` or a one-line reason."""
    try:
        rc, err = run(argv, TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT:g}s"
    except OSError as e:
        return f"could not run {argv[0]}: {e.strerror or e}"
    if rc == 0:
        return "ok"
    first = err.splitlines()[-1] if err else ""
    return f"exit {rc}: {first[:200]}" if first else f"exit {rc}"


def detect_platform(sys_platform: str | None = None, root: Path = Path("/")) -> str:
    """linux | wsl2 | wsl1 | macos | other."""
    plat = sys_platform or sys.platform
    if plat == "darwin":
        return "macos"
    if not plat.startswith("linux"):
        return "other"
    try:
        release = (root / "proc/sys/kernel/osrelease").read_text().lower()
    except OSError:
        release = ""
    if "microsoft" in release:
        # WSL2 runs a real Linux kernel ("...-microsoft-standard-WSL2"); WSL1 emulates one ("...-Microsoft").
        return "wsl2" if ("wsl2" in release or "microsoft-standard" in release) else "wsl1"
    return "linux"


def detect_container(root: Path = Path("/"), environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    if env.get("container"):
        return env["container"]  # systemd-nspawn, podman, lxc set this for pid 1's children
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run/.containerenv").exists():
        return "podman"
    try:
        cgroup = (root / "proc/1/cgroup").read_text()
    except OSError:
        cgroup = ""
    for marker, name in (
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("lxc", "lxc"),
        ("containerd", "containerd"),
        ("libpod", "podman"),
    ):
        if marker in cgroup:
            return name
    return None


def _userns_facts(root: Path) -> list[str]:
    """Sysctls that explain a failed user namespace (shown only when something failed)."""
    facts = []
    for rel, bad in (
        ("proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("proc/sys/user/max_user_namespaces", "0"),
        ("proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        try:
            if (root / rel).read_text().strip() == bad:
                facts.append(f"{rel.removeprefix('proc/sys/').replace('/', '.')}={bad}")
        except OSError:
            pass
    return facts


def probe(
    *,
    run: Runner = _run,
    which: Which = shutil.which,
    sys_platform: str | None = None,
    root: Path = Path("/"),
    environ: dict[str, str] | None = None,
) -> SandboxProbe:
    """Blocking (runs processes, up to a few seconds): call it from a worker thread. The daemon runs
    it once at start and keeps the answer for its life (``nexusctl sandbox probe --refresh`` re-runs it).

    Every collaborator is injectable so both outcomes can be tested without breaking the machine.
    """
    platform = detect_platform(sys_platform, root)
    container = detect_container(root, environ) if platform in ("linux", "wsl2") else None
    checks: dict[str, str] = {}
    if platform == "macos":
        sbx = which("sandbox-exec")
        checks["sandbox-exec"] = (
            _attempt(run, [sbx, "-p", SEATBELT_PROBE, "/usr/bin/true"]) if sbx else "sandbox-exec not found"
        )
        if checks["sandbox-exec"] == "ok":
            return SandboxProbe(
                platform=platform, available=True, backend="seatbelt", checks=checks, reason=SEATBELT_UNTESTED
            )
        return SandboxProbe(
            platform=platform,
            available=False,
            checks=checks,
            reason=f"macOS: sandbox-exec does not work ({checks['sandbox-exec']})",
        )
    if platform == "wsl1":
        return SandboxProbe(
            platform=platform,
            available=False,
            checks=checks,
            reason="WSL1 has no Linux namespaces: unsupported (use WSL2)",
        )
    if platform not in ("linux", "wsl2"):
        return SandboxProbe(platform=platform, available=False, reason=f"unsupported platform {sys.platform}")

    unshare = which("unshare")
    checks["userns"] = (
        _attempt(run, [unshare, "--user", "--map-root-user", "true"])
        if unshare
        else "unshare not found (install util-linux)"
    )
    bwrap = which("bwrap")
    if bwrap is None:
        checks["bwrap"] = "bwrap not found (install bubblewrap)"
    else:
        mounts = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        checks["bwrap"] = _attempt(run, [bwrap, *mounts, *BWRAP_FULL, "--", "true"])
        if checks["bwrap"] != "ok":
            checks["bwrap_compat"] = _attempt(run, [bwrap, *mounts, *BWRAP_COMPAT, "--", "true"])
    if unshare and checks["userns"] == "ok":
        # The fallback needs mount, pid and net namespaces too, and mount(8) inside.
        checks["unshare"] = _attempt(
            run,
            [
                unshare,
                "--user",
                "--map-root-user",
                "--mount",
                "--pid",
                "--fork",
                "--ipc",
                "--uts",
                "--net",
                "--mount-proc",
                "--",
                "true",
            ],
        )

    if checks.get("bwrap") == "ok" or checks.get("bwrap_compat") == "ok":
        notes = [] if checks.get("bwrap") == "ok" else ["old bubblewrap: nested user namespaces are not disabled"]
        flags = BWRAP_FULL if checks.get("bwrap") == "ok" else BWRAP_COMPAT
        checks["seccomp"] = _seccomp_check(run, [str(bwrap), *mounts, *flags, "--", "true"])
        if checks["seccomp"] != "ok":
            notes.append(f"{SECCOMP_MISSING} ({checks['seccomp']})")
        note = "; ".join(notes)
        return SandboxProbe(
            platform=platform, available=True, backend="bwrap", container=container, checks=checks, reason=note
        )
    if checks.get("unshare") == "ok":
        return SandboxProbe(
            platform=platform,
            available=True,
            backend="unshare",
            container=container,
            checks=checks,
            reason=UNSHARE_GUARANTEES,
        )
    why = [f"{k}: {v}" for k, v in checks.items() if v != "ok"]
    facts = _userns_facts(root)
    if facts:
        why.append("user namespaces restricted (" + ", ".join(facts) + ")")
    if container:
        why.append(f"inside a {container} container (its runtime may forbid namespaces)")
    return SandboxProbe(
        platform=platform,
        available=False,
        container=container,
        checks=checks,
        reason="no sandbox works here: " + "; ".join(why),
    )
