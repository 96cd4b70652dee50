"""Every permission-mode name the agents and the permission models we follow use, mapped onto one internal model.

A mode answers three questions for a call the rules did not settle: up to which requirement does the
mode allow by itself (``ceiling``), what happens above it (``escalation``: ask a person, deny, or ask
auto mode's classifier), and whether it is bypass-class (it reaches danger-full-access by itself; the
managed kill switch turns every such mode into ``default``). The table ``MODES`` is the single
source; ``docs/POLICY.md`` prints the same table.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from nexusd.core.model import Requirement

Escalation = Literal["ask", "deny", "classifier"]
# What a mode whose ceiling is workspace-write allows by itself at that level:
# "all" every workspace write (the five-tier model's workspace-write); "edits_fs" edit tools plus shell commands
# made only of Claude's common filesystem commands (Claude's acceptEdits); "edits" edit tools only
# (Nexus CLI's ACCEPT_EDITS and YOLO, Gemini's autoEdit: delete, move and shell calls are asked).
# "seed_edits" the Nexus CLI's own edit tools only (its EDIT_TOOLS: edit_file, create_file, the str_replace editors;
# not write_file, which its tiers call dangerous and not an edit tool).
WriteScope = Literal["all", "edits_fs", "edits", "seed_edits"]


class ModeSpec(msgspec.Struct, frozen=True):
    """One internal mode. ``ceiling`` 0 means the mode allows nothing by itself."""

    name: str  # internal name
    ceiling: int  # highest Requirement the mode allows without a rule (0..3)
    escalation: Escalation  # above the ceiling
    shell_auto: bool = True  # False: shell calls never allowed by mode alone (Nexus CLI's CAUTIOUS)
    deny_writes: bool = False  # plan: anything that writes or runs is denied, not asked
    prompts: bool = True  # False: every would-be prompt becomes a deny (dontAsk)
    write_scope: WriteScope = "all"
    # The Nexus CLI's tool tiers (seed 004): by itself the mode allows only safe-tier tools (reads, and with
    # write_scope "seed_edits" its edit tools inside the workspace); every cautious or dangerous tool is asked,
    # whatever the call does (`execute_bash ls` included).
    tiers: bool = False
    reads_anywhere: bool = False  # a safe tool's read outside the workspace too (never credentials or protected)
    summary: str = ""

    @property
    def bypass(self) -> bool:
        """Bypass-class: allows danger-full-access by itself, so the managed kill switch covers it.

        Derived, not declared: a mode that grants what bypass grants cannot escape ``disable_bypass``
        by being spelled differently (danger-full-access, allow, yolo, any later alias).
        """
        return self.ceiling >= _DFA


_RO, _WW, _DFA = int(Requirement.READ_ONLY), int(Requirement.WORKSPACE_WRITE), int(Requirement.DANGER_FULL_ACCESS)

INTERNAL: dict[str, ModeSpec] = {
    m.name: m
    for m in (
        ModeSpec("default", _RO, "ask", summary="reads inside the workspace allowed; everything else asked"),
        ModeSpec(
            "nexus_default",
            _RO,
            "ask",
            shell_auto=False,
            tiers=True,
            reads_anywhere=True,
            summary="the Nexus CLI's DEFAULT: safe tools (reads) allowed, every cautious or dangerous tool asked",
        ),
        ModeSpec(
            "cautious",
            _RO,
            "ask",
            shell_auto=False,
            tiers=True,
            summary="safe tools reading inside the workspace allowed; every other tool asked",
        ),
        ModeSpec(
            "accept_edits",
            _WW,
            "ask",
            write_scope="edits_fs",
            summary="reads, file edits and mkdir/touch/rm/rmdir/mv/cp/sed inside the workspace; rest asked",
        ),
        ModeSpec(
            "edits_only",
            _WW,
            "ask",
            write_scope="edits",
            summary="reads and file edits inside the workspace; deletes, moves and shell asked",
        ),
        ModeSpec(
            "nexus_edits",
            _WW,
            "ask",
            shell_auto=False,
            write_scope="seed_edits",
            tiers=True,
            reads_anywhere=True,
            summary="the Nexus CLI's ACCEPT_EDITS/YOLO: safe tools, its edit tools inside the workspace; rest asked",
        ),
        ModeSpec("plan", _RO, "ask", deny_writes=True, summary="read-only: writes and commands denied, not asked"),
        ModeSpec(
            "auto",
            _WW,
            "classifier",
            write_scope="edits_fs",
            summary="accept_edits, then the external classifier decides the rest",
        ),
        ModeSpec("dont_ask", _RO, "deny", prompts=False, summary="never asks: whatever would be asked is denied"),
        ModeSpec("bypass", _DFA, "ask", summary="everything allowed but deny/ask rules and safety"),
        ModeSpec("read_only", _RO, "deny", summary="five-tier read-only: reads allowed, anything more denied"),
        ModeSpec("workspace_write", _WW, "ask", summary="five-tier workspace-write: escalation asked"),
        ModeSpec("danger_full_access", _DFA, "ask", summary="five-tier danger-full-access: everything tool-declared"),
        ModeSpec("prompt", _RO, "ask", summary="five-tier prompt: ask before any escalation"),
        ModeSpec("allow", _DFA, "ask", summary="five-tier allow: permit anything up to its level"),
    )
}

# (spelling, who uses it, internal name). Lookup is exact first; see ``resolve`` for the fallback.
MODES: tuple[tuple[str, str, str], ...] = (
    # the five-tier model (claw-code's runtime): three tool-declared levels that double as session modes, then
    # prompt and allow
    ("read-only", "five-tier model", "read_only"),
    ("workspace-write", "five-tier model", "workspace_write"),
    ("danger-full-access", "five-tier model", "danger_full_access"),
    ("prompt", "five-tier model", "prompt"),
    ("allow", "five-tier model", "allow"),
    # Claude Code
    ("default", "Claude Code, Gemini CLI", "default"),
    ("manual", "Claude Code (alias of default)", "default"),
    ("acceptEdits", "Claude Code", "accept_edits"),
    ("plan", "Claude Code, Gemini CLI", "plan"),
    ("auto", "Claude Code", "auto"),
    ("dontAsk", "Claude Code", "dont_ask"),
    ("bypassPermissions", "Claude Code", "bypass"),
    # Nexus CLI (its upper-case modes for Claude and Gemini)
    ("DEFAULT", "Nexus CLI", "nexus_default"),
    ("CAUTIOUS", "Nexus CLI", "cautious"),
    ("YOLO", "Nexus CLI (auto-approves its edit tools only)", "nexus_edits"),
    ("PLAN", "Nexus CLI (Claude's plan)", "plan"),
    ("ACCEPT_EDITS", "Nexus CLI", "nexus_edits"),
    ("BYPASS_PERMISSIONS", "Nexus CLI", "bypass"),
    # Gemini CLI
    ("autoEdit", "Gemini CLI", "edits_only"),
    ("auto_edit", "Gemini CLI", "edits_only"),
    ("yolo", "Gemini CLI", "bypass"),
    # Codex CLI approval_policy (nexus-hook codex reports these; its sandbox modes are the five-tier model's
    # first three)
    ("on-request", "Codex CLI", "default"),
    ("untrusted", "Codex CLI (before 0.16x)", "default"),
    ("on-failure", "Codex CLI (deprecated)", "default"),
    ("never", "Codex CLI (exec's default; its hooks say bypassPermissions)", "dont_ask"),
    ("build", "OpenCode (its default agent; its plan agent is plan)", "default"),
    # internal names, accepted verbatim (nexusctl mode, policy files)
    *(
        (n, "nexusd", n)
        for n in (
            "accept_edits",
            "edits_only",
            "nexus_default",
            "nexus_edits",
            "dont_ask",
            "bypass",
            "cautious",
            "read_only",
            "workspace_write",
            "danger_full_access",
        )
    ),
)

_EXACT: dict[str, str] = {spelling: internal for spelling, _, internal in MODES}
# Case-/separator-insensitive fallback, minus spellings whose meaning depends on case (YOLO vs yolo).
_AMBIGUOUS = {"yolo"}
_LOOSE: dict[str, str] = {}
for _s, _, _i in MODES:
    _k = _s.lower().replace("-", "").replace("_", "")
    if _k not in _AMBIGUOUS:
        _LOOSE.setdefault(_k, _i)


def resolve(name: str | None) -> ModeSpec | None:
    """The internal mode for a spelling, or None when unknown (the caller falls back to ``default``)."""
    if name is None:
        return None
    internal = _EXACT.get(name)
    if internal is None:
        internal = _LOOSE.get(name.lower().replace("-", "").replace("_", ""))
    return INTERNAL.get(internal) if internal else None


def did_you_mean(name: str) -> str | None:
    """The known spelling closest to a mistyped mode name, or None when nothing is close."""
    import difflib

    spellings = list(dict.fromkeys(spelling for spelling, _, _ in MODES))
    close = difflib.get_close_matches(name, spellings, n=1, cutoff=0.6)
    if not close:
        lowered = {s.lower(): s for s in spellings}
        close = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)]
    return close[0] if close else None


def internal_name(name: str) -> str | None:
    spec = resolve(name)
    return spec.name if spec else None
