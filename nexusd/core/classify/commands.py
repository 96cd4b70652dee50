"""What one simple command needs and touches: the level it needs (read-only, workspace-write or
danger-full-access), judged with its flags.

``effect(cmd)`` knows the argument conventions of common commands well enough to say which
arguments are files read and written, and whether the command stays read-only with the flags it
was given. It does not look at the file system; ``classify`` resolves the paths afterwards. Anything
not known here requires danger-full-access.
"""

from __future__ import annotations

import functools
import posixpath
import re

import msgspec

from nexusd.core.classify import powershell
from nexusd.core.classify.bash import ParsedCommand
from nexusd.core.classify.knowledge import (
    AGENT_CLIS,
    CONFIG_WRITERS,
    GATE_MODULES,
    GATE_PROGRAMS,
    PACKAGE_CODE_OPTS,
    PACKAGE_MANAGERS,
    RUNNER_CODE_OPTS,
    TABLE,
    VERSION_PROBE_ARGS,
    VERSION_PROBES,
    Program,
)
from nexusd.core.model import Requirement

RO, WW, DFA = Requirement.READ_ONLY, Requirement.WORKSPACE_WRITE, Requirement.DANGER_FULL_ACCESS


class Effect(msgspec.Struct):
    requirement: Requirement
    reads: list[int] = []  # argv indices of files read
    writes: list[int] = []  # argv indices of files written
    extra_reads: list[str] = []  # paths that are not whole argv words (dd if=..., --output=...)
    extra_writes: list[str] = []
    catastrophic: str = ""
    note: str = ""
    git_config_check: str | None = None  # read-only only if the repository at this dir has no code-running config
    cd: str | None = None  # changes the working directory to this (raw) path; "" = unknown
    recursive_targets: list[int] = []  # rm -r / chmod -R targets (for the catastrophic check)
    known: bool = True  # False: the program is not in the knowledge (its argv is opaque to us)
    hidden: str = ""  # why it runs code or writes files its words do not name (Flag.HIDDEN_EFFECT)
    gate_control: bool = False  # manages nexusd itself (nexusctl mode/rules/trust ..., its UIs)
    extra_recursive: list[str] = []  # raw paths deleted recursively that are not whole argv words
    # directories read with everything below them (grep -r, rg, find): argv indices, and raw paths that are
    # not argv words ("." for grep -r with no operand); deny rules for any file below them apply
    recursive_reads: list[int] = []
    extra_recursive_reads: list[str] = []
    # writes files its words do not name (an archive's or a patch's members) below where it writes: any name,
    # protected ones included (.git/hooks, agent settings), so it is a protected write
    unnamed_writes: bool = False
    # a reader's option that makes it change files (find -delete): the mode may allow it as the write it is,
    # but no allow rule written for the reader covers it (Flag.HIDDEN_EFFECT without danger-full-access)
    beyond_rule: str = ""


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _value_taking(p: Program) -> frozenset[str]:
    """Every option of ``p`` that consumes the next word (so it is not a positional)."""
    return _opts(p.value_opts) | _opts(p.read_opts) | _opts(p.write_opts)


# Derived at import from the knowledge table (knowledge.py): the shapes the parsers below expect.
PURE = frozenset(n for n, p in TABLE.items() if p.kind == "pure")
READERS: dict[str, frozenset[str]] = {n: _value_taking(p) for n, p in TABLE.items() if p.kind == "reader"}
SEARCHERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    n: (_value_taking(p), _opts(p.pattern_opts)) for n, p in TABLE.items() if p.kind == "searcher"
}
SEARCHERS["egrep"] = SEARCHERS["fgrep"] = SEARCHERS["grep"]
_JQ_TWO_VALUES = frozenset({"--arg", "--argjson", "--slurpfile", "--rawfile"})
WRITERS: dict[str, frozenset[str]] = {n: _value_taking(p) for n, p in TABLE.items() if p.kind == "writer"}
MODE_WRITERS = frozenset(n for n, p in TABLE.items() if p.kind == "modewriter")
_DASH_MODE = re.compile(r"-[rwxXst]+([,=+-][ugoa]*[rwxXst]*)*")  # chmod -x / -w,o-r: a mode, not an option
COPIERS = {
    n: " ".join(sorted(_value_taking(p) | {"-t", "--target-directory"})) for n, p in TABLE.items() if p.kind == "copier"
}

# option -> role ("v" value, "r" file read, "w" file written, "h" hidden effect, with its reason)
_ROLES: dict[str, dict[str, tuple[str, str]]] = {}
for _n, _p in TABLE.items():
    _r: dict[str, tuple[str, str]] = {}
    for _o in _p.value_opts.split():
        _r[_o] = ("v", "")
    for _o in _p.read_opts.split():
        _r[_o] = ("r", "")
    for _o in _p.write_opts.split():
        _r[_o] = ("w", "")
    for _o, _why in _p.hidden:
        _r[_o] = ("h", _why)
    _ROLES[_n] = _r
_ROLES["egrep"] = _ROLES["fgrep"] = _ROLES["grep"]
# per role table: its long options that read, write or run something (for prefix matching)
_LONG_RISKY: dict[int, tuple[str, ...]] = {
    id(r): tuple(k for k, (role, _w) in r.items() if k.startswith("--") and role in ("r", "w", "h"))
    for r in _ROLES.values()
}
_HIDDEN_ENV: dict[str, frozenset[str]] = {n: _opts(p.hidden_env) for n, p in TABLE.items() if p.hidden_env}
_GENERIC_KINDS = frozenset({"pure", "reader", "searcher", "writer", "modewriter", "copier"})
_KIND = {n: p.kind for n, p in TABLE.items()}
_KIND["egrep"] = _KIND["fgrep"] = "searcher"
# the option roles of programs the generic kinds cover (the named parsers read their own options)
_GENERIC_ROLES = {n: r for n, r in _ROLES.items() if _KIND.get(n) in _GENERIC_KINDS}

# Only these directories hold the program a bare name stands for: /tmp/x/rg or ./cat is another program.
SYSTEM_BIN_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin", "/opt/homebrew/bin"}
)
_HOME_WORD = re.compile(r"(?:\$HOME|\$\{HOME\})(?:/[^$`]*)?")  # cd "$HOME"/x: the home directory, as ~
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=")


# Programs a planted file name such as --output=x or --pre=sh can turn against the workspace: those with an
# option that writes or runs something, those a named parser reads, and every program we do not know.
_GLOB_HARMLESS = frozenset(
    n for n, p in TABLE.items() if p.kind != "parser" and not p.write_opts and not p.hidden and not p.hidden_env
) | {"egrep", "fgrep"}


# Programs with options that only read a file: a planted -f.env could read a file a deny rule covers.
GLOB_READ_OPTIONS = frozenset(n for n in _GLOB_HARMLESS if TABLE.get(n, TABLE["grep"]).read_opts)


def options_from_globs_matter(name: str | None) -> bool:
    """Whether a glob expanding to option-like file names can change what ``name`` does (issue 28.1)."""
    return name is None or name not in _GLOB_HARMLESS


def program_name(word: str) -> str | None:
    """The knowledge name ``word`` may use: a bare name, or a name in a system bin directory; else None."""
    if "/" not in word:
        return word
    d, _, base = word.rpartition("/")
    return base if d in SYSTEM_BIN_DIRS and base else None


def looks_like_path(text: str) -> bool:
    """A glued option value that may name a file (``-o/etc/x``, ``-O~/x``, ``-o./x``)."""
    return bool(text) and not _URL.match(text) and (text.startswith(("/", "~", ".")) or "/" in text)


GIT_RO = frozenset(
    {
        "status",
        "diff",
        "log",
        "show",
        "rev-parse",
        "ls-files",
        "ls-tree",
        "blame",
        "annotate",
        "describe",
        "shortlog",
        "grep",
        "cat-file",
        "show-ref",
        "for-each-ref",
        "rev-list",
        "merge-base",
        "name-rev",
        "count-objects",
        "whatchanged",
        "cherry",
        "diff-tree",
        "diff-files",
        "diff-index",
        "var",
        "check-ignore",
        "check-attr",
        "version",
        "help",
        "show-branch",
        "verify-commit",
        "range-diff",
    }
)
GIT_BAD_GLOBAL = (
    "-c",
    "--config-env",
    "--exec-path",
    "-p",
    "--paginate",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
)
GIT_BAD_OPTS = (
    "--output",
    "--ext-diff",
    "--textconv",
    "-O",
    "--open-files-in-pager",
    "--filters",
    "--run",
    "--contents",
    "--exec",
    "--upload-pack",
    "--receive-pack",
)
SAFE_DEVICES = frozenset(
    {
        "/dev/null",
        "/dev/zero",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/stdin",
        "/dev/tty",
        "/dev/random",
        "/dev/urandom",
        "/dev/full",
    }
)
SYSTEM_TOP = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/var",
        "/Users",
        "/System",
        "/Library",
        "/Applications",
        "/private",
        "/usr/bin",
        "/usr/lib",
        "/usr/local",
        "/var/lib",
    ]
)
SHOPT_SAFE = frozenset(
    {
        "nullglob",
        "failglob",
        "globstar",
        "extglob",
        "lastpipe",
        "nocasematch",
        "inherit_errexit",
        "checkwinsize",
        "histappend",
        "-s",
        "-u",
        "-q",
        "-p",
        "-o",
    }
)


def _positionals(argv: tuple[str, ...], with_value: frozenset[str], start: int = 1) -> list[int]:
    """Indices of non-option arguments (options end at ``--``; ``-`` is stdin, not a file)."""
    out: list[int] = []
    i = start
    opts_done = False
    while i < len(argv):
        a = argv[i]
        if not opts_done and a == "--":
            opts_done = True
        elif not opts_done and a.startswith("-") and a != "-":
            if a in with_value:
                i += 1
        elif a != "-":
            out.append(i)
        i += 1
    return out


def _has_flag(argv: tuple[str, ...], short: str, long: tuple[str, ...] = ()) -> bool:
    for a in argv[1:]:
        if a == "--":
            return False
        if a.startswith("--"):
            if a.split("=", 1)[0] in long:
                return True
        elif a.startswith("-") and len(a) > 1 and short in a[1:]:
            return True
    return False


