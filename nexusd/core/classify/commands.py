"""What one simple command needs and touches: seed 000's levels with its flag checks.

``effect(cmd)`` knows the argument conventions of common commands well enough to say which
arguments are files read and written, and whether the command stays read-only with the flags it
was given. It does not look at the file system; ``classify`` resolves the paths afterwards. Anything
not known here requires danger-full-access.
"""

from __future__ import annotations

import re

import msgspec

from nexusd.core.classify.bash import ParsedCommand
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


# Commands that only print and take no file arguments.
PURE = frozenset(
    {
        "echo",
        "printf",
        "true",
        "false",
        "pwd",
        "whoami",
        "id",
        "uname",
        "which",
        "type",
        "whereis",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "seq",
        "sleep",
        "printenv",
        "test",
        "[",
        "[[",
        ":",
        "nproc",
        "arch",
        "uptime",
        "groups",
        "locale",
        "tty",
        "ps",
        "free",
        "cal",
        "yes",
        "expr",
        "tput",
        "logname",
        "users",
        "w",
        "who",
        "lsb_release",
        "getconf",
        "hash",
        "jobs",
        "wait",
        "read",
        "export",
        "declare",
        "local",
        "readonly",
        "typeset",
        "unset",
        "shift",
        "return",
        "exit",
        "break",
        "continue",
        "lscpu",
        "lsblk",
        "pgrep",
        "dirs",
        "umask",
        "times",
        "help",
        "man",
        "info",
        "apropos",
        "whatis",
        "numfmt",
        "factor",
        "getent",
        "env",
        "command",
    }
)
# Read-only commands whose non-option arguments are files they read; value = options that take a value.
READERS: dict[str, frozenset[str]] = {
    name: frozenset(opts.split())
    for name, opts in {
        "cat": "",
        "head": "-n -c --lines --bytes",
        "tail": "-n -c --lines --bytes -s --sleep-interval --pid",
        "less": "-b -h -j -k -o -O -p -P -t -T -x -y -z -#",
        "more": "-n",
        "wc": "",
        "nl": "-b -d -f -h -i -l -n -s -v -w",
        "tac": "-s",
        "rev": "",
        "od": "-A -j -N -S -t -w",
        "hexdump": "-e -f -n -s",
        "strings": "-n -t -e -T",
        "file": "-m -f -e -F -P",
        "stat": "-c --format --printf",
        "md5sum": "",
        "sha1sum": "",
        "sha224sum": "",
        "sha256sum": "",
        "sha384sum": "",
        "sha512sum": "",
        "b2sum": "-l",
        "cksum": "-a",
        "sum": "",
        "cut": "-b -c -d -f --output-delimiter",
        "paste": "-d",
        "join": "-1 -2 -a -e -j -o -t -v",
        "fold": "-w",
        "fmt": "-w -g -p",
        "expand": "-t",
        "unexpand": "-t",
        "column": "-c -s -o -n -t -N -R -H -W -J -E -O",
        "comm": "--output-delimiter",
        "diff": "-U -C -F -I -L -x -X --label --to-file --from-file --horizon-lines --exclude --ignore-matching-lines",
        "cmp": "-i -n --bytes --ignore-initial",
        "base64": "-w",
        "ls": "-I -T -w --ignore --hide --tabsize --width --format --sort --time --time-style --color --quoting-style",
        "du": "-d -B -t --max-depth --exclude --threshold --block-size --time-style",
        "df": "-B -t -x --block-size --type --exclude-type --output",
        "tree": "-L -I -P --filelimit --charset --sort -H -T",
        "cd": "",
        "pushd": "",
        "bat": "-l -H -r --language --highlight-line --line-range --style --theme --tabs --wrap --terminal-width",
        "eza": "-L -I -s --level --ignore-glob --sort --color --time-style",
        "exa": "-L -I -s --level --ignore-glob --sort --color --time-style",
        "shasum": "-a",
        "zcat": "",
        "xzcat": "",
        "bzcat": "",
        "lsattr": "",
    }.items()
}
# pattern-first searchers: (options with a value, options that supply the pattern)
SEARCHERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "grep": (
        frozenset(
            [
                "-e",
                "-f",
                "-m",
                "-A",
                "-B",
                "-C",
                "-d",
                "-D",
                "--regexp",
                "--file",
                "--max-count",
                "--after-context",
                "--before-context",
                "--context",
                "--label",
                "--binary-files",
                "--devices",
                "--directories",
                "--exclude",
                "--include",
                "--exclude-dir",
                "--exclude-from",
                "--group-separator",
            ]
        ),
        frozenset(["-e", "-f", "--regexp", "--file"]),
    ),
    "rg": (
        frozenset(
            [
                "-e",
                "-f",
                "-g",
                "-t",
                "-T",
                "-m",
                "-A",
                "-B",
                "-C",
                "-j",
                "-M",
                "-r",
                "-E",
                "--regexp",
                "--file",
                "--glob",
                "--iglob",
                "--type",
                "--type-not",
                "--max-count",
                "--after-context",
                "--before-context",
                "--context",
                "--threads",
                "--max-columns",
                "--replace",
                "--max-depth",
                "--max-filesize",
                "--encoding",
                "--sort",
                "--sortr",
                "--type-add",
                "--colors",
                "--color",
                "--field-match-separator",
                "--path-separator",
                "--context-separator",
                "--engine",
                "--dfa-size-limit",
                "--regex-size-limit",
            ]
        ),
        frozenset(["-e", "-f", "--regexp", "--file"]),
    ),
    "ag": (
        frozenset(
            [
                "-A",
                "-B",
                "-C",
                "-G",
                "-g",
                "-m",
                "--ignore",
                "--depth",
                "--file-search-regex",
                "--max-count",
                "--context",
            ]
        ),
        frozenset(),
    ),
    "jq": (
        frozenset(
            ["--indent", "--arg", "--argjson", "--slurpfile", "--rawfile", "--args", "--jsonargs", "-f", "--from-file"]
        ),
        frozenset(["-f", "--from-file"]),
    ),
}
SEARCHERS["egrep"] = SEARCHERS["fgrep"] = SEARCHERS["grep"]
_JQ_TWO_VALUES = frozenset({"--arg", "--argjson", "--slurpfile", "--rawfile"})

