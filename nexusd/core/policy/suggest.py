"""The rules "always" would persist (the narrowest useful ones), and the refusal of blanket rules.

A rule like ``Bash(python *)`` or ``Bash(npm run *)`` allows arbitrary code: the model writes the
script, the rule runs it. Such rules are never offered, never learned, and draw a warning when a
person writes one by hand (Claude Code's DANGEROUS_BASH_PATTERNS: interpreters, eval, sudo,
remote execution; extended).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from nexusd.core.model import Classification, Command, ToolKind
from nexusd.core.policy.rules import EDIT_TOOLS, RuleError, canonical_tool, split_rule

MAX_SUGGESTIONS = 5

INTERPRETERS = frozenset(
    {
        "python",
        "python2",
        "python3",
        "node",
        "nodejs",
        "deno",
        "ruby",
        "perl",
        "php",
        "lua",
        "luajit",
        "pypy",
        "pypy3",
        "irb",
        "Rscript",
        "osascript",
        "tclsh",
        "wish",
    }
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"})
EVAL_FAMILY = frozenset(
    {
        "eval",
        "exec",
        "env",
        "xargs",
        "command",
        "builtin",
        "source",
        ".",
        "nohup",
        "timeout",
        "nice",
        "time",
        "stdbuf",
        "ionice",
        "watch",
        "parallel",
        "find",
    }
)
PRIVILEGE = frozenset({"sudo", "doas", "su", "pkexec", "runuser"})
REMOTE = frozenset({"ssh", "mosh", "telnet"})
RUNNERS = frozenset({"npx", "bunx", "pnpx"})
RUNNER_PREFIXES = frozenset(
    {
        ("npm", "run"),
        ("npm", "exec"),
        ("npm", "run-script"),
        ("yarn", "run"),
        ("yarn", "dlx"),
        ("yarn", "exec"),
        ("pnpm", "run"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("bun", "run"),
        ("bun", "x"),
        ("uv", "run"),
        ("uvx",),
        ("poetry", "run"),
        ("pipx", "run"),
        ("deno", "run"),
        ("go", "run"),
        ("cargo", "run"),
    }
)
# A bare front-end of a runner: "npm *" includes "npm run *".
RUNNER_FRONTS = frozenset({"npm", "yarn", "pnpm", "bun", "uv", "poetry", "pipx", "git"})
# Commands whose suggestion is the exact command: a prefix rule would allow destroying anything.
EXACT_ONLY = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "dd",
        "chmod",
        "chown",
        "chgrp",
        "ln",
        "truncate",
        "shred",
        "kill",
        "pkill",
        "killall",
        "curl",
        "wget",
        "scp",
        "rsync",
        "docker",
        "kubectl",
        "make",
    }
)
_SUBCOMMAND = re.compile(r"[a-z][a-z0-9_:.-]*\Z")
_PY_VERSION = re.compile(r"(python|pypy|ruby|perl|php|lua|node)[0-9.]*\Z")


def _base(word: str) -> str:
    return posixpath.basename(word)


def _blanket_command(words: Sequence[str]) -> str | None:
    """Why a rule that allows ``words`` followed by anything is a blanket (None: it is not)."""
    if not words:
        return "it allows every command"
    first = _base(words[0])
    if "*" in words[0]:
        return "a wildcard in the command name allows any program"
    if first in INTERPRETERS or _PY_VERSION.match(first):
        return f"{first} with any arguments runs arbitrary code (interpreter)"
    if first in SHELLS:
        return f"{first} with any arguments runs arbitrary code (shell)"
    if first in EVAL_FAMILY:
        return f"{first} with any arguments runs any other command"
    if first in PRIVILEGE:
        return f"{first} with any arguments runs anything as another user"
    if first in REMOTE:
        return f"{first} with any arguments runs anything on another machine"
    if first in RUNNERS:
        return f"{first} with any arguments runs any package's code (package runner)"
    if len(words) >= 2 and (first, words[1]) in RUNNER_PREFIXES and (len(words) == 2 or "*" in words[2]):
        return f"'{first} {words[1]}' with any arguments runs any script (package runner)"
    if (first,) in RUNNER_PREFIXES:
        return f"{first} with any arguments runs any package's code (package runner)"
    if len(words) == 1 and first in RUNNER_FRONTS:
        return f"bare '{first} *' includes every subcommand, including ones that run code"
    return None


def _reads_program_from_input(words: Sequence[str]) -> str | None:
    """``Bash(sh)``, ``Bash(python3 -)``, ``Bash(sudo -s)``, ``Bash(ssh host)``: an exact rule that still runs
    whatever is piped in (``curl … | sh`` learned as ``Bash(sh)`` allows every script forever)."""
    first = _base(words[0])
    plain = [w for w in words[1:] if not w.startswith("-") or w == "-"]
    stdin = not plain or plain == ["-"]
    if (first in INTERPRETERS or _PY_VERSION.match(first) or first in SHELLS) and stdin:
        return f"{first} without a script runs whatever program it is given on its input"
    if first in PRIVILEGE and stdin:
        return f"{first} without a command opens a shell that runs whatever it is given"
    if first in REMOTE and len(plain) <= 1:
        return f"{first} without a command runs whatever it is given on the other machine"
    if first == "parallel" and stdin:
        return "parallel without a command runs every input line as a command"
    return None


CODE_RUNNERS = INTERPRETERS | SHELLS | EVAL_FAMILY | PRIVILEGE | REMOTE | RUNNERS


def code_blanket_reason(rule_text: str) -> str | None:
    """Why a hand-written allow rule would be a blanket for running code, so it allows nothing by itself in any
    mode (None when it is not one). Claude Code's DANGEROUS_BASH_PATTERNS (seed 002): an interpreter, package
    runner, shell, eval-family command, sudo or ssh with any arguments (``Bash(python:*)``, ``Bash(npx *)``,
    ``Bash(sudo *)``), or one that runs whatever it is given on its input (``Bash(sh)``). A broad rule over
    other programs (``Bash(git *)``) only draws the loader's warning."""
    reason = blanket_reason(rule_text)
    if reason is None:
        return None
    try:
        tool, spec = split_rule(rule_text)
    except RuleError:
        return None
    if canonical_tool(tool) != "Bash" or spec is None:
        return None
    words = (spec[:-2] + " *" if spec.endswith(":*") else spec).split()
    if not words or "*" in words[0]:
        return None
    first = _base(words[0])
    runner = (first,) in RUNNER_PREFIXES or (len(words) >= 2 and (first, words[1]) in RUNNER_PREFIXES)
    if first in CODE_RUNNERS or _PY_VERSION.match(first) or runner:
        return reason
    return None


