"""What the sandbox refused, as far as the runner can see it: denied writes in the command's error output,
closed sockets, and protected files it planted (removed afterwards).

The sandbox does not tell us which of the command's operations it blocked; the command's own error lines
do, in the shapes the C library and common tools print (``Read-only file system``, ``Operation not
permitted``, ``Permission denied`` with the path when they give it). Each such line, and each planted file
the scrub removed, becomes one violation: recorded in the audit trail tied to the session and command, and
shown to every UI, as Claude Code's sandbox reports its violations. A command that prints such text for other
reasons is reported too: the record says what was seen, not more.
"""

from __future__ import annotations

import re

MAX_VIOLATIONS = 20
MAX_LINE = 300

# errno texts of refusals the sandbox causes (EROFS for read-only binds, EPERM from seccomp for unix sockets,
# EACCES for masked paths), as glibc and musl print them and as Python, Node and Go wrap them.
_REFUSED = re.compile(
    r"(read-only file system|\berofs\b|operation not permitted|\beperm\b|permission denied|\beacces\b)",
    re.IGNORECASE,
)
_UNIX = re.compile(r"\b(AF_UNIX|unix socket|\.sock\b|docker\.sock|bus|ssh-agent|connect)", re.IGNORECASE)


def _kind(line: str) -> str:
    low = line.lower()
    if "read-only" in low or "erofs" in low:
        return "write refused (read-only)"
    if _UNIX.search(line) and ("not permitted" in low or "eperm" in low):
        return "socket refused"
    if "permission denied" in low or "eacces" in low:
        return "access refused"
    return "operation refused"


def scan(stderr: bytes) -> list[str]:
    """Violations seen in the command's error output, in order, each once, at most MAX_VIOLATIONS."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in stderr.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or not _REFUSED.search(line):
            continue
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + "..."
        text = f"{_kind(line)}: {line}"
        if text not in seen:
            seen.add(text)
            out.append(text)
        if len(out) >= MAX_VIOLATIONS:
            break
    return out


def read_tap(path: str) -> list[str]:
    """The agent wrapper's findings file (lines ``cut | awk`` kept from the command's error output: at most
    20 of 1,000 bytes), scanned like ``nexusctl run``'s tap. A missing or unreadable file is no finding."""
    try:
        with open(path, "rb") as f:
            return scan(f.read(StderrTap.LIMIT))
    except OSError:
        return []


def planted(removed: list[str], failed: list[str]) -> list[str]:
    """The scrub's findings as violations."""
    return [f"planted {p} (removed)" for p in removed] + [f"planted {p} (could NOT be removed)" for p in failed]


class StderrTap:
    """Collects the command's error output while passing it through (a bounded tail is kept for ``scan``)."""

    LIMIT = 64 << 10

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > self.LIMIT:
            del self.buf[: len(self.buf) - self.LIMIT]

    def violations(self) -> list[str]:
        return scan(bytes(self.buf))


def report(
    violations: list[str],
    *,
    command: str,
    cwd: str,
    socket: str | None,
    session: str | None = None,
    exit_code: int | None = None,
) -> bool:
    """Tell the daemon (best effort, a short timeout): it records them and shows every UI. False when it
    could not be told; the command's own output has said it already."""
    if not violations:
        return True
    from nexusd.client import Client, NexusClientError
    from nexusd.protocol import SandboxReport

    try:
        with Client(socket_path=socket, role="agent", name="nexus-sandbox", timeout=3.0) as c:
            c.call(
                SandboxReport(
                    command=command,
                    cwd=cwd,
                    violations=violations[:MAX_VIOLATIONS],
                    session=session,
                    exit_code=exit_code,
                )
            )
    except (NexusClientError, OSError):
        return False
    return True
