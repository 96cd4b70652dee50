"""How risky a request looks to a person, and which "always" rules are too broad to offer.

The daemon is the authority on both (the engine flags calls and refuses blanket rules); the TUI mirrors
them so a person sees the risk before answering and cannot even send a blanket rule by mistake. Flag
names are the wire strings of ``Verdict.flags`` (see docs/POLICY.md); the TUI may not import the core.
"""

from __future__ import annotations

import re
from typing import Literal

from nexusd.core.policy import suggest
from nexusd.core.tools import PATH_KEYS
from nexusd.protocol import CallInfo, Verdict

Tier = Literal["low", "medium", "high", "critical"]

FLAG_TEXT: dict[str, str] = {
    "unparseable": "the command could not be parsed with confidence",
    "dynamic": "runs code built at run time (substitution, eval, source ...)",
    "dangerous_env": "sets a dangerous variable (LD_PRELOAD, PATH, GIT_* ...)",
    "catastrophic": "catastrophic command (rm -rf /, mkfs, dd onto a device ...)",
    "outside_workspace": "touches paths outside the workspace",
    "protected_path": "touches a protected path (.git, agent settings, shell rc, nexusd's own files)",
    "symlink_escape": "a path in the workspace resolves outside it (symlink)",
    "hidden_chars": "contains hidden characters (bidi controls, zero-width)",
    "private_address": "reaches a private, loopback or metadata address",
    "large_write": "writes more than 10 MB",
    "large_read": "reads a file over 10 MB",
    "binary_read": "reads a binary file",
    "unknown_tool": "a tool nexusd does not know",
    "background": "runs in the background",
    "secret_read": "reads a secret the sandbox hides (credentials, a .env file, nexusd's own files)",
    "metadata_address": "reaches a cloud metadata or link-local address (refused)",
}

CRITICAL_FLAGS = frozenset({"catastrophic"})
HIGH_FLAGS = frozenset(
    {
        "unparseable",
        "dynamic",
        "dangerous_env",
        "outside_workspace",
        "protected_path",
        "symlink_escape",
        "hidden_chars",
        "private_address",
        "large_write",
        "secret_read",
        "metadata_address",
    }
)

TIER_STYLE: dict[str, str] = {
    "low": "green",
    "medium": "yellow",
    "high": "bold red",
    "critical": "bold reverse red",
}


def tier(verdict: Verdict) -> Tier:
    flags = set(verdict.flags)
    if flags & CRITICAL_FLAGS:
        return "critical"
    if flags & HIGH_FLAGS or verdict.requirement == "danger-full-access":
        return "high"
    if flags or verdict.requirement == "workspace-write":
        return "medium"
    return "low"


def is_dangerous(verdict: Verdict) -> bool:
    """ "Always" on these asks for a second confirmation."""
    return tier(verdict) in ("high", "critical")


def flag_lines(verdict: Verdict) -> list[str]:
    """Why the request was flagged: the engine's own notes first, then any flag they do not explain."""
    notes = list(verdict.details.notes) if verdict.details else []
    lines = list(notes)
    for flag in verdict.flags:
        text = FLAG_TEXT.get(flag, flag)
        words = flag.split("_")
        if not any(flag in n or all(w in n.lower() for w in words) for n in notes):
            lines.append(f"{flag}: {text}")
    return lines


# --------------------------------------------------------------------------- blanket rules

# One check for "too broad" everywhere (engine suggestions, learning, policy warnings, every UI).
blanket_reason = suggest.blanket_reason


def exact_rule(call: CallInfo, verdict: Verdict) -> str:
    """A rule for exactly this call: what "never" offers when the engine suggested nothing.

    A deny rule that is too narrow only means being asked again, so exact is the safe default; the
    person can widen it in the editor.
    """
    det = verdict.details
    tool = det.tool if det else call.tool
    inp = call.input
    command = inp.get("command")
    if isinstance(command, str) and command.strip():
        return f"{tool}({command.strip()})"
    if det and det.kind == "fetch" and det.domain:
        return f"{tool}(domain:{det.domain})"
    for key in (*PATH_KEYS, "url"):
        if isinstance(inp.get(key), str) and inp[key]:
            return f"{tool}({inp[key]})"
    return tool


# --------------------------------------------------------------------------- words a person reads

# The engine's requirement names are its sandbox levels; a person reads what they mean.
REQUIREMENT_TEXT: dict[str, str] = {
    "read-only": "only reads",
    "workspace-write": "can change files in this workspace",
    "danger-full-access": "can reach beyond the workspace: any of your files, the network, other programs",
}


def requirement_text(verdict: Verdict) -> str:
    """What the call is allowed to reach if it runs, in a person's words ("" when the engine did not say)."""
    req = verdict.requirement
    return REQUIREMENT_TEXT.get(req, f"needs {req}") if req else ""


def stated_reason(call: CallInfo) -> str:
    """The agent's own words for the call (Claude Code's Bash ``description`` ...): its claim, not a fact."""
    for key in ("description", "justification", "reason"):
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


_HOST = re.compile(r"(?:(?<=//)|(?<=@)|(?<=domain:)|(?<=\s)|^)([^\s/:@'\"()<>\[\]{}|;&,]+\.[^\s/:@'\"()<>\[\]{}|;&,]+)")


def lookalike(text: str) -> str:
    """A host name in ``text`` that may not be what it looks like: punycode (``xn--``) or non-ASCII letters
    (a Cyrillic ``а`` in ``аpple.com``). Returns a warning naming it, or ""."""
    for m in _HOST.finditer(text[:4000]):
        host = m.group(1).strip(".").lower()
        if "." not in host:
            continue
        labels = host.split(".")
        if any(label.startswith("xn--") for label in labels):
            try:
                shown = host.encode("ascii").decode("idna")
            except (UnicodeError, ValueError):
                shown = "not valid IDNA"
            return f"look-alike domain: {host} (displayed as {shown})"
        if any(ord(ch) > 127 and ch.isalpha() for ch in host):
            try:
                ascii_form = host.encode("idna").decode("ascii")
            except (UnicodeError, ValueError):
                ascii_form = "not valid IDNA"
            return f"look-alike domain: {host} (really {ascii_form})"
    return ""


_NEEDS = re.compile(r"\bneeds (read-only|workspace-write|danger-full-access)\b")
_MODE_ASKS = re.compile(r"; mode (\S+) asks\b")


def person_reason(reason: str) -> str:
    """The engine's reason with its sandbox level names in a person's words ("Bash needs
    danger-full-access; mode default asks" -> "Bash can reach beyond the workspace ...; your mode default
    asks for that")."""
    text = _NEEDS.sub(lambda m: REQUIREMENT_TEXT[m.group(1)], reason)
    return _MODE_ASKS.sub(lambda m: f"; the session's mode ({m.group(1)}) asks you for that", text)
