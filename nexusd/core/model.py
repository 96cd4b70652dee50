"""Plain data the pure core works on: what a tool call does, and the session it belongs to.

The core (``nexusd.core``) imports nothing of ours but itself and the protocol's data types; it never
touches sockets, clocks or globals. File-system facts arrive through the ``FileSystem`` protocol so a
test (or ``nexusctl check --offline``) can hand in whatever world it likes.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Protocol

import msgspec


class Requirement(IntEnum):
    """The three tool-declared levels of the five-tier model: what a call needs the session's mode to reach."""

    READ_ONLY = 1
    WORKSPACE_WRITE = 2
    DANGER_FULL_ACCESS = 3

    @property
    def label(self) -> str:
        return _REQUIREMENT_LABELS[self]  # every verdict names it: looked up, not rebuilt from the name


_REQUIREMENT_LABELS: dict[int, str] = {r: r.name.lower().replace("_", "-") for r in Requirement}


class ToolKind(StrEnum):
    """Canonical kinds: one rule covers a kind across providers."""

    READ = "read"
    EDIT = "edit"
    SHELL = "shell"
    FETCH = "fetch"
    SEARCH = "search"
    MCP = "mcp"
    AGENT = "agent"
    OTHER = "other"


class Flag(StrEnum):
    """Checks that flag a call. Any flag in ``NOT_AUTO_ALLOWABLE`` bars allow-by-rule and allow-by-mode."""

    UNPARSEABLE = "unparseable"  # parse error, parser timeout, construct we do not understand
    DYNAMIC = "dynamic"  # substitution, expansion in command position, eval, source, trap, alias ...
    DANGEROUS_ENV = "dangerous_env"  # LD_PRELOAD=..., PATH=..., GIT_CONFIG_*=... in front of a command
    CATASTROPHIC = "catastrophic"  # rm -rf /, mkfs, dd onto a device, fork bomb ...: a person, always
    OUTSIDE_WORKSPACE = "outside_workspace"  # a path read or written lies outside every workspace root
    PROTECTED_PATH = "protected_path"  # .git/, agent settings, shell rc, the daemon's own dirs ...
    SYMLINK_ESCAPE = "symlink_escape"  # a path inside the workspace that resolves outside it
    HIDDEN_CHARS = "hidden_chars"  # bidi controls, zero-width characters
    PRIVATE_ADDRESS = "private_address"  # loopback, private, link-local, metadata addresses
    LARGE_WRITE = "large_write"  # over 10 MB: refused
    LARGE_READ = "large_read"  # over 10 MB: refused
    BINARY_READ = "binary_read"  # NUL in the first 8 KiB: said in the reason of an allow
    UNKNOWN_TOOL = "unknown_tool"
    BACKGROUND = "background"  # & or run_in_background
    # runs code, or writes files, that its words do not name: git --upload-pack, sed's e/w commands,
    # rg --pre, find -exec sh -c '... {} ...'. No allow rule covers it (the rule's author saw only the
    # words); a mode that reaches danger-full-access may still allow it.
    HIDDEN_EFFECT = "hidden_effect"
    # manages nexusd itself (nexusctl mode/rules/trust/answer, its config or socket): a person, always
    GATE_CONTROL = "gate_control"
    # writes the audit trail (its files, or a directory holding them): refused, a person cannot approve it
    AUDIT_TRAIL = "audit_trail"
    # reads a secret the sandbox hides (a credential location, a .env file, the daemon's own directories): no
    # mode allows it by itself, bypass included; a person, or a rule of the person's own policy, may
    SECRET_READ = "secret_read"
    # names a cloud metadata or link-local address (169.254.169.254, fe80::, fd00:ec2::254,
    # metadata.google.internal ... in any spelling): refused in every mode, for every tool
    METADATA_ADDRESS = "metadata_address"


NOT_AUTO_ALLOWABLE = frozenset(
    {
        Flag.UNPARSEABLE,
        Flag.DYNAMIC,
        Flag.DANGEROUS_ENV,
        Flag.CATASTROPHIC,
        Flag.HIDDEN_CHARS,
        Flag.PRIVATE_ADDRESS,
        Flag.LARGE_WRITE,
        Flag.SYMLINK_ESCAPE,
        Flag.GATE_CONTROL,
        Flag.AUDIT_TRAIL,
    }
)
# Flags that bar allow-by-rule only: the mode may still allow what reaches its ceiling.
NOT_RULE_ALLOWABLE = NOT_AUTO_ALLOWABLE | {Flag.HIDDEN_EFFECT}


