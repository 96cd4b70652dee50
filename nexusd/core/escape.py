"""Escapes: an agent asking to run one shell call *outside* nexusd's sandbox (pure, no I/O).

Sandbox-first mode runs every allowed shell call sandboxed. When a command fails because of the sandbox
(a read-only path, a masked file, no network, a closed socket), the agent may ask to run it outside, in
its own terms: Claude Code's ``dangerouslyDisableSandbox: true`` Bash parameter, Codex's
``sandbox_permissions: "require_escalated"`` (with ``justification``), or, for agents whose shell tool
has no such parameter, a first line ``# nexus: outside-sandbox`` (a shell comment: the command runs the
same either way). An escape is only ever a request: the gate asks a person with what the sandbox would
have contained (``escape_summary``), and no mode, rule or grant allows it by itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nexusd.core.model import Classification

MARKER = "# nexus: outside-sandbox"
_MARKER_RE = re.compile(r"\A[ \t]*#[ \t]*nexus[ \t]*:[ \t]*outside-sandbox[ \t]*(?:\r?\n|\Z)", re.IGNORECASE)
# programs whose usual job needs the network (a sandbox without network makes them fail)
_NETWORK_PROGRAMS = frozenset(
    {"curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "telnet", "ftp", "gh", "docker", "podman"}
)
_NETWORK_SUBCOMMANDS = {
    "git": frozenset({"push", "pull", "fetch", "clone", "ls-remote", "submodule"}),
    "pip": frozenset({"install", "download"}),
    "pip3": frozenset({"install", "download"}),
    "npm": frozenset({"install", "i", "ci", "publish", "update", "view"}),
    "yarn": frozenset({"install", "add"}),
    "pnpm": frozenset({"install", "add", "i"}),
    "cargo": frozenset({"install", "fetch", "build", "update", "publish"}),
    "go": frozenset({"get", "install", "mod"}),
}


def escape_request(tool_input: Mapping[str, object], command: str | None) -> str | None:
    """None when the call does not ask to leave the sandbox; else the agent's stated reason ('' if none).

    Only an explicit request counts (a true boolean, the exact escalation value, the marker as the first
    line): anything else stays sandboxed, which is the safe side of a misread."""
    asked = (
        tool_input.get("dangerouslyDisableSandbox") is True
        or tool_input.get("sandbox_permissions") == "require_escalated"
        or tool_input.get("with_escalated_permissions") is True
        or (isinstance(command, str) and _MARKER_RE.match(command) is not None)
    )
    if not asked:
        return None
    for key in ("justification", "description"):
        why = tool_input.get(key)
        if isinstance(why, str) and why.strip():
            return " ".join(why.split())[:300]
    return ""


def how_to_escape(tool: str) -> str:
    """How this agent's shell tool asks to run a call outside the sandbox, in its own terms."""
    if tool == "Bash":  # Claude Code
        return (
            'run it again with "dangerouslyDisableSandbox": true in the Bash call (or with '
            f'"{MARKER}" as its first line); the user is asked'
        )
    return f'run it again with "{MARKER}" as its first line; the user is asked'


def escape_summary(cls: Classification, workspace: str | None) -> str:
    """What the sandbox would have contained for this command: the person's reason to say yes or no."""
    root = (workspace or "").rstrip("/")

    def outside(p: str) -> bool:
        return not root or not (p == root or p.startswith(root + "/"))

    parts: list[str] = []
    writes = [w for w in cls.writes if outside(w)]
    if writes:
        parts.append("writes outside the workspace: " + ", ".join(writes[:5]) + (" ..." if len(writes) > 5 else ""))
    net: list[str] = []
    for c in cls.commands:
        prog = c.argv[0].rsplit("/", 1)[-1] if c.argv else ""
        sub = next((a for a in c.argv[1:] if not a.startswith("-")), "")
        if prog in _NETWORK_PROGRAMS or sub in _NETWORK_SUBCOMMANDS.get(prog, ()):
            net.append(" ".join(c.argv[:2]))
    if cls.domain:
        net.append(cls.domain)
    if net:
        parts.append("network: " + ", ".join(dict.fromkeys(net)))
    reads = [r for r in cls.reads if outside(r)]
    if reads:
        parts.append("reads outside the workspace: " + ", ".join(reads[:5]) + (" ..." if len(reads) > 5 else ""))
    if not parts:
        parts.append(
            "everything the sandbox hides or keeps read-only (credentials, .env files, paths outside "
            "the workspace, the network, host sockets)"
        )
    return "; ".join(parts)