# Tools whose bare name (no specifier) reaches every file, command or site.
_BROAD_BARE = frozenset({"Bash", "Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", *EDIT_TOOLS})
_WILD = frozenset("*?/.:~ \t")


def blanket_reason(rule_text: str) -> str | None:
    """Why an allow rule is too broad to learn or offer (None when it is acceptable).

    The one check: the engine's suggestions, learning, the policy loader's warnings and every UI's rule
    editor ask this function, so "narrow enough" means the same everywhere.
    """
    try:
        tool, spec = split_rule(rule_text)
    except RuleError as e:
        return f"not a valid rule: {e}"
    if "*" in tool or "?" in tool:
        return "a wildcard in the tool name covers many tools"
    tool = canonical_tool(tool)
    if spec is None:
        if tool in _BROAD_BARE:
            return f"{tool} without a specifier allows every {tool} call"
        parts = tool.split("__")
        if tool.startswith("mcp__") and (len(parts) < 3 or not all(parts[1:])):
            return f"{tool} allows every tool of that MCP server"
        return None
    if set(spec.strip()) <= _WILD:
        return f"the specifier {spec!r} matches everything"
    if tool == "WebFetch" and spec.startswith("domain:"):
        domain = spec[len("domain:") :].strip()
        if set(domain) <= _WILD or (domain.startswith("*") and domain.count(".") < 2):
            return f"{domain!r} covers a whole top-level domain or more"
        return None
    if tool == "Bash":
        s = spec[:-2] + " *" if spec.endswith(":*") else spec
        if "*" not in s:
            return _reads_program_from_input(s.split())  # an exact command
        words = s.split()
        literal: list[str] = []
        for w in words:
            if "*" in w:
                if w != "*" and not literal:
                    return "a wildcard in the command name allows any program"
                break
            literal.append(w)
        return _blanket_command(literal)
    whole = (spec.rstrip("/*") in ("", "/", "//", "~", "~/", ".", "./") and "*" in spec) or spec in (
        "//",
        "~",
        "~/",
        "/",
    )
    if (tool in EDIT_TOOLS or tool == "Read") and whole:
        return f"{tool}({spec}) covers the whole file system, home directory or workspace"
    return None