class Command(msgspec.Struct, frozen=True):
    """One simple command after quote removal and wrapper unwrapping."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # assignments in front of it (and env's own)
    wrappers: tuple[str, ...] = ()  # e.g. ("timeout", "env") that were peeled off
    text: str = ""  # the source text of the command as written (for display)
    # the program is not in the command knowledge: any of its arguments may be a command it runs, so
    # deny and ask rules are matched against every tail of argv (``setsid curl x`` under ``Bash(curl *)``)
    opaque: bool = False
    # what this command alone needs (before path checks): lets a mode tell a read-only command with a
    # redirect from a writer it does not cover (Claude's acceptEdits allows only some writers)
    requirement: Requirement = Requirement.READ_ONLY
    # literal text fed on standard input (a here-document, here-string or piped echo): an opaque program
    # may run it as code (``crontab <<< '* * * * * curl x'``, ``make -f - <<EOF``), so rules look inside
    stdin: str = ""
    # the same command as written from the call's own cwd, for deny and ask rules only: after ``cd src``,
    # ``rm a.py`` is also ``rm src/a.py`` (a path-scoped ``Bash(rm src/*)`` deny still fires)
    respelled: tuple[tuple[str, ...], ...] = ()


class Redirect(msgspec.Struct, frozen=True):
    op: str  # > >> < <> >& &> &>> >| << <<< <<-
    target: str | None  # path, fd number as text, or None for heredocs
    fd: int | None = None


class Classification(msgspec.Struct, frozen=True):
    """What a tool call really does; the engine's only view of the input."""

    kind: ToolKind
    tool: str  # canonical tool name in Claude's spelling (Bash, Read, Edit, Write, WebFetch, mcp__s__t, ...)
    requirement: Requirement
    commands: tuple[Command, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    reads: tuple[str, ...] = ()  # absolute, canonical paths
    writes: tuple[str, ...] = ()
    url: str | None = None
    domain: str | None = None  # normalized (lowercase, IDNA, no trailing dot, no port)
    flags: frozenset[Flag] = frozenset()
    notes: tuple[str, ...] = ()  # one human-readable line per flag raised, in order found
    # network hosts the call names (normalised: a canonical IP or a lowercase ASCII name): URLs of fetch tools,
    # words of shell commands that may name one; matched against denied domains in every mode
    hosts: tuple[str, ...] = ()
    # directories read with every file below them (grep -r, rg, find): Read deny/ask rules for any path below apply
    recursive_reads: tuple[str, ...] = ()

    @property
    def auto_allowable(self) -> bool:
        return not (self.flags & NOT_AUTO_ALLOWABLE)

    @property
    def rule_allowable(self) -> bool:
        return not (self.flags & NOT_RULE_ALLOWABLE)


class Context(msgspec.Struct, frozen=True):
    """Where a call runs: everything path checks need besides the file system itself."""

    cwd: str
    workspace_roots: tuple[str, ...]  # canonical; the first is the project root
    home: str
    protected_dirs: tuple[str, ...] = ()  # the daemon's own config, state and socket directories
    audit_trail: str = ""  # the daemon's audit file (canonical): no agent writes it, its siblings or its directory
    hidden_dirs: tuple[str, ...] = ()  # the daemon's config, state, managed and socket directories: sandboxes hide them


class FileSystem(Protocol):
    """The file-system facts path checks need; injected so the core stays free of I/O."""

    def realpath(self, path: str) -> str: ...
    def lexists(self, path: str) -> bool: ...
    def size(self, path: str) -> int | None: ...
    def head(self, path: str, n: int) -> bytes | None: ...


class Session(msgspec.Struct):
    """An agent session as the engine sees it. The daemon owns and mutates these."""

    id: str
    provider: str = "other"
    agent_mode: str | None = None  # as the agent last reported it, in its own spelling
    override_mode: str | None = None  # set by a person through nexusd (TUI, nexusctl mode)
    allow_rules: tuple[str, ...] = ()  # scope=session answers
    deny_rules: tuple[str, ...] = ()
    # timed grants in force at this decision, (kind, rule, grant id): set by the daemon before each decision
    grant_rules: tuple[tuple[str, str, str], ...] = ()
    classifier_denials: int = 0  # consecutive auto-mode classifier denials
    # folder trust for a workspace with no project policy ([trust] ask_new_sessions): the workspaces this
    # session was already asked about, and whether a person could answer now (set before each decision)
    trust_asked: tuple[str, ...] = ()
    person_reachable: bool = False