def effect(cmd: ParsedCommand) -> Effect:
    """What ``cmd`` needs and which of its arguments are files read or written."""
    argv = cmd.argv
    if not argv:
        return Effect(RO)
    name = program_name(argv[0])
    gate = _gate_program(argv)
    if gate:
        if gate == "nexusctl" and name == "nexusctl":  # the real one: its read-only subcommands stay read-only
            return _nexusctl(argv)
        return _nexus_ui((gate, *argv[1:]))  # by another path, a module or a runner: a person runs it
    if name is None or (name not in _KIND and not _other_known(name)):
        runner, first = (name, 1)
        if name and name.startswith("python") and argv[1:3] == ("-m", "pytest"):
            runner, first = ("pytest", 3)  # python3 -m pytest: pytest's options
        risky = RUNNER_CODE_OPTS.get(runner or "")
        if risky is not None:
            own = argv[first : argv.index("--")] if "--" in argv else argv[first:]
            bad = next(
                (
                    a
                    for k, a in enumerate(own)
                    if (a.split("=", 1)[0] in risky or a[:2] in risky or (runner == "cargo" and a[:1] == "+"))
                    and not _plugin_off(own, k)
                ),
                None,
            )
            if bad is not None:
                eff = opaque(argv)
                eff.hidden = f"{runner} {bad.split('=', 1)[0]} runs or loads code the rule did not name"
                return eff
        if name in PACKAGE_MANAGERS:
            own = argv[1 : argv.index("--")] if "--" in argv else argv[1:]  # after --: the script's own
            bad = next((a for a in own if a.split("=", 1)[0] in PACKAGE_CODE_OPTS), None)
            if bad is not None:
                eff = opaque(argv)
                eff.hidden = f"{name} {bad.split('=', 1)[0]} changes what it runs or where its settings come from"
                return eff
        conf = _config_write(name or "", argv)
        if conf:
            eff = opaque(argv)
            eff.extra_writes.append(conf)
            eff.hidden = f"{name} config changes settings that run programs (script-shell, yarnPath, hooks)"
            return eff
        if name and name.startswith("python") and argv[1:3] == ("-m", "json.tool") and not cmd.env:
            return _json_tool(argv)
        implicit = _implicit_reads(name, argv) if name in ("wget", "curl") else None
        if implicit:
            eff = opaque(argv)
            eff.extra_reads.extend(implicit)
            return eff
        if (
            len(argv) == 2
            and name in VERSION_PROBES
            and argv[1] in VERSION_PROBE_ARGS
            and argv[0] == name
            and not cmd.env
        ):  # PYTHONPATH=/tmp python -V loads code first
            return Effect(RO)
        return opaque(argv)
    eff = _effect(name, argv, cmd)
    if name == "git" and not _GIT_NET.isdisjoint(argv) and any(a.startswith(("https://", "http://")) for a in argv):
        eff.extra_reads = [*eff.extra_reads, "~/.netrc"]  # libcurl reads it for an http(s) remote (strace)
    roles = _GENERIC_ROLES.get(name)
    if roles is not None and any(a[:1] in "-+" and a != "-" for a in argv[1:]):
        _apply_roles(roles, argv, eff, strict=_KIND[name] != "pure")
    bad_env = _HIDDEN_ENV.get(name)
    if bad_env:
        for k, _v in cmd.env:
            if k in bad_env:
                eff.hidden = eff.hidden or f"{k} makes {name} run a program"
    if eff.hidden:
        eff.requirement = DFA
    return eff


_GIT_NET = frozenset({"clone", "fetch", "pull", "push", "ls-remote", "archive", "submodule"})


def _implicit_reads(name: str | None, argv: tuple[str, ...]) -> list[str]:
    """Credential files a network program reads without naming them (what strace shows): wget reads ~/.netrc,
    curl does with -n/--netrc, git's https transport does (libcurl) for a URL it is given. Deny rules over them
    deny the call: the command uses the secret for the agent. (ssh's keys are not listed: a Read(~/.ssh/**)
    deny would then deny every git push; the key is used by ssh, never shown.)"""
    if name == "wget":
        return [] if "--no-netrc" in argv else ["~/.netrc", "~/.wgetrc"]
    if name == "curl":
        files = [a.split("=", 1)[1] for a in argv if a.startswith("--netrc-file=")]
        files += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--netrc-file"]
        if files or any(a in ("-n", "--netrc", "--netrc-optional") for a in argv):
            return files or ["~/.netrc"]
    return []


JSON_TOOL = "python -m json.tool pretty-prints JSON"
_JSON_TOOL_FLAGS = frozenset(
    {"--sort-keys", "--no-ensure-ascii", "--json-lines", "--tab", "--no-indent", "--compact", "-h", "--help"}
)


def _json_tool(argv: tuple[str, ...]) -> Effect:
    """``python3 -m json.tool [opts] [infile [outfile]]``: reads infile, writes outfile. (A json module planted
    in the cwd would be imported instead: the classifier checks for one, see ``JSON_TOOL``.)"""
    pos: list[int] = []
    i = 3
    while i < len(argv):
        a = argv[i]
        if a == "--indent" and i + 1 < len(argv):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            if a not in _JSON_TOOL_FLAGS and not a.startswith("--indent="):
                return opaque(argv)
        else:
            pos.append(i)
        i += 1
    if len(pos) > 2:
        return opaque(argv)
    reads = [p for p in pos[:1] if argv[p] != "-"]
    writes = [p for p in pos[1:] if argv[p] != "-"]
    return Effect(WW if writes else RO, reads=reads, writes=writes, note=JSON_TOOL)


def reads_operands(word: str) -> bool:
    """Whether the program may read the files named as its operands (every program but a plain writer
    such as rm, touch or chmod, whose operands are only written or changed)."""
    name = program_name(word)
    return name is None or _KIND.get(name) not in ("writer", "modewriter")


def _other_known(name: str) -> bool:
    """Programs the parsers below know without a table entry (popd, mkfs.*, date ...)."""
    return name in _OTHER_KNOWN or name.startswith("mkfs")


_OTHER_KNOWN = frozenset(
    {
        "popd",
        "gawk",
        "mawk",
        "nawk",
        "egrep",
        "fgrep",
        "mke2fs",
        "mkswap",
        "wipefs",
        "fdisk",
        "sfdisk",
        "parted",
        "sgdisk",
        "gdisk",
        "cfdisk",
        "kill",
        "date",
        "hostname",
        "shopt",
        "set",
    }
)


_CODE_HINT = re.compile(r"[\s(;]")
_QUOTED_PATH = re.compile(r"(['\"`])([^'\"`\s]{1,512})\1")
_PATHY = re.compile(r"[.~/$]|[^:]*/")  # starts like a path (.env, ~/x, /etc) or holds a directory part


# interpreter code that names the home directory: perl $ENV{HOME}, python os.environ['HOME'] / getenv /
# expanduser / Path.home(), node os.homedir() / process.env.HOME, ruby ENV['HOME'] / Dir.home, php getenv
_CODE_HOME = re.compile(
    r"\$ENV\{\s*['\"]?HOME['\"]?\s*\}|environ(?:\.get\(|\[)\s*['\"]HOME['\"]|getenv\(\s*['\"]HOME['\"]|"
    r"Path\.home\(\)|homedir\(\)|expanduser\(\s*['\"]~['\"]\s*\)|process\.env\.HOME|ENV\[\s*['\"]HOME['\"]\s*\]|Dir\.home|\$HOME\b|\$\{HOME\}"
)
_CODE_LITERAL = re.compile(r"(['\"])([^'\"`\s$]{1,256})\1")


def _home_pieces(code: str) -> list[str]:
    """``open(os.environ['HOME'] + '/.ssh/id_rsa')``, ``open "$ENV{HOME}/.ssh/id_rsa"``, ``Path.home() / '.ssh' /
    'id_rsa'``: the code builds paths below the home directory from its literals; each run of up to four of
    them, joined, is a path it may read or write (deny rules see them; the program stays unknown)."""
    found: list[str] = []
    for m in re.finditer(r"\$ENV\{\s*['\"]?HOME['\"]?\s*\}(/[^\s'\"`;)]*)|\$\{?HOME\}?(/[^\s'\"`;)]*)", code):
        found.append("~" + (m.group(1) or m.group(2)))
    code = _CODE_HOME.sub(" ", code)
    pieces = [m.group(2).strip("/") for m in _CODE_LITERAL.finditer(code)][:64]
    pieces = [p for p in pieces if p and p != "HOME"]
    for i in range(len(pieces)):
        for n in range(1, 5):
            if i + n <= len(pieces):
                found.append("~/" + "/".join(pieces[i : i + n]))
    return found[:256]


def opaque(argv: tuple[str, ...]) -> Effect:
    """A program the knowledge does not cover: every word that may name a path is read and written."""
    idx: list[int] = []
    extra: list[str] = []
    opts_done = False
    for i, a in enumerate(argv[1:], 1):
        if a == "--" and not opts_done:
            opts_done = True
            continue
        if a in ("-", "") or ("://" in a and _URL.match(a)):
            continue
        if opts_done:
            idx.append(i)
            continue
        if a.startswith("--"):
            val = a.partition("=")[2]
            if val and not _URL.match(val):
                extra.append(val)
            continue
        if a.startswith("-"):
            if looks_like_path(a[2:]):
                extra.append(a[2:])
            continue
        if ('"' in a or "'" in a or "`" in a) and _CODE_HINT.search(a):
            # interpreter source (python3 -c 'open(".env").read()'): quoted literals that look like paths
            extra.extend(m.group(2) for m in _QUOTED_PATH.finditer(a) if _PATHY.match(m.group(2)))
            if _CODE_HOME.search(a):
                extra.extend(_home_pieces(a))
        if a.startswith("@") and len(a) > 1:
            extra.append(a[1:])
        elif _ASSIGN.match(a):
            val = a.partition("=")[2]
            if val and not _URL.match(val):
                extra.append(val)
        idx.append(i)
    return Effect(DFA, reads=idx, writes=list(idx), extra_reads=extra, extra_writes=list(extra), known=False)


def _apply_roles(roles: dict[str, tuple[str, str]], argv: tuple[str, ...], eff: Effect, strict: bool) -> None:
    """Options of a known program: files they read or write, code they run; unknown ones conservatively."""
    i = 1
    n = len(argv)
    while i < n:
        a = argv[i]
        if a == "--":
            break
        if a.startswith("+") and "+" in roles and roles["+"][0] == "h":
            eff.hidden = eff.hidden or roles["+"][1]
        if not a.startswith("-") or a == "-":
            i += 1
            continue
        if a.startswith("--"):
            key, eq, val = a.partition("=")
            role, why = roles.get(key) or _long_prefix(roles, key)
            if role == "h":
                eff.hidden = eff.hidden or why
            elif role in ("r", "w"):
                if eq:
                    _role_path(eff, role, val)
                elif i + 1 < n:
                    _role_index(eff, role, i + 1)
                    i += 1
            elif role == "v":
                i += 0 if eq else 1
            elif strict and eq and val and not _URL.match(val):
                # an option we do not know: its value may name a file, read or written
                eff.extra_reads.append(val)
                eff.extra_writes.append(val)
                eff.requirement = max(eff.requirement, WW)
            i += 1
            continue
        j = 1
        while j < len(a):
            role, why = roles.get("-" + a[j], ("", ""))
            rest = a[j + 1 :]
            if role == "h":
                eff.hidden = eff.hidden or why
                if rest or ("-" + a[j]) in _HIDDEN_SHORT_TAKES_VALUE:
                    break
            elif role in ("v", "r", "w"):
                if rest:
                    if role != "v":
                        _role_path(eff, role, rest)
                elif i + 1 < n:
                    if role != "v":
                        _role_index(eff, role, i + 1)
                    i += 1
                break
            elif strict and not role and looks_like_path(rest):
                eff.extra_reads.append(rest)
                eff.extra_writes.append(rest)
                eff.requirement = max(eff.requirement, WW)
                break
            j += 1
        i += 1


