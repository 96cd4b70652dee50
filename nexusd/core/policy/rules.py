"""Permission rules in Claude Code's syntax: parsing (strict, with clear errors) and matching.

``Tool`` or ``Tool(specifier)``. Bash specifiers match one simple command's argv (after quote removal
and wrapper peeling, done by the classifier): ``*`` matches anything, a word that is only ``*`` matches
whole arguments (so ``Bash(ls *)`` matches ``ls`` and ``ls -la`` but not ``lsof``), the legacy suffix
``:*`` is the same as `` *``. Read/Edit specifiers are gitignore globs (pathspec) anchored as Claude
anchors them. ``WebFetch(domain:…)`` matches a normalized domain; ``mcp__server[__tool|__*]`` MCP tools.

The matching functions are pure: the call's cwd and home arrive as arguments.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pathspec

from nexusd.core.model import Classification, ToolKind
from nexusd.core.tools import tool_info

RuleKind = Literal["allow", "ask", "deny"]
Family = Literal["shell", "read", "edit", "fetch", "mcp", "tool"]

SEP = "\x00"  # argv joiner: NUL never occurs in a valid request, so it cannot be forged inside an argument

# Rule tool names of other providers, mapped to the Claude spelling rules are matched in.
RULE_TOOL_ALIASES: dict[str, str] = {
    # Gemini CLI
    "run_shell_command": "Bash",
    "read_file": "Read",
    "read_many_files": "Read",
    "write_file": "Write",
    "replace": "Edit",
    "glob": "Glob",
    "grep_search": "Grep",
    "list_directory": "LS",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
    # Nexus CLI's tool names / generic agents
    "execute_command": "Bash",
    "execute_bash": "Bash",
    "edit_file": "Edit",
    "create_file": "Write",
    "str_replace_editor": "Edit",
    "str_replace_based_edit_tool": "Edit",
    "list_files": "LS",
    "search_files": "Grep",
    # Codex
    "shell": "Bash",
    "apply_patch": "ApplyPatch",
}
READ_TOOLS = frozenset({"Read", "Glob", "Grep", "LS"})
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "Delete", "Move", "ApplyPatch"})
AGENT_TOOLS = frozenset({"Task", "Agent"})
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_MCP = re.compile(r"mcp__([A-Za-z0-9_\-]+?)(?:__([A-Za-z0-9_\-*]+))?\Z")


class RuleError(ValueError):
    """A rule that does not parse, or contradicts its own examples."""


@dataclass(frozen=True, slots=True)
class PathPattern:
    """A gitignore glob and the directory it is relative to (``None``: the call's cwd)."""

    raw: str
    base: str | None  # absolute directory; None = cwd; "~" = the home directory
    pattern: str  # gitignore pattern relative to base ("" = the base and everything below it)
    spec: pathspec.PathSpec[pathspec.Pattern] | None

    def matches(self, path: str, cwd: str, home: str) -> bool:
        base = cwd if self.base is None else home if self.base == "~" else self.base
        base = posixpath.normpath(base)
        path = posixpath.normpath(path)
        if base == "/":
            rel = path.lstrip("/")
        elif path == base:
            rel = ""
        elif path.startswith(base + "/"):
            rel = path[len(base) + 1 :]
        else:
            return False
        if self.spec is None:
            return True
        if not rel:
            return False
        # ``dir/**`` (and ``dir/``) covers the directory itself too: ``ls ~/notes`` under Read(~/notes/**),
        # ``ls secrets`` under a deny of Read(./secrets/**)
        return self.spec.match_file(rel) or (self.pattern.endswith(("/**", "/")) and self.spec.match_file(rel + "/"))

    def may_match_below(self, directory: str, cwd: str, home: str) -> bool:
        """Whether some path below ``directory`` may match: a recursive read of it (grep -r, rg, find) reads
        them all. Conservative: only a literal or glob segment that cannot match rules a pattern out."""
        base = posixpath.normpath(cwd if self.base is None else home if self.base == "~" else self.base)
        d = posixpath.normpath(directory)
        if d == "/" or base == d or base.startswith(d + "/"):
            return True  # the pattern's whole domain lies below the directory
        if base != "/" and not d.startswith(base + "/"):
            return False
        if self.spec is None:
            return True
        rel = d.lstrip("/") if base == "/" else d[len(base) + 1 :]
        pat = self.pattern.rstrip("/")
        if "/" not in pat:
            return True  # a bare name (gitignore) matches at any depth
        for seg, have in zip(pat.lstrip("/").split("/"), rel.split("/"), strict=False):
            if seg == "**":
                return True
            if not fnmatch.fnmatchcase(have, seg):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule, with where it came from."""

    text: str
    kind: RuleKind
    tool: str  # Claude spelling (Bash, Read, Edit, Write, WebFetch, mcp__s__t, WebSearch, ...)
    family: Family
    spec: str | None = None
    layer: str = "builtin"
    origin: str = "builtin"  # path:line | builtin | session:<id>
    project: bool = False  # from a project layer: allow applies only in a trusted workspace
    bash: re.Pattern[str] | None = field(default=None, compare=False)
    path: PathPattern | None = field(default=None, compare=False)
    domain: str | None = None
    mcp_server: str | None = None
    mcp_tool: str | None = None  # None or "*": every tool of the server
    match: tuple[str, ...] = ()
    not_match: tuple[str, ...] = ()
    # ask rules only (``require_human = true``): only a person answering that very call may allow it; no mode,
    # hook, classifier, grant, learned rule, sandbox auto-allow or agent's own dialog (docs/POLICY.md)
    human: bool = False

    # ------------------------------------------------------------------ matching

    def covers_call(self, cls: Classification) -> bool:
        """Does this rule speak about this kind of call at all (tool level, ignoring the specifier)?"""
        if self.family == "shell":
            return cls.kind == ToolKind.SHELL
        if self.family == "read":
            if self.tool == "Read":
                return cls.kind == ToolKind.READ
            return cls.tool == self.tool
        if self.family == "edit":
            return cls.kind == ToolKind.EDIT if self.tool == "Edit" else cls.tool == self.tool
        if self.family == "fetch":
            return cls.kind == ToolKind.FETCH or cls.tool == "WebFetch"
        if self.family == "mcp":
            return self.matches_mcp(cls.tool)
        if self.tool in AGENT_TOOLS:
            return cls.kind == ToolKind.AGENT or cls.tool in AGENT_TOOLS
        return cls.tool == self.tool

    def matches_argv(self, argv: Sequence[str]) -> bool:
        return self.matches_texts(argv_texts(argv, exact=self.kind == "allow"))

    def matches_texts(self, texts: tuple[str, ...] | None) -> bool:
        """``matches_argv`` over ``argv_texts(argv, exact=kind == "allow")``: a call's commands are spelled
        once and matched against every rule of a kind."""
        if self.bash is None:
            return True
        if texts is None:
            return self.kind != "allow"
        bash = self.bash
        for t in texts:  # noqa: SIM110 - a loop, not any() over a generator: every rule of every call comes here
            if bash.fullmatch(t) is not None:
                return True
        return False

    def matches_path(self, path: str, cwd: str, home: str) -> bool:
        return self.path is None or self.path.matches(path, cwd, home)

    def matches_domain(self, domain: str | None) -> bool:
        if self.domain is None:
            return True
        if not domain:
            return False
        return domain_matches(self.domain, domain)

    def matches_mcp(self, tool: str) -> bool:
        m = _MCP.match(tool)
        if not m or m.group(1) != self.mcp_server:
            return False
        return self.mcp_tool in (None, "*") or m.group(2) == self.mcp_tool

    @property
    def bare(self) -> bool:
        return self.spec is None


def argv_texts(argv: Sequence[str], *, exact: bool) -> tuple[str, ...] | None:
    """The spellings of ``argv`` a Bash specifier is matched against (joined with ``SEP``); None when a word
    holds the joiner. ``exact`` (allow rules): only the argv as written. Otherwise (deny/ask) ``Bash(curl *)``
    also means /usr/bin/curl and ./curl, so the program's base name is a spelling too."""
    joined = SEP.join(argv)
    if not argv:
        return (joined,)
    if joined.count(SEP) >= len(argv):  # more joiners than the len(argv) - 1 put between words
        # the joiner inside a word would let one word pose as two; bash cuts words at NUL, so a
        # word holding one was not evaluated as bash does: never covered by an allow, always by a deny
        return None
    if exact or "/" not in argv[0]:
        return (joined,)
    base = argv[0].rstrip("/").rsplit("/", 1)[-1]
    return (joined, SEP.join((base, *argv[1:]))) if base else (joined,)


def domain_matches(pattern: str, domain: str) -> bool:
    """``example.com`` matches exactly; ``*.example.com`` matches strict subdomains only.

    Prefers the classifier's implementation (``nexusd.core.classify.urls``) when it is installed, so
    normalization lives in one place; this fallback works on already-normalized domains.
    """
    try:
        from nexusd.core.classify.urls import domain_matches as _dm
    except ImportError:
        pattern, domain = pattern.lower().rstrip("."), domain.lower().rstrip(".")
        if pattern.startswith("*."):
            return domain.endswith(pattern[1:]) and len(domain) > len(pattern) - 1
        return domain == pattern
    return bool(_dm(pattern, domain))


# ---------------------------------------------------------------------- parsing


def canonical_tool(name: str) -> str:
    """A rule's tool name in Claude's spelling: the tool catalog's, else our own alias table."""
    if name.startswith("mcp__"):
        return name
    info = tool_info(name)
    return info.canonical if info.known else RULE_TOOL_ALIASES.get(name, name)


def split_rule(text: str) -> tuple[str, str | None]:
    """``Tool(spec)`` -> (Tool, spec); ``Tool`` -> (Tool, None). Raises RuleError."""
    if not isinstance(text, str):
        raise RuleError(f"a rule must be a string, not {type(text).__name__}")
    s = text.strip()
    if not s:
        raise RuleError("empty rule")
    if "\x00" in s:
        raise RuleError("a rule must not contain a NUL byte")
    if "(" not in s:
        if ")" in s:
            raise RuleError(f"{text!r}: unbalanced parenthesis")
        return s, None
    if not s.endswith(")"):
        raise RuleError(f"{text!r}: a specifier must end with ')'")
    tool, _, rest = s.partition("(")
    spec = rest[:-1]
    if not tool.strip():
        raise RuleError(f"{text!r}: missing tool name before '('")
    if not spec.strip():
        raise RuleError(f"{text!r}: empty specifier (write {tool.strip()} for the whole tool)")
    return tool.strip(), spec.strip()


def compile_bash(spec: str) -> re.Pattern[str]:
    """Compile a Bash specifier to a regex over the argv joined with NUL."""
    s = spec
    if s.endswith(":*"):
        s = s[:-2].rstrip() + " *"
    if ":*" in s:
        raise RuleError(f"Bash({spec}): ':*' is only valid at the end")
    words = s.split()
    if not words:
        raise RuleError(f"Bash({spec}): empty command pattern")
    sep = re.escape(SEP)
    parts: list[str] = []
    for i, word in enumerate(words):
        last = i == len(words) - 1
        if word == "*":
            if i == 0:
                parts.append(".*" if last else f"(?:.*{sep})?")
            elif last:
                parts.append(f"(?:{sep}.*)?")
            else:
                parts.append(f"{sep}(?:.*{sep})?")
            continue
        lit = ".*".join(re.escape(p) for p in word.split("*"))
        if i > 0 and words[i - 1] != "*":
            parts.append(sep)
        parts.append(lit)
    return re.compile("".join(parts), re.DOTALL)


def concrete_path(pat: PathPattern, cwd: str, home: str) -> str | None:
    """The one path a Read/Edit rule's pattern names (a directory stands for everything below it), or None
    when it is a glob no single mount can express. The sandbox masks (deny Read) or re-binds read-only (deny
    Edit) this path; ``fully_concrete`` says whether that covers everything the rule matches."""
    base = cwd if pat.base is None else home if pat.base == "~" else pat.base
    pattern = pat.pattern
    if pattern.endswith("/**"):
        pattern = pattern[:-3]
    if _GLOB_CHARS & set(pattern):
        return None
    if not pattern:
        return posixpath.normpath(base)
    # gitignore: a pattern with a slash (other than at the end) is anchored to its base; a bare name
    # matches at any depth, and only the one directly in the base is this path.
    return posixpath.normpath(posixpath.join(base, pattern.strip("/")))


def fully_concrete(pat: PathPattern) -> bool:
    """``concrete_path`` is everything the pattern matches: no glob, and anchored to its base (gitignore: a
    bare name, or a name with only a trailing slash, matches at any depth)."""
    pattern = pat.pattern[:-3] if pat.pattern.endswith("/**") else pat.pattern
    if _GLOB_CHARS & set(pattern):
        return False
    return not pattern or "/" in pattern.rstrip("/")


_GLOB_CHARS = frozenset("*?[")


def compile_path(spec: str, policy_root: str | None) -> PathPattern:
    """Claude's anchors: ``//abs``, ``~/home``, ``/relative-to-policy-root``, ``./cwd`` or bare (cwd)."""
    raw = spec
    if spec.startswith("//"):
        base, pat = "/", "/" + spec[2:].lstrip("/")
    elif spec == "~" or spec.startswith("~/"):
        base, pat = "~", "/" + spec[2:] if len(spec) > 1 else ""
    elif spec.startswith("~"):
        raise RuleError(f"{spec!r}: only ~/ is supported, not ~user")
    elif spec.startswith("/"):
        if policy_root is None:
            raise RuleError(f"{spec!r}: '/' anchors to the policy file's directory, and this rule has no file")
        base, pat = policy_root, spec
    elif spec.startswith("./"):
        base, pat = None, "/" + spec[2:]
    else:
        base, pat = None, spec
    if pat in ("/", ""):
        pat = ""
    for bad in ("!",):
        if pat.lstrip("/").startswith(bad):
            raise RuleError(f"{raw!r}: negated globs are not allowed in rules")
    if "\\" in pat:
        raise RuleError(f"{raw!r}: backslashes are not allowed in path rules")
    spec_obj: pathspec.PathSpec[pathspec.Pattern] | None = None
    if pat:
        if pat.count("[") != pat.count("]"):
            raise RuleError(f"{raw!r}: unbalanced '[' in glob")
        if "***" in pat:
            raise RuleError(f"{raw!r}: '***' is not a valid glob (use **)")
        try:
            spec_obj = pathspec.PathSpec.from_lines("gitignore", [pat])
        except Exception as e:  # pathspec raises its own error types for bad patterns
            raise RuleError(f"{raw!r}: bad glob: {e}") from None
        if not spec_obj.patterns or getattr(spec_obj.patterns[0], "include", True) is None:
            raise RuleError(f"{raw!r}: the glob matches nothing")
    return PathPattern(raw=raw, base=base, pattern=pat, spec=spec_obj)


def parse_rule(
    text: str,
    kind: RuleKind,
    *,
    layer: str = "builtin",
    origin: str = "builtin",
    policy_root: str | None = None,
    project: bool = False,
    match: Iterable[str] = (),
    not_match: Iterable[str] = (),
    home: str | None = None,
) -> Rule:
    """Parse one rule; raises RuleError with a message that names the rule.

    ``home`` is needed only to check examples that use ``~`` (the caller knows it; the core never reads
    the environment).
    """
    tool, spec = split_rule(text)
    tool = canonical_tool(tool)
    common = dict(
        text=text.strip(),
        kind=kind,
        layer=layer,
        origin=origin,
        project=project,
        match=tuple(match),
        not_match=tuple(not_match),
    )
    if tool.startswith("mcp__"):
        m = _MCP.match(tool)
        if not m or spec is not None:
            raise RuleError(f"{text!r}: MCP rules are mcp__server, mcp__server__* or mcp__server__tool")
        t = m.group(2)
        if t is not None and "*" in t and t != "*":
            raise RuleError(f"{text!r}: only a whole '*' is allowed as the MCP tool part")
        rule = Rule(tool=tool, family="mcp", spec=None, mcp_server=m.group(1), mcp_tool=t, **common)  # type: ignore[arg-type]
    elif not _TOOL_NAME.match(tool):
        raise RuleError(f"{text!r}: {tool!r} is not a tool name")
    elif tool == "Bash":
        rule = Rule(tool=tool, family="shell", spec=spec, bash=compile_bash(spec) if spec else None, **common)  # type: ignore[arg-type]
    elif tool in READ_TOOLS or tool in EDIT_TOOLS:
        fam: Family = "read" if tool in READ_TOOLS else "edit"
        path = compile_path(spec, policy_root) if spec else None
        rule = Rule(tool=tool, family=fam, spec=spec, path=path, **common)  # type: ignore[arg-type]
    elif tool == "WebFetch":
        domain = None
        if spec is not None:
            if not spec.startswith("domain:") or not spec[7:].strip():
                raise RuleError(f"{text!r}: WebFetch takes domain:example.com or domain:*.example.com")
            domain = spec[7:].strip().lower().rstrip(".")
            if "*" in domain[2:] or ("*" in domain and not domain.startswith("*.")) or "/" in domain:
                raise RuleError(f"{text!r}: a domain is example.com or *.example.com")
        rule = Rule(tool=tool, family="fetch", spec=spec, domain=domain, **common)  # type: ignore[arg-type]
    else:
        if spec is not None:
            raise RuleError(f"{text!r}: {tool} takes no specifier")
        rule = Rule(tool=tool, family="tool", **common)  # type: ignore[arg-type]
    errors = check_examples(rule, policy_root=policy_root, home=home)
    if errors:
        raise RuleError("; ".join(errors))
    return rule


# ---------------------------------------------------------------------- examples


def check_examples(rule: Rule, *, policy_root: str | None = None, home: str | None = None) -> list[str]:
    """Codex's execpolicy idea: a rule's own examples must agree with the matcher."""
    errors: list[str] = []
    for expect, examples in ((True, rule.match), (False, rule.not_match)):
        for ex in examples:
            try:
                got = example_matches(rule, ex, policy_root=policy_root, home=home)
            except ValueError as e:
                errors.append(f"{rule.text!r}: example {ex!r} cannot be checked: {e}")
                continue
            if got != expect:
                verb = "should match but does not" if expect else "should not match but does"
                errors.append(f"{rule.text!r}: example {ex!r} {verb}")
    return errors


def example_matches(rule: Rule, example: str, *, policy_root: str | None = None, home: str | None = None) -> bool:
    """Examples are a command (Bash, split like a shell would), a path, a domain/URL, or a tool name."""
    cwd = policy_root or "/"
    if rule.family == "shell":
        argv = shlex.split(example)
        if not argv:
            raise ValueError("empty command")
        return rule.matches_argv(argv)
    if rule.family in ("read", "edit"):
        p = example
        if p == "~" or p.startswith("~/"):
            if not home:
                raise ValueError("a ~ example needs the home directory, which is not known here")
            p = home + p[1:]
        p = posixpath.normpath(posixpath.join(cwd, p))
        return rule.matches_path(p, cwd, home or "")
    if rule.family == "fetch":
        host = example
        if "://" in host:
            host = host.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0]
        return rule.matches_domain(host.lower().rstrip("."))
    if rule.family == "mcp":
        return rule.matches_mcp(example)
    return canonical_tool(example) == rule.tool
