"""Where an allowed shell command runs: in the sandbox, outside it (every sub-command is excluded), or
``mixed`` (some are). Pure: the gate (sandbox auto-allow) and the sandbox (the agent's wrap) both ask
it, so it lives below both.

``excluded_commands`` entries are the policy's own Bash rules (``Bash(npm run *)`` or bare
``npm run *``): one matcher for the gate and the sandbox, strict like an allow rule (leaving the
sandbox widens): exact words, ``/usr/bin/x`` is not ``x``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal, Protocol

from nexusd.core.model import Flag
from nexusd.core.policy.rules import Rule, RuleError, parse_rule

Disposition = Literal["sandbox", "unsandboxed", "mixed"]
UNREADABLE = frozenset({Flag.UNPARSEABLE, Flag.DYNAMIC})


class Exclusions(Protocol):
    """The two ``[sandbox]`` settings the disposition reads (``SandboxSettings`` has them)."""

    @property
    def excluded_commands(self) -> tuple[str, ...]: ...
    @property
    def allow_unsandboxed_commands(self) -> bool: ...


def excluded_rule(text: str) -> Rule:
    """An ``excluded_commands`` entry as the policy's own Bash rule. Raises RuleError for a bad pattern."""
    t = text.strip()
    return _excluded_rule(t if t.startswith("Bash(") and t.endswith(")") else f"Bash({t})")


@functools.lru_cache(maxsize=512)
def _excluded_rule(text: str) -> Rule:
    return parse_rule(text, "allow", layer="sandbox", origin="sandbox.excluded_commands")


def _match_rule(rule: str, argv: tuple[str, ...]) -> bool:
    try:
        return excluded_rule(rule).matches_argv(argv)
    except RuleError:
        return False  # a rule that does not parse excludes nothing: the command stays sandboxed


def command_disposition(
    command: str, exclusions: Exclusions, *, parsed: tuple[Sequence[tuple[str, ...]], frozenset[Flag]] | None = None
) -> Disposition:
    """Whether an allowed shell call runs sandboxed, unsandboxed, or is ``mixed``: a mixed chain must not
    be unsandboxed silently; the gate asks a person.

    ``parsed``: the command's argvs and flags as the request's classification already found them, so the
    command is not parsed again; without it the command is parsed here.
    """
    if not exclusions.excluded_commands or not exclusions.allow_unsandboxed_commands:
        return "sandbox"
    if parsed is None:
        from nexusd.core.classify.bash import parse

        analysis = parse(command)
        parsed = (tuple(c.argv for c in analysis.commands), analysis.flags)
    argvs, flags = parsed
    if flags & UNREADABLE or not argvs:
        return "sandbox"  # what we cannot read statically is never let out of the sandbox
    hits = [any(_match_rule(r, argv) for r in exclusions.excluded_commands) for argv in argvs]
    if all(hits):
        return "unsandboxed"
    return "mixed" if any(hits) else "sandbox"