_HIDDEN_SHORT_TAKES_VALUE = frozenset({"-P", "-H", "-l"})


def _long_prefix(roles: dict[str, tuple[str, str]], key: str) -> tuple[str, str]:
    """GNU getopt takes any unambiguous prefix (``--out`` is ``--output``): a prefix of an option that reads,
    writes or runs something counts as that option (the most dangerous one if several match)."""
    if len(key) < 4 or not key.startswith("--"):
        return ("", "")
    found = [roles[k] for k in _LONG_RISKY.get(id(roles), ()) if k.startswith(key)]
    for want in ("h", "w", "r"):
        for role in found:
            if role[0] == want:
                return role
    return ("", "")


def _role_path(eff: Effect, role: str, raw: str) -> None:
    if role == "r":
        eff.extra_reads.append(raw)
    else:
        eff.extra_writes.append(raw)
        eff.requirement = max(eff.requirement, WW)


def _role_index(eff: Effect, role: str, i: int) -> None:
    target = eff.reads if role == "r" else eff.writes
    if i not in target:
        target.append(i)
    if role == "w":
        eff.requirement = max(eff.requirement, WW)


def _effect(name: str, argv: tuple[str, ...], cmd: ParsedCommand) -> Effect:
    if name in PURE:
        if name == "env" and len(argv) > 1:
            return Effect(DFA, note="env with options")
        return Effect(RO)
    if name in READERS:
        pos = _positionals(argv, READERS[name])
        if name in ("cd", "pushd"):
            target = argv[pos[0]] if pos else "~"
            unknown = (pos and pos[0] in cmd.dynamic_args and not _HOME_WORD.fullmatch(target)) or target == "-"
            return Effect(RO, reads=pos[:1], cd="" if unknown else target)
        if name in ("less", "more"):
            pos = [p for p in pos if not argv[p].startswith("+")]
        return Effect(RO, reads=pos)
    if name == "popd":
        return Effect(RO, cd="")
    if name in SEARCHERS:
        return _searcher(name, argv)
    if name in WRITERS:
        pos = _positionals(argv, WRITERS[name])
        if name in ("touch", "truncate"):
            reads = [i + 1 for i, a in enumerate(argv[1:]) if a in ("-r", "--reference")]
            pos = [p for p in pos if p not in reads]
        if name == "tee":
            # tee with no file, or only /dev/null and the standard streams, writes nothing
            pos = [p for p in pos if argv[p] not in ("/dev/null", "/dev/stdout", "/dev/stderr")]
            if not pos:
                return Effect(RO)
        rec = pos if (name == "rm" and _has_flag(argv, "r", ("--recursive",))) or _has_flag(argv, "R") else []
        cat = ""
        if name == "rm" and "--no-preserve-root" in argv:
            cat = "rm --no-preserve-root"
        if name == "shred" and any(argv[p].startswith("/dev/") for p in pos):
            cat = "shred on a device"
        return Effect(WW, writes=pos, recursive_targets=rec, catastrophic=cat)
    if name in MODE_WRITERS:
        pos = _positionals(argv, frozenset({"--reference"}))
        # chmod takes a symbolic mode that looks like an option (``chmod -x FILE``, ``chmod -w,o-r FILE``):
        # then the first positional is already a file written, not the mode
        dash_mode = name == "chmod" and any(_DASH_MODE.fullmatch(a) for a in argv[1:])
        if not dash_mode and not any(a.startswith("--reference") for a in argv):
            pos = pos[1:]
        rec = pos if _has_flag(argv, "R", ("--recursive",)) else []
        return Effect(WW, writes=pos, recursive_targets=rec)
    if name in COPIERS:
        return _copier(name, argv)
    if name == "sed":
        return _sed(argv)
    if name == "sort":
        return _sort(argv)
    if name == "uniq":
        pos = _positionals(argv, frozenset(["-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"]))
        return Effect(WW, reads=pos[:1], writes=pos[1:2]) if len(pos) > 1 else Effect(RO, reads=pos)
    if name == "xxd":
        pos = _positionals(argv, frozenset(["-c", "-g", "-l", "-o", "-s", "-n", "-C"]))
        return Effect(WW, reads=pos[:1], writes=pos[1:2]) if len(pos) > 1 else Effect(RO, reads=pos)
    if name == "find":
        return _find(argv)
    if name == "git":
        return _git(argv)
    if name == "dd":
        return _dd(argv)
    if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
        return Effect(DFA, catastrophic=f"{name} destroys a file system")
    if name in ("fdisk", "sfdisk", "parted", "sgdisk", "gdisk", "cfdisk") and any(a.startswith("/dev/") for a in argv):
        return Effect(DFA, catastrophic=f"{name} repartitions a device")
    if name == "kill" and any(a in ("-1", "--", "-9") for a in argv[1:]) and "-1" in argv[2:]:
        return Effect(DFA, catastrophic="kill -1 signals every process you own")
    if name == "date":
        # date -f FILE prints every line it cannot read as a date: the file's contents (GTFOBins)
        files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-f", "--file")]
        files += [a.split("=", 1)[1] for a in argv[1:] if a.startswith("--file=")]
        files += [a[2:] for a in argv[1:] if a.startswith("-f") and len(a) > 2 and not a.startswith("--")]
        if files:
            return Effect(RO, extra_reads=files)
        return (
            Effect(RO)
            if (not _has_flag(argv, "s", ("--set",)) and not _positionals(argv, frozenset()))
            or (
                all(argv[p].startswith("+") for p in _positionals(argv, frozenset({"-d", "--date", "-r"})))
                and not _has_flag(argv, "s", ("--set",))
            )
            else Effect(DFA, note="date sets the clock")
        )
    if name == "hostname":
        return Effect(RO) if not _positionals(argv, frozenset()) else Effect(DFA, note="hostname sets the name")
    if name == "shopt":
        bad = [a for a in argv[1:] if a not in SHOPT_SAFE]
        return Effect(RO) if not bad else Effect(DFA, note=f"shopt {' '.join(bad)} changes how words expand")
    if name == "set":
        return Effect(RO)
    parser = _PARSERS.get(name)
    if parser is not None:
        return parser(argv)
    return opaque(argv)


def _searcher(name: str, argv: tuple[str, ...]) -> Effect:
    with_value, pattern_opts = SEARCHERS[name]
    reads: list[int] = []
    operands: list[int] = []  # the files and directories searched (not -f pattern files)
    pattern_given = False
    i = 1
    opts_done = False
    while i < len(argv):
        a = argv[i]
        if not opts_done and a == "--":
            opts_done = True
        elif not opts_done and a.startswith("-") and a != "-":
            key = a.split("=", 1)[0]
            if key in pattern_opts or (len(a) > 2 and a[:2] in ("-e", "-f") and not a.startswith("--")):
                pattern_given = True
                if key in ("-f", "--file", "--from-file") and a == key and i + 1 < len(argv):
                    reads.append(i + 1)
            if name == "jq" and a in _JQ_TWO_VALUES:
                if a in ("--slurpfile", "--rawfile") and i + 2 < len(argv):
                    reads.append(i + 2)
                i += 2
            elif a in with_value:
                i += 1
        elif a != "-":
            if not pattern_given:
                pattern_given = True
            else:
                reads.append(i)
                operands.append(i)
        i += 1
    if not ((name in _ALWAYS_RECURSIVE and "--files" not in argv) or (name in _GREPS and _recursive_grep(argv))):
        return Effect(RO, reads=reads)  # (rg --files only lists names, as ls does)
    if not operands:  # searches the working directory
        return Effect(RO, reads=reads, extra_reads=["."], extra_recursive_reads=["."])
    return Effect(RO, reads=reads, recursive_reads=operands)


# searchers that descend into every directory they are given (or the working directory without one)
_ALWAYS_RECURSIVE = frozenset({"rg", "ag"})
_GREPS = frozenset({"grep", "egrep", "fgrep"})


def _recursive_grep(argv: tuple[str, ...]) -> bool:
    """grep -r / -R / --recursive / -d recurse: every file below each directory operand is read."""
    for k, a in enumerate(argv[1:], 1):
        if a == "--":
            return False
        if a.startswith("--"):
            if (
                a in ("--recursive", "--dereference-recursive")
                or a.replace(" ", "") == "--directories=recurse"
                or (a == "--directories" and argv[k + 1 : k + 2] == ("recurse",))
            ):
                return True
        elif a.startswith("-") and len(a) > 1:
            flags = a[1:].split("d", 1)[0] if "d" in a[1:] else a[1:]
            if "r" in flags or "R" in flags:
                return True
            if "d" in a[1:] and (
                a[1:].split("d", 1)[1] == "recurse" or (a.endswith("d") and argv[k + 1 : k + 2] == ("recurse",))
            ):
                return True
    return False


def _copier(name: str, argv: tuple[str, ...]) -> Effect:
    opts = frozenset(COPIERS[name].split())
    pos = _positionals(argv, opts)
    target_dir = None
    for i, a in enumerate(argv[1:], 1):
        if a in ("-t", "--target-directory") and i + 1 < len(argv):
            target_dir = i + 1
        elif a.startswith("--target-directory="):
            target_dir = -1
    extra: list[str] = []
    if target_dir is not None:
        if target_dir > 0:
            pos = [p for p in pos if p != target_dir]
            dests = [target_dir]
        else:
            dests = []
            extra = [a.split("=", 1)[1] for a in argv if a.startswith("--target-directory=")]
        sources = pos
    elif name == "ln" and len(pos) == 1:
        sources, dests = pos, []
        extra = [argv[pos[0]].rstrip("/").rsplit("/", 1)[-1]]
    else:
        sources, dests = pos[:-1], pos[-1:]
    if name == "mv":
        # a move reads its sources too: mv .env src/x takes a file past Read(./.env) to where it can be read
        rec = sources
        return Effect(WW, reads=sources, writes=sources + dests, extra_writes=extra, recursive_targets=rec)
    if name == "ln" and _has_flag(argv, "s", ("--symbolic",)):
        # a symlink's target is checked like a read: a link to the outside is an escape waiting to happen.
        # A relative target is relative to the link's directory, not the cwd: check both readings
        rel = [
            posixpath.normpath(posixpath.join(posixpath.dirname(argv[d].rstrip("/")) or ".", argv[s]))
            for s in sources
            for d in dests
            if not argv[s].startswith(("/", "~", "$"))
        ]
        rel += [
            posixpath.normpath(posixpath.join(argv[d], argv[s]))
            for s in sources
            for d in dests
            if not argv[s].startswith(("/", "~", "$")) and argv[d].endswith("/")
        ]
        return Effect(WW, reads=sources, writes=dests, extra_writes=extra, extra_reads=rel, note="symlink")
    if name == "ln":
        # a hard link can change its source, and exposes it under another name (a read)
        return Effect(WW, reads=sources, writes=sources + dests, extra_writes=extra)
    if name == "install":
        return Effect(DFA, reads=sources, writes=dests, extra_writes=extra, note="install sets owners and modes")
    # cp -r/-a copies every file below a source directory to where other rules may let it be read
    deep = _has_flag(argv, "r", ("--recursive", "--archive")) or _has_flag(argv, "R") or _has_flag(argv, "a")
    return Effect(WW, reads=sources, writes=dests, extra_writes=extra, recursive_reads=sources if deep else [])


