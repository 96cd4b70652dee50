"""Seed 000's capability probe: run the real thing rather than look for a binary. INTERIM (minimal)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from nexusd.protocol import SandboxProbe


def probe() -> SandboxProbe:
    """Blocking (runs processes, up to a few seconds): call it from a worker thread."""
    if not sys.platform.startswith("linux"):
        return SandboxProbe(platform=sys.platform, available=False, reason="only Linux is probed yet")
    checks: dict[str, str] = {}
    for name, argv in (
        ("bwrap", ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"]),
        ("unshare", ["unshare", "--user", "--map-root-user", "true"]),
    ):
        if shutil.which(argv[0]) is None:
            checks[name] = f"{argv[0]} not found"
            continue
        try:
            r = subprocess.run(argv, capture_output=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired) as e:
            checks[name] = str(e)
            continue
        checks[name] = "ok" if r.returncode == 0 else r.stderr.decode(errors="replace").strip()[:200]
    for backend in ("bwrap", "unshare"):
        if checks.get(backend) == "ok":
            return SandboxProbe(platform="linux", available=True, backend=backend, checks=checks)
    return SandboxProbe(platform="linux", available=False, checks=checks, reason="; ".join(checks.values()))