def _shell_rule(cmd: Command) -> tuple[str, str | None]:
    """The rule to offer for one command, with ``blanket_reason`` of it (asked once, not again by the caller)."""
    argv = list(cmd.argv)
    exact = "Bash(" + " ".join(argv) + ")"
    if not argv:
        return exact, blanket_reason(exact)
    first = _base(argv[0])
    if argv[0] != first or first in EXACT_ONLY or any("*" in a or "(" in a or ")" in a for a in argv):
        return exact, blanket_reason(exact)
    prefix = [argv[0]]
    rest = argv[1:]
    if rest and _SUBCOMMAND.match(rest[0]):
        prefix.append(rest[0])
        rest = rest[1:]
        if tuple(prefix) in RUNNER_PREFIXES and rest and _SUBCOMMAND.match(rest[0]):
            prefix.append(rest[0])
            rest = rest[1:]
    if not rest:
        return exact, blanket_reason(exact)
    if (
        first == "git"
        and prefix[1:2]
        and prefix[1]
        in ("push", "reset", "clean", "checkout", "rebase", "config", "filter-branch", "gc", "rm", "restore")
    ):
        return exact, blanket_reason(exact)
    rule = "Bash(" + " ".join(prefix) + " *)"
    if blanket_reason(rule):
        return exact, blanket_reason(exact)
    return rule, None


def _path_rule(tool: str, path: str, workspace_roots: Sequence[str]) -> str:
    inside = any(path == r or path.startswith(r.rstrip("/") + "/") for r in workspace_roots)
    if tool == "Read" and inside:
        d = posixpath.dirname(path)
        if d not in workspace_roots and d != "/":
            return f"Read(/{d}/**)"
    return f"{tool}(/{path})"