def _sed(argv: tuple[str, ...]) -> Effect:
    scripts: list[str] = []
    in_place = False
    files: list[int] = []
    unknown_script = False
    i = 1
    opts_done = False
    while i < len(argv):
        a = argv[i]
        if not opts_done and a == "--":
            opts_done = True
        elif not opts_done and a.startswith("--"):
            key, eq, val = a.partition("=")
            if key == "--in-place":
                in_place = True
            elif key == "--expression":
                if eq:
                    scripts.append(val)
                elif i + 1 < len(argv):
                    scripts.append(argv[i + 1])
                    i += 1
            elif key == "--file":
                unknown_script = True
                if not eq:
                    files.append(i + 1)  # read (and the script it holds is unknown)
                i += 0 if eq else 1
            elif key in ("--line-length", "--separate", "--null-data", "--zero-terminated"):
                pass
        elif not opts_done and a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                ch = a[j]
                if ch == "i":
                    in_place = True
                    break  # the rest is a backup suffix
                if ch in "ef":
                    val = a[j + 1 :]
                    if not val and i + 1 < len(argv):
                        val = argv[i + 1]
                        i += 1
                    if ch == "e":
                        scripts.append(val)
                    else:
                        unknown_script = True
                    break
                if ch == "l":
                    if not a[j + 1 :]:
                        i += 1
                    break
                j += 1
        elif not scripts and not unknown_script:
            scripts.append(a)
        else:
            files.append(i)
        i += 1
    safe = not unknown_script and all(sed_script_is_safe(s) for s in scripts)
    hidden = "" if safe else "sed script may run commands or read/write files it names inside (e, w, W, r, R, s///e)"
    if unknown_script:
        hidden = "sed runs a script from a file we do not read"
    if in_place:
        return Effect(WW if safe else DFA, reads=files, writes=files, hidden=hidden)
    return Effect(RO if safe else DFA, reads=files, hidden=hidden)


_SED_SIMPLE = set("pPdDnNgGhHxlq=QzF")


def sed_script_is_safe(script: str) -> bool:
    """True when a sed script has no w/W/e/r/R commands and no s///w or s///e flags (no file written or
    command run from the script)."""
    i, n = 0, len(script)

    def skip_regex(i: int, delim: str) -> int:
        while i < n:
            c = script[i]
            if c == "\\":
                i += 2
                continue
            if c == delim:
                return i + 1
            if c == "\n":
                return -1
            i += 1
        return -1

    while i < n:
        c = script[i]
        if c in " \t\n;":
            i += 1
            continue
        if c == "#":
            while i < n and script[i] != "\n":
                i += 1
            continue
        # address(es)
        for _ in range(2):
            if i < n and (script[i].isdigit() or script[i] == "$"):
                while i < n and (script[i].isdigit() or script[i] in "$~+"):
                    i += 1
            elif i < n and script[i] == "/":
                i = skip_regex(i + 1, "/")
                if i < 0:
                    return False
                while i < n and script[i] in "IM":
                    i += 1
            elif i + 1 < n and script[i] == "\\":
                i = skip_regex(i + 2, script[i + 1])
                if i < 0:
                    return False
            if i < n and script[i] == ",":
                i += 1
                continue
            break
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return True
        c = script[i]
        if c in "{}":
            i += 1
        elif c in _SED_SIMPLE:
            i += 1
            while i < n and script[i].isdigit():
                i += 1
        elif c in "bt:T":
            while i < n and script[i] not in ";\n}":
                i += 1
        elif c in "aic":
            while i < n and script[i] != "\n":
                if script[i] == "\\":
                    i += 1
                i += 1
        elif c in "sy":
            if i + 1 >= n:
                return False
            d = script[i + 1]
            if d in "\\\n":
                return False
            i = skip_regex(i + 2, d)
            if i < 0:
                return False
            i = skip_regex(i, d)
            if i < 0:
                return False
            if c == "s":
                while i < n and script[i] not in ";\n}":
                    if script[i] in "weWE":
                        return False
                    if script[i] not in "gpiImM0123456789 \t":
                        return False
                    i += 1
        else:
            return False  # w W r R e v and anything we do not know
    return True


def _sort_full(a: str) -> str:
    key, eq, val = a.partition("=")
    if len(key) >= 3 and key.startswith("--"):
        for full in ("--output", "--files0-from", "--random-source", "--temporary-directory"):
            if full.startswith(key) and key != full and (full != "--random-source" or len(key) >= 4):
                return full + eq + val
    return a


def _sort(argv: tuple[str, ...]) -> Effect:
    opts = frozenset(
        [
            "-k",
            "-t",
            "-S",
            "-T",
            "-o",
            "--key",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--output",
            "--parallel",
            "--batch-size",
            "--files0-from",
            "--random-source",
        ]
    )
    longs = [a.partition("=")[0] for a in argv[1:] if a.startswith("--") and len(a.partition("=")[0]) >= 4]
    if any("--compress-program".startswith(k) and k.startswith("--co") for k in longs):
        return Effect(DFA, hidden="sort --compress-program runs a program")
    # GNU getopt: --o, --ou ... are --output; --f... --files0-from
    argv = tuple(_sort_full(a) for a in argv)
    pos = _positionals(argv, opts)
    files0 = [i + 1 for i, a in enumerate(argv[1:-1], 1) if a == "--files0-from"]
    files0_extra = [a.partition("=")[2] for a in argv if a.startswith("--files0-from=")]
    outs = [i + 1 for i, a in enumerate(argv[1:], 1) if a in ("-o", "--output") and i + 1 < len(argv)]
    extra = [a.split("=", 1)[1] for a in argv if a.startswith("--output=")]
    extra += [a[2:] for a in argv[1:] if a.startswith("-o") and len(a) > 2 and not a.startswith("--")]
    if outs or extra:
        return Effect(WW, reads=pos + files0, writes=outs, extra_writes=extra, extra_reads=files0_extra)
    return Effect(RO, reads=pos + files0, extra_reads=files0_extra)


_FIND_WRITE_VALUE = ("-fprint", "-fprint0", "-fprintf", "-fls")
_FIND_WITH_VALUE = frozenset(
    [
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-regex",
        "-iregex",
        "-type",
        "-xtype",
        "-size",
        "-user",
        "-group",
        "-perm",
        "-newer",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-maxdepth",
        "-mindepth",
        "-printf",
        "-wholename",
        "-iwholename",
        "-lname",
        "-ilname",
        "-samefile",
        "-inum",
        "-links",
        "-uid",
        "-gid",
        "-used",
        "-context",
        "-newermt",
        "-anewer",
        "-cnewer",
        "-regextype",
        "-fstype",
    ]
)


def find_starts(argv: tuple[str, ...]) -> list[int]:
    """argv indices of find's start points (none: it starts at ``.``)."""
    return _find_head(argv)[0]


def _find_head(argv: tuple[str, ...]) -> tuple[list[int], int]:
    """find's start points, and the index of the first word after them (its expression)."""
    starts: list[int] = []
    i = 1
    while (i < len(argv) and argv[i] in ("-H", "-L", "-P")) or (i < len(argv) and argv[i].startswith("-D")):
        i += 2 if argv[i] == "-D" else 1
    while i < len(argv) and not argv[i].startswith(("-", "(", "!", ")")) and argv[i] != ",":
        starts.append(i)
        i += 1
    return starts, i


def _find(argv: tuple[str, ...]) -> Effect:
    starts, i = _find_head(argv)
    beyond = ""
    writes: list[int] = []
    extra_reads: list[str] = []
    req = RO
    cat = ""
    note = ""
    while i < len(argv):
        a = argv[i]
        if a in ("-exec", "-execdir", "-ok", "-okdir"):
            while i < len(argv) and argv[i] not in (";", "+"):
                i += 1
        elif a == "-delete":
            req = max(req, WW)
            writes = starts or []
            note = "find -delete removes what it finds"
            beyond = "find -delete removes files: a Bash(find ...) allow rule does not cover it"
        elif a in _FIND_WRITE_VALUE:
            if i + 1 < len(argv):
                writes.append(i + 1)
            req = max(req, WW)
            i += 1
        elif (
            (a in ("-newer", "-anewer", "-cnewer", "-samefile") and i + 1 < len(argv))
            or a in _FIND_WITH_VALUE
            or a.startswith("-newer")
        ):
            i += 1
        i += 1
    if not starts:
        extra_reads.append(".")
        if "-delete" in argv:
            extra_writes = ["."]
            return Effect(
                req,
                extra_reads=extra_reads,
                extra_writes=extra_writes,
                writes=writes,
                note=note,
                extra_recursive=["."],
                beyond_rule=beyond,
            )
    if any(a in ("-exec", "-execdir", "-ok", "-okdir") for a in argv):
        # the files it hands to the program are the ones its name tests pick: find . -name .env -exec cat {}
        # reads ./.env (what the deny rules see); a glob pattern is expanded like any read glob
        roots = [argv[s] for s in starts] or ["."]
        for j, a in enumerate(argv[:-1]):
            if a in ("-name", "-iname"):
                extra_reads += [posixpath.join(r, argv[j + 1]) for r in roots]
            elif a in ("-path", "-ipath", "-wholename", "-iwholename"):
                extra_reads.append(argv[j + 1])
    if "-delete" in argv and any(argv[s] in SYSTEM_TOP or argv[s] in ("~", "$HOME") for s in starts):
        cat = "find -delete over a system directory"
    return Effect(
        req,
        reads=starts,
        writes=writes,
        extra_reads=extra_reads,
        catastrophic=cat,
        note=note,
        recursive_targets=starts if "-delete" in argv else [],
        beyond_rule=beyond,
    )