# Commands whose every non-option argument is a file they write (create, remove, change).
WRITERS: dict[str, frozenset[str]] = {
    name: frozenset(opts.split())
    for name, opts in {
        "rm": "",
        "rmdir": "",
        "unlink": "",
        "mkdir": "-m --mode --context",
        "touch": "-d -t -r --date --reference",
        "tee": "",
        "truncate": "-s -r --size --reference",
        "shred": "-n -s --iterations --size --random-source",
    }.items()
}
MODE_WRITERS = {"chmod", "chown", "chgrp"}  # first positional is a mode/owner
COPIERS = {
    "cp": "-S -t --suffix --target-directory",
    "mv": "-S -t --suffix --target-directory",
    "ln": "-S -t --suffix --target-directory",
    "install": "-m -o -g -S -t --mode --owner --group --suffix --target-directory",
}

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
    name = argv[0].rsplit("/", 1)[-1] if argv[0].startswith(("/", "./")) else argv[0]
    if name in PURE:
        if name == "env" and len(argv) > 1:
            return Effect(DFA, note="env with options")
        return Effect(RO)
    if name in READERS:
        pos = _positionals(argv, READERS[name])
        if name in ("cd", "pushd"):
            target = argv[pos[0]] if pos else "~"
            return Effect(RO, reads=pos[:1], cd="" if (pos and pos[0] in cmd.dynamic_args) or target == "-" else target)
        if name == "tree" and _has_flag(argv, "o", ("--output",)):
            return Effect(DFA, reads=pos, note="tree -o writes a file")
        if name == "less" and any(a.startswith("+") or a.startswith("-o") for a in argv[1:]):
            return Effect(DFA, note="less with commands or a log file")
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
        rec = pos if (name == "rm" and _has_flag(argv, "r", ("--recursive",))) or _has_flag(argv, "R") else []
        cat = ""
        if name == "rm" and "--no-preserve-root" in argv:
            cat = "rm --no-preserve-root"
        if name == "shred" and any(argv[p].startswith("/dev/") for p in pos):
            cat = "shred on a device"
        return Effect(WW, writes=pos, recursive_targets=rec, catastrophic=cat)
    if name in MODE_WRITERS:
        pos = _positionals(argv, frozenset({"--reference"}))
        if not any(a.startswith("--reference") for a in argv):
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
    return Effect(DFA, known=False)