def suggest(
    cls: Classification, workspace_roots: Sequence[str], uncovered: Sequence[Command] | None = None
) -> list[str]:
    """The narrowest useful "always" rules for a call; empty means "always" must be refused."""
    if not cls.auto_allowable:
        return []
    out: list[str] = []
    if cls.kind == ToolKind.SHELL:
        cmds = list(uncovered if uncovered is not None else cls.commands)
        if not cmds:
            return []
        for c in cmds:
            r, too_broad = _shell_rule(c)
            if too_broad:
                return []  # learning the rest would not cover the call; learning this one allows too much
            if r not in out:
                out.append(r)
        return out if len(out) <= MAX_SUGGESTIONS else []
    if cls.kind == ToolKind.EDIT:
        for p in cls.writes:
            r = _path_rule("Edit", p, workspace_roots)
            if r not in out:
                out.append(r)
    elif cls.kind == ToolKind.READ:
        for p in cls.reads:
            r = _path_rule("Read", p, workspace_roots)
            if r not in out:
                out.append(r)
        if not cls.reads:
            out.append(cls.tool)
    elif cls.kind == ToolKind.FETCH:
        if cls.domain:
            out.append(f"WebFetch(domain:{cls.domain})")
    elif cls.tool and re.match(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z", cls.tool):
        out.append(cls.tool)
    out = [r for r in out if blanket_reason(r) is None]
    return out if len(out) <= MAX_SUGGESTIONS else []


# --------------------------------------------------------------------------- needs a person's confirmation

# Programs a wildcard rule should not cover without a person saying so: they destroy or overwrite data, or
# send it away, whatever their arguments (``Bash(rm *)`` allows ``rm -rf src``).
DESTROYERS = EXACT_ONLY | frozenset({"unlink", "srm", "install", "sed", "tee", "tar", "unzip", "patch", "git-clean"})
# Programs that run code the agent can write (the project's scripts, hooks, build files) whatever the arguments.
PROJECT_CODE = frozenset(
    {
        "npm",
        "yarn",
        "pnpm",
        "bun",
        "make",
        "cmake",
        "ninja",
        "cargo",
        "go",
        "gradle",
        "gradlew",
        "mvn",
        "pytest",
        "tox",
        "nox",
        "rake",
        "bundle",
        "just",
        "task",
        "pre-commit",
    }
)
# git subcommands that run the repository's hooks or configured programs (.git/hooks, core.fsmonitor,
# filters, aliases) or rewrite history and files.
GIT_RUNS_CODE = frozenset(
    {
        "commit",
        "merge",
        "pull",
        "push",
        "rebase",
        "am",
        "checkout",
        "switch",
        "cherry-pick",
        "revert",
        "clone",
        "fetch",
        "submodule",
        "worktree",
        "reset",
        "clean",
        "restore",
        "stash",
        "apply",
        "filter-branch",
        "gc",
        "config",
        "rm",
        "mv",
    }
)


def confirm_reason(rule_text: str) -> str | None:
    """Why an allow rule that is not a blanket still needs a person's explicit confirmation (None: it is
    narrow enough as it stands).

    A wildcard over a program that destroys data or runs code the agent can write (``Bash(rm *)``,
    ``Bash(git commit *)``, ``Bash(npm test *)``): an exact command is fine, a wildcard is confirmed first.
    The rule is assumed to have passed ``blanket_reason``.
    """
    try:
        tool, spec = split_rule(rule_text)
    except RuleError:
        return None
    tool = canonical_tool(tool)
    if tool != "Bash" or spec is None:
        return None
    s = spec[:-2] + " *" if spec.endswith(":*") else spec
    if "*" not in s and "?" not in s:
        return None  # an exact command
    words = s.split()
    if not words:
        return None
    first = _base(words[0])
    if first == "git":
        sub = words[1] if len(words) > 1 else "*"
        if sub == "*" or "*" in sub or sub in GIT_RUNS_CODE or sub.startswith("-"):
            return f"'git {sub}' with any arguments can run the repository's hooks or configured programs"
        return None
    if first in DESTROYERS:
        return f"{first} with any arguments can delete, overwrite or send away any file it is given"
    if first in PROJECT_CODE:
        return f"{first} with any arguments runs the project's own scripts, which the agent can change"
    return None


RuleStatus = tuple[str, str]  # ("ok" | "confirm" | "refused", reason)


def rule_status(kind: str, rule_text: str) -> RuleStatus:
    """The one narrowness verdict every UI shows (the daemon's ``rule_check``): ``refused`` (a blanket rule
    or not a rule), ``confirm`` (a person must confirm it explicitly) or ``ok``. Deny rules only narrow."""
    if kind != "allow":
        try:
            split_rule(rule_text)
        except RuleError as e:
            return "refused", f"not a valid rule: {e}"
        return "ok", "a deny rule only narrows what agents may do"
    why = blanket_reason(rule_text)
    if why:
        return "refused", why
    why = confirm_reason(rule_text)
    if why:
        return "confirm", why
    return "ok", "narrow enough: an exact command, or a program that neither destroys nor runs other code"