GIT_BUILTINS = frozenset(
    [
        "add",
        "am",
        "annotate",
        "apply",
        "archive",
        "bisect",
        "blame",
        "branch",
        "bundle",
        "cat-file",
        "check-attr",
        "check-ignore",
        "check-mailmap",
        "check-ref-format",
        "checkout",
        "checkout-index",
        "cherry",
        "cherry-pick",
        "citool",
        "clean",
        "clone",
        "column",
        "commit",
        "commit-graph",
        "commit-tree",
        "config",
        "count-objects",
        "credential",
        "describe",
        "diff",
        "diff-files",
        "diff-index",
        "diff-tree",
        "difftool",
        "fast-export",
        "fast-import",
        "fetch",
        "fetch-pack",
        "filter-branch",
        "fmt-merge-msg",
        "for-each-ref",
        "for-each-repo",
        "format-patch",
        "fsck",
        "gc",
        "get-tar-commit-id",
        "grep",
        "gui",
        "hash-object",
        "help",
        "index-pack",
        "init",
        "instaweb",
        "interpret-trailers",
        "log",
        "ls-files",
        "ls-remote",
        "ls-tree",
        "mailinfo",
        "mailsplit",
        "maintenance",
        "merge",
        "merge-base",
        "merge-file",
        "merge-index",
        "merge-tree",
        "mergetool",
        "mktag",
        "mktree",
        "multi-pack-index",
        "mv",
        "name-rev",
        "notes",
        "pack-objects",
        "pack-redundant",
        "pack-refs",
        "patch-id",
        "prune",
        "prune-packed",
        "pull",
        "push",
        "range-diff",
        "read-tree",
        "rebase",
        "reflog",
        "remote",
        "repack",
        "replace",
        "request-pull",
        "rerere",
        "reset",
        "restore",
        "rev-list",
        "rev-parse",
        "revert",
        "rm",
        "send-email",
        "shortlog",
        "show",
        "show-branch",
        "show-index",
        "show-ref",
        "sparse-checkout",
        "stash",
        "status",
        "stripspace",
        "submodule",
        "switch",
        "symbolic-ref",
        "tag",
        "unpack-file",
        "unpack-objects",
        "update-index",
        "update-ref",
        "update-server-info",
        "var",
        "verify-commit",
        "verify-pack",
        "verify-tag",
        "version",
        "whatchanged",
        "worktree",
        "write-tree",
        "lfs",
    ]
)
# subcommands whose -u / --upload-pack / --exec name a program git runs
_GIT_UPLOAD_U = frozenset({"fetch", "clone", "ls-remote", "pull", "archive"})
# subcommands that run a program named in their words (or a tool from the configuration)
_GIT_RUNS = {
    "bisect": ("run",),
    "submodule": ("foreach",),
    "filter-branch": (),
    "difftool": (),
    "mergetool": (),
    "instaweb": (),
    "send-email": (),
    "rebase": ("-x", "--exec"),
    "for-each-repo": (),
}
_GIT_MESSAGE_OPTS = frozenset({"-m", "--message"})
# ``git -c key=value`` settings that only change how output looks (Codex's own idiom is -c core.pager=cat)
_GIT_SAFE_SETTINGS = frozenset(
    {
        "core.pager=cat",
        "core.pager=",
        "core.quotepath=false",
        "core.quotepath=off",
        "color.ui=false",
        "color.ui=never",
        "color.ui=always",
        "color.ui=auto",
        "core.abbrev=12",
        "diff.noprefix=true",
        "log.decorate=false",
        "log.decorate=short",
        "pager.log=false",
        "pager.diff=false",
        "pager.show=false",
        "pager.branch=false",
        "advice.detachedhead=false",
        "column.ui=never",
    }
)


_GIT_FULL_SHORTER = frozenset({"--text", "--exec-path", "--no-pager", "--paginate"})


def _git_abbrev(key: str, prefixes: frozenset[str]) -> bool:
    """git's parse-options takes an unambiguous prefix of a long option (``--outp`` is ``--output``);
    ``prefixes`` is ``_long_prefixes`` of the options that count."""
    return len(key) >= 4 and key in prefixes and key not in _GIT_FULL_SHORTER


def _long_prefixes(options: tuple[str, ...]) -> frozenset[str]:
    """Every prefix of four or more characters of the long ``options``, computed once at import: a key that one
    of them starts with is one of these (a set lookup instead of a scan of the table per option word)."""
    return frozenset(o[:n] for o in options if o.startswith("--") for n in range(4, len(o) + 1))


_GIT_BAD_GLOBAL_PREFIXES = _long_prefixes(GIT_BAD_GLOBAL)
_GIT_BAD_OPTS_PREFIXES = _long_prefixes(GIT_BAD_OPTS)
_GIT_WEB_PREFIXES = _long_prefixes(("--web",))


def _git_safe_setting(word: str) -> bool:
    key, eq, val = word.partition("=")
    return bool(eq) and f"{key.lower()}={val}" in _GIT_SAFE_SETTINGS