def _searcher(name: str, argv: tuple[str, ...]) -> Effect:
    with_value, pattern_opts = SEARCHERS[name]
    if name == "rg" and any(a == "--pre" or a.startswith(("--pre=", "--search-zip")) or a == "-z" for a in argv):
        return Effect(DFA, note="rg --pre/--search-zip runs other programs")
    reads: list[int] = []
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
        i += 1
    return Effect(RO, reads=reads)


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
        rec = sources
        return Effect(WW, reads=[], writes=sources + dests, extra_writes=extra, recursive_targets=rec)
    if name == "ln" and _has_flag(argv, "s", ("--symbolic",)):
        # a symlink's target is checked like a read: a link to the outside is an escape waiting to happen
        return Effect(WW, reads=sources, writes=dests, extra_writes=extra, note="symlink")
    if name == "ln":
        return Effect(WW, writes=sources + dests, extra_writes=extra)  # a hard link can change its source
    if name == "install":
        return Effect(DFA, reads=sources, writes=dests, extra_writes=extra, note="install sets owners and modes")
    return Effect(WW, reads=sources, writes=dests, extra_writes=extra)


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
    if in_place:
        return Effect(
            WW if safe else DFA,
            reads=files,
            writes=files,
            note="" if safe else "sed script writes files or runs commands",
        )
    if not safe:
        return Effect(DFA, reads=files, note="sed script writes files or runs commands (w, W, e, r)")
    return Effect(RO, reads=files)


_SED_SIMPLE = set("pPdDnNgGhHxlq=QzF")


def sed_script_is_safe(script: str) -> bool:
    """True when a sed script has no w/W/e/r/R commands and no s///w or s///e flags (seed 000's validate_sed)."""
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
    if any(a.startswith("--compress-program") for a in argv):
        return Effect(DFA, note="sort --compress-program runs a program")
    pos = _positionals(argv, opts)
    outs = [i + 1 for i, a in enumerate(argv[1:], 1) if a in ("-o", "--output") and i + 1 < len(argv)]
    extra = [a.split("=", 1)[1] for a in argv if a.startswith("--output=")]
    extra += [a[2:] for a in argv[1:] if a.startswith("-o") and len(a) > 2 and not a.startswith("--")]
    if outs or extra:
        return Effect(WW, reads=pos, writes=outs, extra_writes=extra)
    return Effect(RO, reads=pos)


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


def _find(argv: tuple[str, ...]) -> Effect:
    starts: list[int] = []
    i = 1
    while (i < len(argv) and argv[i] in ("-H", "-L", "-P")) or (i < len(argv) and argv[i].startswith("-D")):
        i += 2 if argv[i] == "-D" else 1
    while i < len(argv) and not argv[i].startswith(("-", "(", "!", ")")) and argv[i] != ",":
        starts.append(i)
        i += 1
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
            return Effect(req, extra_reads=extra_reads, extra_writes=extra_writes, writes=writes, note=note)
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
    )


def _git(argv: tuple[str, ...]) -> Effect:
    i = 1
    repo_dir = "."
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        key = a.split("=", 1)[0]
        if key in GIT_BAD_GLOBAL or a.startswith("-c"):
            return Effect(DFA, note=f"git {key} can change configuration or run programs")
        if a == "-C" and i + 1 < len(argv):
            repo_dir = argv[i + 1] if repo_dir == "." else repo_dir.rstrip("/") + "/" + argv[i + 1]
            i += 2
            continue
        i += 1
    if i >= len(argv):
        return Effect(RO)
    sub = argv[i]
    args = argv[i + 1 :]
    for a in args:
        if a == "--":
            break
        if a.split("=", 1)[0] in GIT_BAD_OPTS or (a.startswith("-O") and sub == "grep"):
            return Effect(DFA, note=f"git {sub} {a.split('=', 1)[0]} writes files or runs programs")
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
        ro = any(
            f in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch") for f in flags
        ) and not any(
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
    if not ro and sub == "config":
        # a config write can set core.hooksPath, core.fsmonitor, aliases ...: it writes a protected file
        target = "~/.gitconfig" if "--global" in flags else "/etc/gitconfig" if "--system" in flags else (
            repo_dir.rstrip("/") + "/.git/config")
        files = [a.split("=", 1)[1] for a in args if a.startswith("--file=")]
        files += [args[j + 1] for j, a in enumerate(args[:-1]) if a in ("-f", "--file")]
        return Effect(DFA, extra_writes=files or [target], note=f"git {sub} changes configuration")
    if not ro:
        return Effect(DFA, note=f"git {sub} is not a read-only git command")
    return Effect(RO, git_config_check=repo_dir)


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


def git_config_is_inert(config: bytes) -> bool:
    """Whether a repository config can run code in read-only git commands (fsmonitor, pager, textconv ...).

    Conservative: any include, filter, pager, diff/merge driver section, or a code-running key fails.
    """
    for m in _GIT_CONFIG_SECTION.finditer(config):
        section = m.group(1).lower().split(b".", 1)[0]
        if section in _GIT_DANGEROUS_SECTIONS:
            return False
    return all(m.group(1).lower() not in _GIT_DANGEROUS_KEYS for m in _GIT_CONFIG_KEY.finditer(config))