def _git(argv: tuple[str, ...]) -> Effect:
    i = 1
    repo_dir = "."
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        key = a.split("=", 1)[0]
        if a == "-c" and i + 1 < len(argv) and _git_safe_setting(argv[i + 1]):
            i += 2
            continue
        if key in GIT_BAD_GLOBAL or a.startswith("-c") or _git_abbrev(key, _GIT_BAD_GLOBAL_PREFIXES):
            # git --git-dir=.git config core.pager x still writes a repository's config (a protected file)
            rest = argv[i + 1 :]
            writes = (
                ["/etc/gitconfig"]
                if "config" in rest
                and not any(f in ("--get", "--get-all", "--get-regexp", "--list", "-l") for f in rest)
                else []
            )
            if writes:
                gd = [w.split("=", 1)[1] for w in argv[1 : i + 1] if w.startswith("--git-dir=")]
                gd += [argv[j + 1] for j in range(1, i + 1) if argv[j] == "--git-dir" and j + 1 < len(argv)]
                writes = [d.rstrip("/") + "/config" for d in gd] or [repo_dir.rstrip("/") + "/.git/config"]
            return Effect(
                DFA,
                hidden=f"git {key} can change configuration or run programs",
                git_config_check=repo_dir,
                extra_writes=writes,
            )
        if a == "-C" and i + 1 < len(argv):
            repo_dir = argv[i + 1] if repo_dir == "." else repo_dir.rstrip("/") + "/" + argv[i + 1]
            i += 2
            continue
        i += 1
    repo_read = [repo_dir] if repo_dir != "." else []  # git -C dir reads the repository there
    if i >= len(argv):
        return Effect(RO, extra_reads=repo_read)
    sub = argv[i]
    args = argv[i + 1 :]
    if sub not in GIT_BUILTINS:
        return Effect(
            DFA,
            hidden=f"git {sub} is not a git command we know: it may be an alias that runs a program",
            git_config_check=repo_dir,
        )
    for a in args:
        if a == "--":
            break
        key = a.split("=", 1)[0]
        if (
            key in GIT_BAD_OPTS
            or _git_abbrev(key, _GIT_BAD_OPTS_PREFIXES)
            or (sub == "grep" and a.startswith("-O"))
            or (sub == "help" and (key in ("-w", "--web", "-i", "--info") or _git_abbrev(key, _GIT_WEB_PREFIXES)))
            or (sub in _GIT_UPLOAD_U and (a == "-u" or (a.startswith("-u") and not a.startswith("--"))))
            or (sub == "clone" and (key in ("--config", "--template") or a.startswith("-c")))
        ):
            return Effect(DFA, hidden=f"git {sub} {key} writes files or runs programs", git_config_check=repo_dir)
    if sub in ("apply", "am") and not (
        sub == "apply"
        and any(a in ("--check", "--stat", "--numstat", "--summary") for a in args)
        and "--apply" not in args
    ):
        return Effect(
            DFA,
            hidden=f"git {sub} writes the files its patch names (protected ones included)",
            git_config_check=repo_dir,
            unnamed_writes=True,
        )
    if sub in _GIT_RUNS:
        runs = _GIT_RUNS[sub]
        if not runs or any(a in runs or a.split("=", 1)[0] in runs for a in args):
            return Effect(DFA, hidden=f"git {sub} runs programs", git_config_check=repo_dir)
    ro = sub in GIT_RO
    plain = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if sub == "branch":
        bad = {
            "-d",
            "-D",
            "-m",
            "-M",
            "-c",
            "-C",
            "-f",
            "-u",
            "-t",
            "--delete",
            "--move",
            "--copy",
            "--force",
            "--set-upstream-to",
            "--unset-upstream",
            "--track",
            "--edit-description",
            "--no-track",
        }
        listing = any(f in ("-l", "--list") for f in flags)
        ro = not any(f.split("=", 1)[0] in bad for f in flags) and (not plain or listing)
    elif sub == "tag":
        listing = any(f in ("-l", "--list") for f in flags)
        ro = (not plain or listing) and all(
            f in ("-l", "--list", "-n")
            or f.startswith(("--sort", "--format", "--contains", "--points-at", "--merged", "--no-merged", "-n"))
            for f in flags
        )
    elif sub == "remote":
        ro = not plain or plain[0] == "get-url"
        ro = ro and all(f in ("-v", "--verbose") for f in flags)
    elif sub == "stash":
        ro = bool(plain) and plain[0] in ("list", "show")
    elif sub == "config":
        # a read: --get/--list, or one key and no value (``git config user.name``), or git 2.46's
        # ``git config get KEY`` / ``git config list``; never with a write flag (below)
        reading = (
            any(f in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch") for f in flags)
            or (len(plain) == 1 and "." in plain[0] and "=" not in plain[0])
            or plain == ["list"]
            or (len(plain) == 2 and plain[0] == "get")
        )
        ro = reading and not any(
            f
            in (
                "--add",
                "--unset",
                "--unset-all",
                "--replace-all",
                "--rename-section",
                "--remove-section",
                "-e",
                "--edit",
            )
            for f in flags
        )
    elif sub == "worktree":
        ro = plain[:1] == ["list"]
    elif sub == "reflog":
        ro = not plain or plain[0] == "show"
    elif sub == "notes":
        ro = not plain or plain[0] in ("list", "show")
    elif sub == "diff" and "--no-index" in args:
        ro = True
    elif sub == "apply":
        # only reached with --check/--stat/--numstat/--summary and no --apply (above): it reads the patches.
        # --index/--cached/--3way still only check; --build-fake-ancestor writes a file; --reject/-v report
        ro = not any(a.startswith("--build-fake-ancestor") for a in args)
    if not ro and sub == "config":
        # a config write can set core.hooksPath, core.fsmonitor, aliases ...: it writes a protected file
        target = (
            "~/.gitconfig"
            if "--global" in flags
            else "/etc/gitconfig"
            if "--system" in flags
            else (repo_dir.rstrip("/") + "/.git/config")
        )
        files = [a.split("=", 1)[1] for a in args if a.startswith("--file=")]
        files += [args[j + 1] for j, a in enumerate(args[:-1]) if a in ("-f", "--file")]
        return Effect(DFA, extra_writes=files or [target], note=f"git {sub} changes configuration")
    words, rev_paths = _git_words(args, i + 1, "--no-index" in args)
    if (sub == "clean" and any(f.startswith("-") and not f.startswith("--") and "f" in f for f in flags)) or (
        "--force" in flags and sub == "clean"
    ):
        return Effect(
            DFA,
            reads=words,
            writes=words,
            extra_recursive=[repo_dir],
            git_config_check=repo_dir,
            note="git clean removes untracked files",
        )
    if not ro:
        # its path arguments are read and written as far as we know (deny rules, protected paths see them)
        return Effect(
            DFA,
            reads=words,
            writes=list(words),
            note=f"git {sub} is not a read-only git command",
            git_config_check=repo_dir,
            extra_reads=repo_read,
            extra_writes=list(repo_read),
        )
    if sub == "grep":  # searches every (tracked) file below its pathspecs, or below the working directory
        return Effect(
            RO,
            reads=words,
            extra_reads=rev_paths + repo_read + ([] if words else ["."]),
            git_config_check=repo_dir,
            recursive_reads=list(words),
            extra_recursive_reads=[] if words else ["."],
        )
    return Effect(RO, reads=words, extra_reads=rev_paths + repo_read, git_config_check=repo_dir)


def _git_words(args: tuple[str, ...], base: int, no_index: bool = False) -> tuple[list[int], list[str]]:
    """A git subcommand's words that name paths: after ``--``, path-looking ones (``./x``, ``../x``, ``/x``,
    ``~/x``, ``.env``), all of them for ``--no-index``; and the path of a ``REV:path`` word."""
    out: list[int] = []
    extra: list[str] = []
    skip = False
    opts_done = False
    for j, a in enumerate(args):
        if skip:
            skip = False
            continue
        if not opts_done and a == "--":
            opts_done = True
            continue
        if not opts_done and a.startswith("-"):
            if a in _GIT_MESSAGE_OPTS or (not a.startswith("--") and a.endswith("m") and len(a) > 1):
                skip = True
            continue
        if a in SAFE_DEVICES:
            continue
        if opts_done or no_index or a.startswith(("/", "~", ".")):
            out.append(base + j)
        elif ":" in a and not _URL.match(a):
            path = a.split(":", 1)[1]
            if path and not path.startswith(":"):
                extra.append(path)
    return out, extra


def _dd(argv: tuple[str, ...]) -> Effect:
    reads: list[str] = []
    writes: list[str] = []
    for a in argv[1:]:
        if a.startswith("if="):
            reads.append(a[3:])
        elif a.startswith("of="):
            writes.append(a[3:])
    cat = ""
    for w in writes:
        if w.startswith("/dev/") and w not in SAFE_DEVICES:
            cat = f"dd onto a device: {w}"
    return Effect(WW if writes else RO, extra_reads=reads, extra_writes=writes, catastrophic=cat)


_GIT_CONFIG_SECTION = re.compile(rb"^\s*\[\s*([A-Za-z0-9.\-]+)", re.M)
_GIT_CONFIG_KEY = re.compile(rb"^\s*([A-Za-z][A-Za-z0-9\-]*)\s*(?:=|$)", re.M)
_GIT_DANGEROUS_KEYS = frozenset(
    {
        b"fsmonitor",
        b"pager",
        b"textconv",
        b"external",
        b"command",
        b"driver",
        b"process",
        b"clean",
        b"smudge",
        b"gitproxy",
        b"sshcommand",
        b"askpass",
        b"editor",
        b"hookspath",
        b"path",
        b"helper",
        b"program",
        b"alternaterefscommand",
        b"packobjectshook",
        b"cmd",
        b"tool",
        b"trustctime",
        b"untrackedcache",
    }
)
_GIT_DANGEROUS_SECTIONS = (
    b"include",
    b"includeif",
    b"filter",
    b"pager",
    b"diff",
    b"merge",
    b"difftool",
    b"mergetool",
    b"sequence",
    b"gpg",
    b"credential",
)


@functools.lru_cache(maxsize=256)
def git_config_is_inert(config: bytes) -> bool:
    """Whether a repository config can run code in read-only git commands (fsmonitor, pager, textconv ...).

    Conservative: any include, filter, pager, diff/merge driver section, or a code-running key fails.
    """
    for m in _GIT_CONFIG_SECTION.finditer(config):
        section = m.group(1).lower().split(b".", 1)[0]
        if section in _GIT_DANGEROUS_SECTIONS:
            return False
    return all(m.group(1).lower() not in _GIT_DANGEROUS_KEYS for m in _GIT_CONFIG_KEY.finditer(config))


def _split_opts(
    argv: tuple[str, ...], value_short: str, value_long: frozenset[str], start: int = 1, old_style: bool = False
) -> tuple[list[tuple[str, str, int]], list[int]]:
    """Options as (key, value, value index or -1) and positional indices, for the archive parsers."""
    opts: list[tuple[str, str, int]] = []
    pos: list[int] = []
    i = start
    n = len(argv)
    opts_done = False
    pending: list[str] = []  # old-style tar letters waiting for their values ("cf" x.tar)
    if old_style and n > start and argv[start] and not argv[start].startswith("-"):
        for ch in argv[start]:
            if ch in value_short:
                pending.append("-" + ch)
            else:
                opts.append(("-" + ch, "", -1))
        i += 1
    while i < n:
        a = argv[i]
        if pending:
            opts.append((pending.pop(0), a, i))
        elif not opts_done and a == "--":
            opts_done = True
        elif not opts_done and a.startswith("--"):
            key, eq, val = a.partition("=")
            if eq:
                opts.append((key, val, -1))
            elif key in value_long and i + 1 < n:
                opts.append((key, argv[i + 1], i + 1))
                i += 1
            else:
                opts.append((key, "", -1))
        elif not opts_done and a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                ch = a[j]
                if ch in value_short:
                    if a[j + 1 :]:
                        opts.append(("-" + ch, a[j + 1 :], -1))
                    elif i + 1 < n:
                        opts.append(("-" + ch, argv[i + 1], i + 1))
                        i += 1
                    break
                opts.append(("-" + ch, "", -1))
                j += 1
        else:
            pos.append(i)
        i += 1
    return opts, pos


_TAR_HIDDEN = frozenset(
    {
        "-I",
        "-F",
        "--use-compress-program",
        "--to-command",
        "--checkpoint-action",
        "--info-script",
        "--new-volume-script",
        "--rsh-command",
        "--rmt-command",
        "--compress-program",
        "--index-file",
    }
)
_TAR_LONG_VALUE = frozenset(
    {
        "--file",
        "--files-from",
        "--exclude-from",
        "--directory",
        "--exclude",
        "--transform",
        "--owner",
        "--group",
        "--mode",
        "--mtime",
        "--strip-components",
        "--blocking-factor",
        "--format",
        "--listed-incremental",
        "--use-compress-program",
        "--to-command",
        "--info-script",
        "--new-volume-script",
        "--rsh-command",
        "--rmt-command",
        "--index-file",
        "--label",
        "--newer",
        "--after-date",
        "--record-size",
        "--tape-length",
    }
)


def _tar(argv: tuple[str, ...]) -> Effect:
    opts, pos = _split_opts(argv, "fTXCIFKNVbgHLs", _TAR_LONG_VALUE, old_style=True)
    mode = ""
    reads: list[int] = list(pos)
    writes: list[int] = []
    ex_r: list[str] = []
    ex_w: list[str] = []
    archive: list[tuple[str, int]] = []
    hidden = ""
    outdir: list[tuple[str, int]] = []
    for key, val, idx in opts:
        if key in _TAR_HIDDEN or (key == "--checkpoint-action" or key.startswith("--checkpoint-action")):
            hidden = f"tar {key} runs a program"
        elif key in ("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate"):
            mode = mode or "create"
        elif key in ("-x", "--extract", "--get"):
            mode = "extract"
        elif key in ("-t", "--list", "-d", "--diff", "--compare"):
            mode = mode or "list"
        elif key == "--delete":
            mode = "create"
        elif key in ("-f", "--file"):
            archive.append((val, idx))
        elif key in ("-T", "--files-from", "-X", "--exclude-from"):
            (reads.append(idx) if idx >= 0 else ex_r.append(val))
        elif key in ("-C", "--directory"):
            outdir.append((val, idx))
        elif key in ("-g", "--listed-incremental", "-V", "--label") and key in ("-g", "--listed-incremental"):
            (writes.append(idx) if idx >= 0 else ex_w.append(val))
    for val, idx in archive:
        if val == "-":
            continue
        if ":" in val.split("/", 1)[0] and "--force-local" not in argv:
            hidden = hidden or f"tar's archive {val} is on another host: tar runs a remote shell to reach it"
        if mode == "create":
            (writes.append(idx) if idx >= 0 else ex_w.append(val))
        else:
            (reads.append(idx) if idx >= 0 else ex_r.append(val))
    if mode == "extract":
        for val, idx in outdir or [(".", -1)]:
            (writes.append(idx) if idx >= 0 else ex_w.append(val))
        to_stdout = any(key in ("-O", "--to-stdout") for key, _v, _i in opts)  # members printed, no file made
        if to_stdout and not hidden:
            # tar -xOf a.tar [member...]: prints members; reads the archive (and -T lists), writes nothing.
            # The operands name members inside the archive, not files
            return Effect(RO, reads=[i for i in reads if i not in pos], extra_reads=ex_r)
        return Effect(
            DFA,
            reads=reads,
            writes=writes,
            extra_reads=ex_r,
            extra_writes=ex_w,
            unnamed_writes=not to_stdout,
            hidden=hidden or "tar -x writes the files the archive names (any path, .git/hooks included)",
        )
    if mode == "list":
        return Effect(DFA if hidden else RO, reads=reads, extra_reads=ex_r, hidden=hidden)
    if mode == "create":  # every file below a member directory goes into the archive
        return Effect(
            DFA if hidden else WW,
            reads=reads,
            writes=writes,
            extra_reads=ex_r,
            extra_writes=ex_w,
            hidden=hidden,
            recursive_reads=[] if "--no-recursion" in argv else list(pos),
        )
    return Effect(
        DFA,
        reads=reads,
        writes=list(reads),
        extra_reads=ex_r,
        extra_writes=ex_r,
        hidden=hidden,
        note="tar without a mode we know",
    )


def _zip(argv: tuple[str, ...]) -> Effect:
    opts, pos = _split_opts(
        argv,
        "bnPtO",
        frozenset(
            {
                "--temp-path",
                "--suffixes",
                "--password",
                "--output-file",
                "--unzip-command",
                "--from-date",
                "--before-date",
            }
        ),
    )
    hidden = ""
    ex_w: list[str] = []
    writes = pos[:1]
    for key, val, idx in opts:
        if key in ("--unzip-command", "-TT") or (key == "-T" and any(a.startswith("-TT") for a in argv)):
            hidden = "zip -TT/--unzip-command runs a program"
        elif key in ("-O", "--output-file"):
            (writes.append(idx) if idx >= 0 else ex_w.append(val))
    if any(a.startswith("-TT") for a in argv):
        hidden = "zip -TT runs a program"
    deep = _has_flag(argv, "r", ("--recurse-paths",)) or _has_flag(argv, "R", ("--recurse-patterns",))
    return Effect(
        DFA if hidden else WW,
        reads=pos[1:],
        writes=writes,
        extra_writes=ex_w,
        hidden=hidden,
        recursive_reads=pos[1:] if deep else [],
    )


def _unzip(argv: tuple[str, ...]) -> Effect:
    opts, pos = _split_opts(argv, "dxP", frozenset())
    keys = {k for k, _v, _i in opts}
    if keys & {"-l", "-t", "-v", "-Z", "-p", "-c", "-z"}:
        return Effect(RO, reads=pos[:1])
    writes = [i for k, _v, i in opts if k == "-d" and i >= 0]
    ex_w = [v for k, v, i in opts if k == "-d" and i < 0] or ([] if writes else ["."])
    return Effect(
        DFA,
        reads=pos[:1],
        writes=writes,
        extra_writes=ex_w,
        unnamed_writes=True,
        hidden="unzip writes the files the archive names (any path, .git/hooks included)",
    )


_AWK_RISKY = re.compile(r"system|getline|\||>|@|close|fflush")


def _awk(argv: tuple[str, ...]) -> Effect:
    opts, pos = _split_opts(
        argv,
        "FvfEie",
        frozenset({"--field-separator", "--assign", "--file", "--exec", "--include", "--load", "--source"}),
    )
    reads: list[int] = []
    ex_r: list[str] = []
    hidden = ""
    program_given = False
    for key, val, idx in opts:
        if key in ("-f", "--file", "-E", "--exec"):
            program_given = True
            hidden = "awk runs a program file we do not read"
            (reads.append(idx) if idx >= 0 else ex_r.append(val))
        elif key in ("-e", "--source"):
            program_given = True
            if _AWK_RISKY.search(val):
                hidden = "awk program may run commands or write files (system, |, >, getline)"
        elif key in ("-i", "--include", "-l", "--load"):
            hidden = f"awk {key} loads code"
    files = pos
    if not program_given and pos:
        if _AWK_RISKY.search(argv[pos[0]]):
            hidden = "awk program may run commands or write files (system, |, >, getline)"
        files = pos[1:]
    reads += [p for p in files if not _ASSIGN.match(argv[p])]
    return Effect(DFA if hidden else RO, reads=reads, extra_reads=ex_r, hidden=hidden)


_RSYNC_LONG_VALUE = frozenset(
    {
        "--exclude",
        "--include",
        "--exclude-from",
        "--include-from",
        "--files-from",
        "--filter",
        "--chmod",
        "--chown",
        "--backup-dir",
        "--partial-dir",
        "--temp-dir",
        "--log-file",
        "--password-file",
        "--port",
        "--bwlimit",
        "--timeout",
        "--compare-dest",
        "--link-dest",
        "--copy-dest",
        "--max-size",
        "--min-size",
        "--suffix",
        "--out-format",
        "--info",
        "--debug",
        "--iconv",
        "--rsh",
        "--rsync-path",
        "--usermap",
        "--groupmap",
        "--log-file-format",
        "--modify-window",
        "--max-delete",
        "--block-size",
        "--compress-choice",
        "--checksum-choice",
    }
)


def _remote(word: str) -> bool:
    head = word.split("/", 1)[0]
    return ":" in head or word.startswith("rsync://")


def _rsync(argv: tuple[str, ...]) -> Effect:
    opts, pos = _split_opts(argv, "efTBM", _RSYNC_LONG_VALUE)
    hidden = ""
    reads: list[int] = []
    writes: list[int] = []
    ex_r: list[str] = []
    ex_w: list[str] = []
    delete = False
    for key, val, idx in opts:
        if key in ("-e", "--rsh", "--rsync-path", "-M", "--remote-option"):
            hidden = f"rsync {key} names a program it runs"
        elif key.startswith("--delete") or key in ("--remove-source-files",):
            delete = True
        elif key in ("--exclude-from", "--include-from", "--files-from", "--password-file"):
            (reads.append(idx) if idx >= 0 else ex_r.append(val))
        elif key in ("--log-file", "--backup-dir", "--partial-dir", "-T", "--temp-dir"):
            (writes.append(idx) if idx >= 0 else ex_w.append(val))
    local = [p for p in pos if not _remote(argv[p])]
    remote = len(local) != len(pos)
    if pos:
        src, dst = pos[:-1], pos[-1:]
        reads += [p for p in src if p in local]
        writes += [p for p in dst if p in local]
    rec = [p for p in pos[-1:] if p in local] if delete else []
    req = DFA if (hidden or remote) else WW
    deep = _has_flag(argv, "r", ("--recursive", "--archive")) or _has_flag(argv, "a")
    return Effect(
        req,
        reads=reads,
        writes=writes,
        extra_reads=ex_r,
        extra_writes=ex_w,
        hidden=hidden,
        recursive_targets=rec,
        note="rsync to or from another host" if remote else "",
        recursive_reads=[p for p in pos[:-1] if p in local] if deep else [],
    )


_NEXUSCTL_RO = frozenset({"status", "pending", "watch", "audit", "check", "version", "grants", "help", "explain"})


def _nexusctl(argv: tuple[str, ...]) -> Effect:
    """nexusd's own CLI: what changes the gate needs a person (the agent must not manage its own gate)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-h", "--help"):
            return Effect(RO)
        if argv[i] == "--socket":
            i += 2
        elif argv[i].startswith("--socket="):
            i += 1
        else:
            return Effect(DFA, gate_control=True, note=f"nexusctl with an option we do not know: {argv[i]}")
    if i >= len(argv):
        return Effect(RO)
    sub = argv[i]
    plain = [a for a in argv[i + 1 :] if not a.startswith("-")]
    if sub in _NEXUSCTL_RO or (sub in ("rules", "trust") and (not plain or plain[0] in ("list", "show"))):
        return Effect(RO)
    return Effect(DFA, gate_control=True, note=f"nexusctl {sub} manages the gate itself")


def _nexus_ui(argv: tuple[str, ...]) -> Effect:
    return Effect(
        DFA,
        gate_control=True,
        note=f"{argv[0]} is nexusd's own program (it runs or answers the gate): a person runs it",
    )


_DOCKER_RO = frozenset({"ps", "images", "version", "info", "inspect", "logs", "top", "history", "search"})
_DOCKER_RO_PAIRS = frozenset(
    {
        ("image", "ls"),
        ("container", "ls"),
        ("network", "ls"),
        ("volume", "ls"),
        ("image", "list"),
        ("container", "list"),
        ("context", "ls"),
        ("compose", "ps"),
        ("image", "inspect"),
        ("container", "inspect"),
        ("system", "df"),
    }
)


# databases getent answers from local files alone; every other one (hosts, ahosts*, networks, netgroup ...)
# may ask a resolver over the network
_GETENT_LOCAL = frozenset(
    {"passwd", "group", "shadow", "gshadow", "services", "protocols", "rpc", "ethers", "aliases", "initgroups"}
)


def _getent(argv: tuple[str, ...]) -> Effect:
    """getent: a name-service lookup; ``getent hosts x`` resolves a name, which is network access."""
    pos = [a for a in argv[1:] if not a.startswith("-")]
    if len(pos) == len(argv) - 1 and pos and pos[0] in _GETENT_LOCAL:
        return Effect(RO)
    return Effect(DFA, note="getent resolves names through the name service (DNS: the network)")


# an agent CLI's subcommands that only show its settings
_AGENT_RO = frozenset({"list", "ls", "get", "show", "status", "--help", "-h", "help"})
_AGENT_CONFIG = frozenset(
    {
        "mcp",
        "config",
        "configure",
        "plugin",
        "plugins",
        "extensions",
        "extension",
        "hooks",
        "permissions",
        "settings",
        "marketplace",
        "install",
        "uninstall",
        "setup-token",
        "auth",
        "login",
        "logout",
        "trust",
        "sandbox",
        "features",
        "profile",
        "update",
        "migrate-installer",
    }
)


def _agent_cli(argv: tuple[str, ...]) -> Effect:
    """``claude mcp add``, ``gemini extensions install``, ``codex mcp add``: an agent's own CLI changing its
    settings changes what an agent may run unasked, so it is gate management (a person, always). Any
    other use runs an agent: an unknown program."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words and words[0] in _AGENT_CONFIG and not (len(words) > 1 and words[1] in _AGENT_RO):
        eff = opaque(argv)
        eff.gate_control = True
        eff.note = f"{program_name(argv[0])} {words[0]} changes a coding agent's own settings"
        return eff
    return opaque(argv)


def _docker(argv: tuple[str, ...]) -> Effect:
    if len(argv) < 2 or argv[1].startswith("-"):
        return opaque(argv)  # global options (--config, -H, --context) change what runs
    sub = argv[1]
    if sub in ("stats",) and "--no-stream" in argv:
        return Effect(RO)
    if sub in _DOCKER_RO or (len(argv) > 2 and (sub, argv[2]) in _DOCKER_RO_PAIRS):
        return Effect(RO)
    return opaque(argv)


def _patch(argv: tuple[str, ...]) -> Effect:
    """patch writes the files its diff names (any of them, protected ones included): a hidden effect."""
    opts, pos = _split_opts(
        argv,
        "ipdoBDFrVYzgx",
        frozenset({"--input", "--directory", "--output", "--strip", "--reject-file", "--prefix", "--suffix"}),
    )
    reads = [i for k, _v, i in opts if k in ("-i", "--input") and i >= 0]
    ex_r = [v for k, v, i in opts if k in ("-i", "--input") and i < 0]
    writes = [i for k, _v, i in opts if k in ("-o", "--output", "-r", "--reject-file") and i >= 0] + pos[:1]
    reads += pos[1:2]
    return Effect(
        DFA,
        reads=reads,
        writes=writes,
        extra_reads=ex_r,
        unnamed_writes=True,
        hidden="patch writes the files its diff names (protected ones included)",
    )


def _config_write(name: str, argv: tuple[str, ...]) -> str:
    """The protected file a package manager's config subcommand writes (npm config set script-shell ...)."""
    target = CONFIG_WRITERS.get(name)
    if target is None:
        return ""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words[:1] in (["set"], ["delete"], ["edit"]) and name == "npm":
        return target
    if words[:1] == ["config"] and len(words) > 1 and words[1] not in ("get", "list", "ls"):
        return target
    return ""


# system settings tools: these subcommands (or none) only show; any other changes the machine
_SETTINGS_RO = {
    "hostnamectl": frozenset({"status", "show"}),
    "timedatectl": frozenset({"status", "show", "list-timezones", "timesync-status", "show-timesync"}),
}
_SETTINGS_GETTERS = frozenset({"hostname", "icon-name", "chassis", "deployment", "location"})  # set with a value
_NVIDIA_SMI_RO = frozenset(
    {
        "-L",
        "--list-gpus",
        "-q",
        "--query",
        "-x",
        "--xml-format",
        "-l",
        "--loop",
        "-lms",
        "--loop-ms",
        "-i",
        "--id",
        "-d",
        "--display",
        "-h",
        "--help",
        "-u",
        "--unit",
    }
)


def _settings(argv: tuple[str, ...]) -> Effect:
    """hostnamectl / timedatectl (show unless a subcommand sets), nvidia-smi (shows unless an option sets)."""
    name = program_name(argv[0]) or ""
    if name == "nvidia-smi":
        for a in argv[1:]:
            key = a.split("=", 1)[0]
            if key.startswith("-") and key not in _NVIDIA_SMI_RO and not key.startswith(("--query-", "--format")):
                return Effect(DFA, note=f"nvidia-smi {key} changes the GPU's settings or writes a file")
            if not key.startswith("-") and key not in ("dmon", "pmon", "topo") and not key.isdigit():
                return Effect(DFA, note=f"nvidia-smi {key} may change the GPU's settings")
        return Effect(RO)
    if any(a in ("-H", "--host", "-M", "--machine") or a.startswith(("--host=", "--machine=")) for a in argv[1:]):
        return Effect(DFA, note=f"{name} on another machine")
    words = [a for a in argv[1:] if not a.startswith("-")]
    if not words or words[0] in _SETTINGS_RO.get(name, ()) or (words[0] in _SETTINGS_GETTERS and len(words) == 1):
        return Effect(RO)
    return Effect(DFA, note=f"{name} {words[0]} changes the machine's settings")


_PS_VALUE_OPTS = frozenset(
    {
        "-o",
        "-O",
        "--format",
        "-p",
        "--pid",
        "-u",
        "-U",
        "--user",
        "-g",
        "-G",
        "--group",
        "-C",
        "-t",
        "--tty",
        "--sort",
        "-q",
        "--ppid",
        "-s",
        "--sid",
        "k",
        "o",
        "O",
        "p",
        "U",
        "t",
    }
)


def _ps(argv: tuple[str, ...]) -> Effect:
    """ps: BSD-style ``e`` (``ps eww``, ``ps auxe``) and the ``environ``-like formats print other processes'
    environments (their tokens and keys): a read of /proc/PID/environ."""
    for i, a in enumerate(argv[1:], 1):
        bsd_env = not a.startswith("-") and "e" in a and argv[i - 1] not in _PS_VALUE_OPTS
        if bsd_env or "environ" in a:
            return Effect(RO, extra_reads=["/proc/1/environ"])
    return Effect(RO)


_GATE_STEM = "nexus"  # in every gate program's name: a command without it names none of them
if not all(_GATE_STEM in n for n in GATE_PROGRAMS):
    raise ImportError(f"every gate program name must contain {_GATE_STEM!r} (commands._gate_program)")


def _gate_program(argv: tuple[str, ...]) -> str:
    """The gate program this runs, by any path, as a python module, or as a word of a runner we do not know."""
    base = argv[0].rsplit("/", 1)[-1]
    if base in GATE_PROGRAMS:
        return base
    if base.startswith("python") and "-m" in argv:
        i = argv.index("-m")
        mod = argv[i + 1] if i + 1 < len(argv) else ""
        if mod.split(".", 1)[0] in GATE_MODULES:
            return "nexusctl" if mod.endswith((".ctl", ".cli")) else "nexusd"
    if (
        base not in _KIND
        and _GATE_STEM in "\x00".join(argv)
        and any(a.rsplit("/", 1)[-1] in GATE_PROGRAMS for a in argv[1:])
    ):
        return "nexusd"  # pipx run nexusctl ...: an unknown runner of the gate's own program
    return ""


def _plugin_off(words: tuple[str, ...], k: int) -> bool:
    """pytest -p no:NAME (or -pno:NAME) turns a plugin off: it loads nothing."""
    w = words[k]
    return (w == "-p" and k + 1 < len(words) and words[k + 1].startswith("no:")) or w.startswith("-pno:")


def _pkill(argv: tuple[str, ...]) -> Effect:
    """pkill / killall: signals the processes it matches; by user alone (-u NAME, no pattern), every one of
    that user's processes (the desktop session, the agent, nexusd) like kill -9 -1."""
    name = program_name(argv[0]) or argv[0]
    with_value = {
        "-u",
        "--user",
        "-U",
        "--uid",
        "-g",
        "--pgroup",
        "-G",
        "--group",
        "-P",
        "--parent",
        "-s",
        "--session",
        "-t",
        "--terminal",
        "-n",
        "--signal",
        "-o",
        "--older-than",
        "-y",
        "--younger-than",
        "-F",
        "--pidfile",
        "-c",
        "--count",
        "--ns",
        "--nslist",
    }
    by_user = False
    patterns = 0
    i = 1
    while i < len(argv):
        a = argv[i]
        if (
            a in ("-u", "--user", "-U", "--uid")
            or a.startswith(("--user=", "--uid="))
            or (a.startswith("-u") and len(a) > 2)
        ):
            by_user = True
        if a in with_value:
            i += 2
            continue
        if not a.startswith("-"):
            patterns += 1
        i += 1
    if by_user and not patterns:
        return Effect(DFA, catastrophic=f"{name} -u without a pattern signals every process of that user")
    return Effect(DFA, note=f"{name} signals the processes it matches")


def _crontab(argv: tuple[str, ...]) -> Effect:
    """crontab -l lists; anything else installs jobs cron runs later (persistence): a protected write."""
    flags = [a for a in argv[1:] if a.startswith("-") and a != "-"]
    if flags and all(f in ("-l", "-u") or f.startswith("-u") for f in flags) and "-l" in flags:
        return Effect(RO)
    files = [i for i, a in enumerate(argv[1:], 1) if not a.startswith("-") and argv[i - 1] != "-u"]
    return Effect(
        DFA,
        reads=files,
        extra_writes=["/var/spool/cron/crontabs/user"],
        hidden="crontab installs jobs that cron runs later",
    )


def _pwsh(argv: tuple[str, ...]) -> Effect:
    """PowerShell's static subset (powershell.py): read-only cmdlets read, file cmdlets write; else opaque."""
    try:
        eff = powershell.effects(powershell.command_of(argv))
    except powershell.Opaque as e:
        out = opaque(argv)
        out.note = f"PowerShell: {e}"
        words = powershell.rough_words(" ".join(argv[1:]))  # still seen by Read/Edit deny rules and the boundary
        out.extra_reads = [*out.extra_reads, *words]
        out.extra_writes = [*out.extra_writes, *words]
        return out
    return Effect(eff.requirement, extra_reads=eff.reads, extra_writes=eff.writes, extra_recursive=eff.recursive)


_PARSERS = {
    "crontab": _crontab,
    "pkill": _pkill,
    "killall": _pkill,
    "ps": _ps,
    "hostnamectl": _settings,
    "timedatectl": _settings,
    "nvidia-smi": _settings,
    "tar": _tar,
    "bsdtar": _tar,
    "zip": _zip,
    "unzip": _unzip,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "rsync": _rsync,
    "patch": _patch,
    "nexusctl": _nexusctl,
    "nexus-tui": _nexus_ui,
    "nexus-web": _nexus_ui,
    "nexusd": _nexus_ui,
    "nexus-hook": _nexus_ui,
    "nexus-mcp": _nexus_ui,
    "nexus-acp": _nexus_ui,
    "docker": _docker,
    "getent": _getent,
    **dict.fromkeys(AGENT_CLIS, _agent_cli),
    "pwsh": _pwsh,
    "powershell": _pwsh,
    "pwsh.exe": _pwsh,
    "powershell.exe": _pwsh,
}


# Options that mean the same thing however they are spelled, per program: long name -> short letter.
_SAME_MEANING: dict[str, dict[str, str]] = {
    "rm": {"--recursive": "r", "--force": "f", "-R": "r"},
    "cp": {"--recursive": "r", "--force": "f", "-R": "r"},
    "chmod": {"--recursive": "R"},
    "chown": {"--recursive": "R"},
    "chgrp": {"--recursive": "R"},
}
# the letters whose spellings a deny rule is likely to name; others are kept out of the canonical views
_MEANINGFUL = {"rm": "rf", "cp": "rf", "chmod": "R", "chown": "R", "chgrp": "R"}
_PUSH_FORCE = frozenset({"-f", "--force", "--force-with-lease", "--force-if-includes"})


def meaning_spellings(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Other spellings of what ``argv`` does, for deny and ask rules: ``Bash(rm -rf *)`` means ``rm -fr``,
    ``rm -r -f``, ``rm --recursive --force`` and ``rm -rfv`` too; ``Bash(git push --force *)`` means ``-f``,
    ``--force-with-lease`` and a ``+refspec``. Empty for everything else (allow rules never see these)."""
    if not argv:
        return []
    name = argv[0].rstrip("/").rsplit("/", 1)[-1]
    if name == "git":
        return _push_spellings(argv)
    table = _SAME_MEANING.get(name)
    if table is None:
        return []
    letters: set[str] = set()
    operands: list[str] = []
    for k, a in enumerate(argv[1:], 1):
        if a == "--":
            operands += argv[k + 1 :]
            break
        if a.startswith("--"):
            if a in table:
                letters.add(table[a])
        elif a.startswith("-") and len(a) > 1:
            for ch in a[1:]:
                letters.add(table.get("-" + ch, ch))
        else:
            operands.append(a)
    want = [ch for ch in _MEANINGFUL[name] if ch in letters]
    if not want:
        return []
    out: list[tuple[str, ...]] = []
    orders = [want, want[::-1]] if len(want) > 1 else [want]
    for order in orders:
        out.append((name, "-" + "".join(order), *operands))
        out.append((name, *("-" + ch for ch in order), *operands))
    longs = [k for k, v in table.items() if k.startswith("--") and v in want]
    if longs:
        out.append((name, *longs, *operands))
        out.append((name, *reversed(longs), *operands))
    if name in ("rm", "cp") and "r" in want:
        out.append((name, "-R" + ("f" if "f" in want else ""), *operands))
    return out


def _push_spellings(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """``git [-C dir] push`` with a force in any spelling, as ``git push --force ARGS`` and ``git push -f ARGS``."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(argv) or argv[i] != "push":
        return []
    rest = argv[i + 1 :]
    forced = False
    args: list[str] = []
    for a in rest:
        if a in _PUSH_FORCE or a.startswith(("--force-with-lease=", "--force=")):
            forced = True
        elif a.startswith("-") and not a.startswith("--") and "f" in a[1:] and len(a) > 1:
            forced = True
            if a.replace("f", "") != "-":
                args.append(a.replace("f", ""))
        elif a.startswith("+") and len(a) > 1:
            forced = True
            args.append(a[1:])
        else:
            args.append(a)
    if not forced:
        return []
    head = ("git", "push")
    return [(*head, "--force", *args), (*head, "-f", *args), (*argv[:i], "push", "--force", *args)]
