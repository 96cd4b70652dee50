"""The agent's fast path: an allowed shell call becomes ``/bin/sh SCRIPT SINCE 'command' BACK`` (inside
``carry_out``'s text).

The daemon that decided the call already knows the whole plan, so it writes it out as a POSIX ``sh``
script and hands the agent a command that runs it: no Python interpreter, no second round trip, no
fallback to another policy. The script (content-addressed, under ``<state>/sandbox/<ws>/run/``) does:

1. *Stale check*: the protected paths that were missing when the call was decided (and would be
   scrubbed after it) must still be missing; otherwise the plan no longer describes the workspace and
   the command is refused (exit 126, one line).
2. Runs the plan's argv (bubblewrap directly, the seccomp filter on descriptor 3 from ``3<FILE``) as a
   child, forwarding INT, TERM and HUP to it, and keeps its exit code.
3. *Epilogue*: detects whether the command planted anything, with shell built-ins (``[ -e P ]`` for the
   missing top-level names) and one ``find`` over the writable roots that prints the first protected
   name (``.git/hooks``, ``.claude``, ``.envrc``, ...: the nested search's own catalogue) whose inode
   changed (ctime) after the decision. A command cannot set a ctime (only the kernel does, to the
   current time; the sandbox holds no capability to change the clock), so creating, renaming or
   hard-linking a protected name is always seen. Only then (or when ``find`` fails) does it start
   ``python -I -m nexusd.sandbox.scrub PLAN.json``, which removes exactly what was not there before
   (the same symlink-proof scrub as ``nexusctl run``).

4. *Tap*: when the call's stderr is not a terminal, the command writes it into a per-call FIFO that
   ``tee`` passes on unchanged while ``cut | awk`` keep the first refusal-looking lines; when some were
   kept, the Python scrub module reports them (``violations``) to the deciding daemon.
5. *Carry*: the inner shell records its final ``pwd -P``; the wrapper validates it (one absolute line, the
   same directory outside) and writes it into the agent's per-call file, from which the agent's text
   (``carry_out``) ``cd``s its own shell there.

The script runs outside the sandbox in the agent's environment: every word is single-quoted, every
program is named by its absolute path, nothing from the workspace is executed, and the functions a
hostile environment could define over the built-ins it uses are unset first.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from nexusd.atomicfile import write_atomic
from nexusd.core.classify.paths import PROTECTED_DIR_NAMES, PROTECTED_FILE_NAMES
from nexusd.protocol import SandboxPlanReply
from nexusd.sandbox.nested import GIT_PARTS, MAX_DEPTH, SKIP_DIRS
from nexusd.sandbox.netjoin import GO_FD, INFO_FD
from nexusd.sandbox.seccomp import split_filter

EXIT_REFUSED = 126
SCRUB_MODULE = "nexusd.sandbox.scrub"
PREVIEW_MODULE = "nexusd.sandbox.previewrun"
RUN_DIR = "run"
KEEP_RUN_FILES = 512  # per workspace; past this, files unused for a week are removed
STALE_AFTER_S = 7 * 24 * 3600
PER_CALL_STALE_S = 3600.0  # a call's own files (the cd and tap ones) are used within seconds of the decision
CLEAN_EVERY = 64  # calls of a workspace between two looks at its run directory
# ctime is compared with the decision time minus this margin: file-system timestamps come from a coarse
# clock that may lag the daemon's by a tick (<= 10 ms). A wider margin only sends more calls to the scrub.
SINCE_MARGIN_S = 0.05


def q(word: str) -> str:
    return shlex.quote(word)


def refusal_command(reason: str) -> str:
    """One clear line on stderr and exit 126: the command does not run."""
    line = f"nexus: refused to run the command: {reason}"
    return f'/bin/sh -c \'printf "%s\\n" "$0" >&2; exit {EXIT_REFUSED}\' {q(line)}'


@functools.lru_cache(maxsize=1)
def _env_default_signal() -> str | None:
    """GNU ``env --default-signal`` (coreutils >= 8.31): a background job of a non-interactive ``sh`` has
    SIGINT and SIGQUIT ignored, and a sandboxed command must still be interruptible."""
    env = shutil.which("env", path="/usr/bin:/bin")
    if env is None:
        return None
    try:
        ok = subprocess.run([env, "--default-signal=INT,QUIT", "true"], capture_output=True, timeout=5).returncode
    except (OSError, subprocess.SubprocessError):
        return None
    return env if ok == 0 else None


@functools.lru_cache(maxsize=1)
def _find() -> str | None:
    """GNU find (``-newerct @T``); absent, every call ends in the Python scrub (slower, never weaker)."""
    f = shutil.which("find", path="/usr/bin:/bin")
    if f is None:
        return None
    try:
        out = subprocess.run([f, "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return f if "GNU findutils" in out else None


@functools.lru_cache(maxsize=8)
def _tool(name: str) -> str | None:
    return shutil.which(name, path="/usr/bin:/bin")


@functools.lru_cache(maxsize=1)
def _tap_tools() -> tuple[str, str, str] | None:
    """GNU ``tee`` (``-p``: an output that goes away is dropped, never a SIGPIPE to the command), ``cut``
    and ``awk`` by absolute path; None: the wrapper does not tap the error output."""
    found = [_tool(n) for n in ("tee", "cut", "awk")]
    if any(f is None for f in found):
        return None
    try:
        out = subprocess.run([str(found[1]), "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if "GNU coreutils" not in out:
        return None
    tee, cut, awk = (str(f) for f in found)
    return tee, cut, awk


# File systems whose timestamps come from this kernel's clock. On others (NFS, SMB, FUSE ...) the server
# may set ctime from its own clock, which the decision time cannot be compared with: the Python scrub
# always runs there.
LOCAL_CLOCK_FS = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "tmpfs",
        "f2fs",
        "zfs",
        "overlay",
        "jfs",
        "reiserfs",
        "bcachefs",
        "apfs",
        "hfs",
    }
)


_dev_fs: dict[int, str] = {}


def _read_mountinfo() -> None:
    """device number -> file-system type, from /proc/self/mountinfo ("... MAJ:MIN ... - TYPE SOURCE ...")."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 3 and rest and ":" in fields[2]:
                    major, minor = fields[2].split(":", 1)
                    _dev_fs[os.makedev(int(major), int(minor))] = rest[0]
    except (OSError, ValueError):
        pass


def local_clock(paths: list[str]) -> bool:
    """Whether every path lies on a file system whose ctimes the kernel sets from its own clock. One
    ``stat`` per path; the mount table is read again only for a device not seen before (a new mount)."""
    for p in paths:
        try:
            dev = os.stat(p).st_dev
        except OSError:
            return False
        if dev not in _dev_fs:
            _read_mountinfo()
        if _dev_fs.get(dev) not in LOCAL_CLOCK_FS:
            return False
    return True


@functools.lru_cache(maxsize=1)
def _find_files0() -> bool:
    """Whether GNU find takes its starting points from a file (``-files0-from``, findutils >= 4.9)."""
    f = _find()
    if f is None:
        return False
    try:
        argv = [f, "-P", "-files0-from", "/dev/null", "-maxdepth", "0"]
        return subprocess.run(argv, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=2)
def _find_expr_text(known: bool = False) -> str:
    return " ".join('"@$1"' if w == "@SINCE" else q(w) for w in find_planted_expr(known=known))


def find_planted_expr(*, known: bool = False) -> list[str]:
    """The ``find`` expression (after the roots and before ``-newerct``) matching the protected names the
    nested search knows (``nexusd.sandbox.nested``), and pruning what it skips.

    ``known``: the starting points are every directory the plan's walk listed (``known_dirs_file``), and a
    directory whose inode did not change after the decision is not entered: nothing was added, removed or
    renamed in it, and each directory below it that did change is a starting point of its own. So a call
    costs one ``stat`` per known directory plus a listing of the ones that changed, instead of a listing
    of the whole tree (33-50 ms for a checkout of 10,000 entries on the loaded test machine)."""
    names = sorted((PROTECTED_DIR_NAMES | PROTECTED_FILE_NAMES) - {".git"})
    protected: list[str] = ["(", "-name", ".git", "!", "-type", "d"]
    for part in GIT_PARTS:
        protected += ["-o", "-path", f"*/.git/{part}"]
    for n in names:
        protected += ["-o", "-name", n]
    protected.append(")")
    prune: list[str] = ["(", "-path", "*/.git/*"]
    for n in sorted((SKIP_DIRS | PROTECTED_DIR_NAMES) - {".git"}):
        prune += ["-o", "-name", n]
    prune += [")", "-prune", "-o"]
    # known: a directory unchanged since the decision is pruned first, before ~130 name tests: none of its
    # entries is new, and it is not new itself (the protected test below wants a newer ctime too), so the
    # answer is the same, at one ctime comparison per known directory
    first = ["(", "-type", "d", "!", "-newerct", "@SINCE", ")", "-prune", "-o"] if known else []
    # planted and fresh: print it and stop; otherwise prune what the nested search does not enter
    return [*first, "(", *protected, "-newerct", "@SINCE", "-print", "-quit", ")", "-o", *prune, "-false"]


def failure_note(plan: SandboxPlanReply, escape_hint: str) -> tuple[str, str]:
    """What the agent reads after a sandboxed command failed, around its exit status: what the sandbox
    contains, and how to ask (in the agent's own terms) to run it outside when that is why it failed."""
    net = {
        "open": "the network is the host's",
        "filtered": "the network reaches only allowed domains (others are asked or refused)",
    }.get(plan.network, "there is no network")
    socks = "host Unix sockets are closed" if plan.unix_sockets == "closed" else "host Unix sockets are reachable"
    pre = "nexus: this command ran in nexusd's sandbox and exited with status "
    post = (
        f". Inside, only the workspace (and allow_write) is writable, other paths are read-only, credentials "
        f"and .env files read as empty, {net}, {socks}. If it failed because of that (Read-only file system, "
        "Permission denied, Operation not permitted, a name that does not resolve, a refused connection), "
        f"{escape_hint}; otherwise the failure is the command's own."
    )
    return pre, post


# The inner shell's text (``SHELL -c CARRY SHELL COMMAND``): the command runs through ``eval`` as Claude
# Code's own shell runs it, with descriptor 8 closed around it, then its final directory (``pwd -P``) goes
# to descriptor 8, which the wrapper opened on a per-call file outside. ``$0`` is the shell's own path, the
# positional parameters are empty, and the one helper variable is unset before the command's first word,
# so the command sees what ``SHELL -c COMMAND`` would show it. Nothing is recorded after ``exit`` or
# ``exec`` (the directory stays, as when an agent's own shell exits).
CARRY = (
    '__nexus_c=$1; shift; { eval "unset -v __nexus_c; $__nexus_c"; } 8>&-; __nexus_r=$?; '
    '{ pwd -P >&8; } 2>/dev/null; exit "$__nexus_r"'
)
MAX_CARRY = 4096  # a longer final directory is not carried (PATH_MAX)

# A superset of ``violations._REFUSED`` (awk has no \b): the first 20 distinct lines, each cut to 1,000
# bytes before awk sees it (``cut`` streams, so a giant line costs no memory); ``violations.scan`` decides.
# (the file named by NX_TAP_OUT is made by awk's first print, so a run that nothing refused makes no file:
# a new file costs up to ~0.9 ms of kernel time in some directories, on every wrapped call)
TAP_AWK = (
    "{ l = tolower($0) } "
    "n < 20 && l ~ /read-only file system|erofs|operation not permitted|eperm|permission denied|eacces/ "
    '&& !($0 in s) { s[$0] = 1; print > (ENVIRON["NX_TAP_OUT"]); n++ }'
)
TAP_LINE_BYTES = 1000


def _carry_case(argv: list[str]) -> str:
    """A ``case`` on ``$nx_d`` that clears ``nx_ok`` for a directory that is not the same directory inside
    and outside the sandbox: under a private mount (the fresh ``/tmp``, ``/dev``, ``/proc``, a masked
    directory's tmpfs) or a bind whose source is elsewhere (the sandbox HOME's files). The most specific
    mount decides, as in the plan (``bwrap.plan_mounts``). Carrying such a path would put the agent's
    shell in an unrelated directory of the host (``mkdir /tmp/x && cd /tmp/x``: another user's /tmp/x)."""
    private: dict[str, bool] = {"/tmp": True, "/dev": True, "/proc": True}  # every backend but Seatbelt
    opts = argv[: argv.index("--")] if "--" in argv else []
    sandbox_own: list[str] = []
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("--tmpfs", "--dev", "--proc", "--mqueue", "--dir", "--remount-ro") and i + 1 < len(opts):
            if o != "--remount-ro":
                private[os.path.normpath(opts[i + 1])] = True
            i += 2
        elif o == "--setenv" and i + 2 < len(opts):
            if opts[i + 1] in ("HOME", "TMPDIR") and os.path.isabs(opts[i + 2]):
                sandbox_own.append(os.path.normpath(opts[i + 2]))  # the sandbox's own, not the user's
            i += 3
        elif o in ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--symlink") and i + 2 < len(
            opts
        ):
            src, dst = os.path.normpath(opts[i + 1]), os.path.normpath(opts[i + 2])
            private[dst] = o == "--symlink" or src != dst
            i += 3
        else:
            i += 1
    for path in sandbox_own:
        private[path] = True
    arms = []
    for path in sorted(private, key=len, reverse=True):
        if path == "/":
            continue  # the default arm below
        value = "" if private[path] else "1"
        pats = f"{q(path)}|{q(path)}/*"
        arms.append(f"  {pats}) nx_ok={value} ;;")
    return "\n".join(["case $nx_d in", *arms, "  /*) nx_ok=1 ;;", "  *) nx_ok= ;;", "esac"])


def _script(
    plan: SandboxPlanReply,
    scrub_file: str,
    shell_index: int,
    run_dir: str,
    socket: str | None = None,
    escape_hint: str | None = None,
    known: str | None = None,
    preview: dict[str, object] | None = None,
) -> str:
    """The sh text; ``$1``: files whose inode changed after this time (epoch seconds) may be planted;
    ``$2``: the command; ``$3``: the per-call file (``RUN_DIR/cd.*``, opened by the agent's text) that receives
    the directory the command ended in, if it moved, or "". A filtered network's bubblewrap reports to
    and waits on the call's FIFOs ``net.TAG.info`` and ``net.TAG.go`` (made with the plan, served by the
    daemon: ``nexusd.sandbox.netjoin``); without them the command has no network. Descriptor 7 (the agent's
    text holds that file on it) is closed for every program started here. ``known``: the file listing the
    writable roots' directories at the decision (``known_dirs_file``)."""
    filt, argv = split_filter(plan.argv)
    words = [q(a) for a in argv]
    words[shell_index] = f'{q(CARRY)} {q(argv[shell_index - 2])} "$2"'
    run = " ".join(words)
    filtered = ports_planned(plan)
    if preview is not None:  # on an overlay, and a person applies or discards (nexusd.sandbox.previewrun)
        spec = json.dumps(preview, sort_keys=True)
        run = f"{q(sys.executable)} -I -m {PREVIEW_MODULE} {q(spec)} -- {run}"
    if filt is not None:
        run += f" 3<{q(filt)}"
    if filtered:  # RDWR: opening the report FIFO never waits; the go FIFO's EOF (no daemon) runs it unconnected
        run += f' {INFO_FD}<>"$nx_ni" {GO_FD}<"$nx_ng"'
    run += ' 8>"$nx_cwd" 7>&-'
    env = _env_default_signal()
    tap = _tap_tools() if plan.backend in ("bwrap", "unshare") else None  # both end every process at exit
    rm = _tool("rm") or "/bin/rm"
    lines = [
        "# nexusd sandbox wrapper, written by the daemon that decided the call. It runs outside the",
        "# sandbox: every word is quoted, every program absolute. $1: decision time - 50 ms, $2: the command.",
        "unset -f kill wait printf command test false read cd trap exit '[' 2>/dev/null",
    ]
    # per-call files in the run directory (0700, masked inside every sandbox), all named after the agent's
    # per-call file (only a name the daemon drew in this run directory: cd.TAG): in.TAG, the inner shell's
    # final directory; tap.TAG, the tap's FIFO (made by the daemon: no mkfifo per call) and tap.TAG.out;
    # net.TAG.info and net.TAG.go, a filtered network's FIFOs (made with the plan, held by the daemon)
    base = q(run_dir.rstrip("/") + "/")
    lines += [
        "nx_cwd=; nx_fifo=; nx_out=; nx_tap=; nx_net=",
        f"case ${{3-}} in {base}cd.*/*|*/../*) nx_back= ;; {base}cd.*) nx_back=$3 ;; *) nx_back= ;; esac",
        'if [ -n "$nx_back" ]; then nx_id=${nx_back##*/cd.}; nx_cwd=${nx_back%/cd.*}/in.$nx_id; '
        "nx_fifo=${nx_back%/cd.*}/tap.$nx_id; nx_out=$nx_fifo.out; nx_net=${nx_back%/cd.*}/net.$nx_id; "
        f'else nx_cwd={base}"in.$$"; fi',
    ]
    if filtered:
        no_net = "nexus: no nexusd proxy for this call: the sandboxed command has no network"
        lines += [
            "nx_ni=/dev/null; nx_ng=/dev/null",
            'if [ -n "$nx_net" ] && [ -p "$nx_net.go" ] && ! [ -h "$nx_net.go" ] && [ -p "$nx_net.info" ] '
            '&& ! [ -h "$nx_net.info" ]; then nx_ni=$nx_net.info; nx_ng=$nx_net.go; '
            f"else printf '%s\\n' {q(no_net)} >&2; fi",
        ]
    # a refusal leaves no per-call file behind
    nets = ' "$nx_net.info" "$nx_net.go"' if filtered else ""
    gone_back = f'[ -z "$nx_back" ] || {q(rm)} -f "$nx_back" "$nx_fifo"{nets} 2>/dev/null; '
    if socket:  # the daemon that decided is gone (stopped, not socket-activated): it no longer vouches
        gone = f"nexus: refused to run the command: the daemon that decided it ({socket}) is not running"
        lines += [
            f"if ! [ -S {q(socket)} ]; then",
            f"  {gone_back}printf '%s\\n' {q(gone)} >&2; exit {EXIT_REFUSED}",
            "fi",
        ]
    if plan.scrub:
        exists = " || ".join(f"[ -e {q(p)} ] || [ -h {q(p)} ]" for p in plan.scrub)
        lines += [
            f"if {exists}; then",
            f"  {gone_back}printf '%s\\n' 'nexus: refused to run the command: a protected path appeared in the "
            f"workspace since the call was decided; run it again' >&2; exit {EXIT_REFUSED}",
            "fi",
        ]
    lines.append("cd -P . 2>/dev/null; nx_here=$PWD")
    if tap is not None:
        tee, cut, awk = tap
        # Only when the error output is not a terminal (a terminal stays the command's own): the command
        # writes into a FIFO; tee passes every byte on at once to our stderr and a copy to cut | awk, which
        # keep the first refusal-looking lines. The tap ignores INT, TERM and HUP: it ends when the
        # command's last writer closes (the sandbox's pid namespace ends them all with the command).
        # The FIFO is opened once, both ways (never waits), on descriptor 4, and tee and the command reopen
        # that very FIFO through /dev/fd/4: a name removed meanwhile (a finished run's cleanup of the same
        # text) can no longer leave tee waiting on one FIFO while the command writes a new regular file.
        # Descriptor 4 is closed as soon as the command and the tap have started, so the command's end is
        # tee's. A background command starts first and the tap right after it, while bubblewrap sets up
        # (its three processes were ~1 ms of every call's start): what the command writes meanwhile waits
        # in the FIFO, which descriptor 4 keeps open until tee has opened it.
        tap_start = [
            "  trap '' INT TERM HUP",
            f"  {q(tee)} -p /dev/fd/4 </dev/fd/4 4>&1 >&2 7>&- 9<&- | LC_ALL=C {q(cut)} -b -{TAP_LINE_BYTES} 4>&- 7>&- "
            f"9<&- | NX_TAP_OUT=$nx_out LC_ALL=C {q(awk)} {q(TAP_AWK)} >/dev/null 4>&- 7>&- 2>/dev/null 9<&- &",
            "  nx_tap=$!",
        ]
        lines += [
            'if ! [ -t 2 ] && [ -n "$nx_fifo" ] && [ -p "$nx_fifo" ] && ! [ -h "$nx_fifo" ] && [ -r "$nx_fifo" ] '
            '&& [ -w "$nx_fifo" ] && { exec 4<>"$nx_fifo"; } 2>/dev/null; then',
            # (the name was gone: <> made a regular file, removed at the end)
            "  if [ -p /dev/fd/4 ]; then nx_tap=1; else exec 4>&-; fi",
            "fi",
        ]
        if env is None:  # a foreground command: the tap starts before it
            lines += ['if [ -n "$nx_tap" ]; then', *tap_start, "  trap - INT TERM HUP", "fi"]
    if env is not None:
        # a background job's stdin would be /dev/null: keep ours on 9 (closed stdin: /dev/null)
        job = f"( exec {q(env)} --default-signal=INT,QUIT {run} ) 0<&9 9<&-"
        lines += [
            "{ command exec 9<&0; } 2>/dev/null || command exec 9</dev/null",
            f'if [ -n "$nx_tap" ]; then {job} 2>/dev/fd/4 4>&- & else {job} & fi',
            "pid=$!",
            *(['if [ -n "$nx_tap" ]; then', *tap_start, "fi"] if tap is not None else []),
            "exec 9<&-",
            'if [ -n "$nx_tap" ]; then exec 4>&-; fi',
            """trap 'kill -s INT "$pid" 2>/dev/null' INT""",
            """trap 'kill -s TERM "$pid" 2>/dev/null' TERM""",
            """trap 'kill -s HUP "$pid" 2>/dev/null' HUP""",
            'wait "$pid"; rc=$?',
            'while [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done',
        ]
    else:  # foreground: a signal meant for this shell only waits for the command (the group gets it too)
        lines += [
            "trap : INT TERM HUP",
            f'if [ -n "$nx_tap" ]; then {run} 2>/dev/fd/4 4>&-; else {run}; fi',
            "rc=$?",
            'if [ -n "$nx_tap" ]; then exec 4>&-; fi',
        ]
    lines.append("trap '' INT TERM HUP")
    if tap is not None:
        lines.append('if [ -n "$nx_tap" ]; then wait "$nx_tap"; fi')
    check = " || ".join(f"[ -e {q(p)} ] || [ -h {q(p)} ]" for p in plan.scrub) or "false"
    find = _find()
    roots = [r for r in plan.scrub_below if r]
    # find prunes below any .git: a root inside one is searched by the Python scrub instead
    if roots and find is not None and not any("/.git/" in r + "/" for r in roots) and local_clock(roots):
        walk = (
            f"found=$(LC_ALL=C {q(find)} -P {' '.join(q(r) for r in roots)} -maxdepth {MAX_DEPTH + 2} "
            f"{_find_expr_text()} 2>/dev/null 7>&-)"
        )
        lines.append(f"if {check}; then planted=1")
        if known is not None:
            # Only the known directories that changed are listed. A known directory that is gone (renamed
            # or removed) makes find fail: its new place may not be known, so the whole walk decides.
            lines += [
                f"elif found=$(LC_ALL=C {q(find)} -P -files0-from {q(known)} -maxdepth {MAX_DEPTH + 2} "
                f'{_find_expr_text(True)} 2>/dev/null 7>&-) && [ -z "$found" ]; then planted=',
                f'elif [ -z "$found" ] && {walk} && [ -z "$found" ]; then planted=',
            ]
        else:
            lines.append(f'elif {walk} && [ -z "$found" ]; then planted=')
        lines.append("else planted=1; fi")
    elif roots:
        lines.append("planted=1")
    else:
        lines.append(f"if {check}; then planted=1; else planted=; fi")
    # the Python scrub and report start only when something was planted or refused (the rare case)
    lines += [
        'refused=; if [ -n "$nx_tap" ] && [ -s "$nx_out" ]; then refused=$nx_out; fi',
        'if [ -n "$planted" ] || [ -n "$refused" ]; then',
        f'  {q(sys.executable)} -I -m {SCRUB_MODULE} {q(scrub_file)} "$2" "$refused" "$rc" "$planted" 7>&-',
        "fi",
    ]
    if escape_hint:  # a failure (not a refusal, not a signal): say the sandbox may be why, and the way out
        pre, post = failure_note(plan, escape_hint)
        note = f"""printf '%s%s%s\\n' {q(pre)} "$rc" {q(post)} >&2"""
        lines.append(f'if [ "$rc" -ne 0 ] && [ "$rc" -lt 126 ]; then {note}; fi')
    # the directory the command ended in, for the agent's shell: one line, absolute, at most PATH_MAX, the
    # same directory outside (not a private mount), existing, and not where we are already
    lines += [
        "nx_cd=",
        'if [ -s "$nx_cwd" ] && { IFS= read -r nx_d && ! IFS= read -r nx_x && [ -z "$nx_x" ]; } <"$nx_cwd" '
        f'2>/dev/null && [ "${{#nx_d}}" -le {MAX_CARRY} ]; then',
        _carry_case(argv),
        '  if [ -n "$nx_ok" ] && [ "$nx_d" != "$nx_here" ] && [ -d "$nx_d" ]; then nx_cd=$nx_d; fi',
        "fi",
        """if [ -n "$nx_cd" ] && [ -n "$nx_back" ]; then { printf '%s\\n' "$nx_cd" >"$nx_back"; } 2>/dev/null; fi""",
        # the agent's shell reads the line through the descriptor it holds: the name can go now, in the
        # background (the agent does not wait for a cleanup; no descriptor of its is held by it)
        f'if [ -n "$nx_back" ]; then {q(rm)} -f "$nx_cwd" "$nx_back" "$nx_fifo" "$nx_out" 7>&- </dev/null >/dev/null '
        f'2>&1 & else {q(rm)} -f "$nx_cwd" 7>&- </dev/null >/dev/null 2>&1 & fi',
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def _write(path: Path, data: str) -> bool:
    """Atomic, 0600, only when absent or different (content-addressed files are shared by equal plans).
    Whether it wrote."""
    try:
        if path.read_text(encoding="utf-8", errors="surrogateescape") == data:
            os.utime(path)  # in use: keep it from the clean-up
            return False
    except OSError:
        pass
    # a temporary name of this write's own (the decision pool's threads plan equal calls at once); no fsync:
    # a lost script is made again by the next plan
    write_atomic(path, data, 0o600, durable=False, errors="surrogateescape")
    return True


KEEP_DIRS_FILES = 32  # per workspace: a wrapper whose list is gone walks the whole tree instead


def known_dirs_file(plan: SandboxPlanReply, run_dir: Path) -> str | None:
    """Write the directories the plan's walks listed below its writable roots (``nested.known_dirs``: this
    thread's answers, so call it in the thread that planned, right after) as ``<run>/<hash>.dirs``,
    NUL-separated, for the epilogue's ``find -files0-from``; None when the epilogue must walk the whole tree
    (no such find, a root without a complete list, a file system whose ctimes are not the kernel's). Off
    the daemon's loop: a big tree's list is hundreds of kilobytes."""
    from nexusd.sandbox.nested import MAX_LISTED, known_dirs

    roots = [r for r in plan.scrub_below if r]
    if not roots or not plan.allowed or not _find_files0() or not local_clock(roots):
        return None
    listed: list[str] = []
    for r in roots:
        dirs = known_dirs(r)
        if dirs is None:
            return None
        listed += dirs
    unique = list(dict.fromkeys(listed))
    if len(unique) > MAX_LISTED:  # as a walker would: past this, the list costs more than it saves
        return None
    data = "\0".join(unique) + "\0"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = run_dir / f"{hashlib.sha256(data.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}.dirs"
    if _write(path, data):
        _clean_dirs_files(run_dir)  # (only a new list can make them too many: no listing per call)
    return str(path)


def _clean_dirs_files(run_dir: Path) -> None:
    """Keep the newest ``KEEP_DIRS_FILES`` lists (a growing tree writes a new one per change)."""
    try:
        lists = [e for e in os.scandir(run_dir) if e.name.endswith(".dirs")]
        if len(lists) <= KEEP_DIRS_FILES:
            return
        lists.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    except OSError:
        return
    for e in lists[KEEP_DIRS_FILES:]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)


_calls_since_clean: dict[Path, int] = {}
_clean_lock = threading.Lock()


def _clean(run_dir: Path) -> None:
    """Every ``CLEAN_EVERY`` calls of a workspace: its per-call files (``cd.*``, ``tap.*``: a call decided and
    never run leaves them) older than an hour, and, past ``KEEP_RUN_FILES`` entries, the shared ones (scripts,
    scrub plans, lists) unused for a week. Not on every call: a listing of hundreds of entries per call cost
    ~1.4 ms of every allowed call."""
    with _clean_lock:
        n = _calls_since_clean.get(run_dir, 0)
        _calls_since_clean[run_dir] = (n + 1) % CLEAN_EVERY
        if len(_calls_since_clean) > 1024:
            _calls_since_clean.clear()
    if n:
        return
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return
    now = time.time()
    crowded = len(entries) > KEEP_RUN_FILES
    for e in entries:
        per_call = e.name.startswith(("cd.", "tap.", "net."))
        if not per_call and not crowded:
            continue
        try:
            if e.stat(follow_symlinks=False).st_mtime < now - (PER_CALL_STALE_S if per_call else STALE_AFTER_S):
                if e.name.startswith("net.") and e.name.endswith(".go"):
                    release_go(e.path)
                os.unlink(e.path)
        except OSError:
            pass


def release_stale_fifos(state_dir: Path) -> int:
    """At a daemon's start: every filtered call's FIFO pair left in the run directories (a daemon killed
    between a call's decision and its run) is released and removed, since no daemon serves them any more.
    A wrapper waiting to open one gets end of file and runs its command with no network. How many pairs."""
    n = 0
    for go in (state_dir / "sandbox").glob(f"*/{RUN_DIR}/net.*.go"):
        release_go(str(go))
        for path in (go, go.with_suffix(".info")):
            with contextlib.suppress(OSError):
                os.unlink(path)
        n += 1
    return n


def release_go(path: str) -> None:
    """A filtered call's go FIFO whose daemon is gone: a wrapper waiting to open it (it opened after the
    daemon died) gets end of file, so its bubblewrap runs the command with no network instead of waiting."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:  # ENXIO: nobody waits on it
        return
    os.close(fd)


def agent_command(
    plan: SandboxPlanReply,
    command: str,
    run_dir: Path,
    *,
    now: float | None = None,
    socket: str | None = None,
    escape_hint: str | None = None,
    known: str | None = None,
    session: str | None = None,
    preview: dict[str, object] | None = None,
    tag: str | None = None,
) -> str:
    """The shell text the agent runs instead of ``command``: the plan as a script, or a refusal.
    ``tag``: names this call's files in ``run_dir`` (``cd.TAG``, ``tap.TAG``, ``net.TAG.*``; drawn if None).
    ``escape_hint``: how this agent asks to run a call outside the sandbox (said after a failure).
    ``known``: ``known_dirs_file``'s answer for this plan (None: the epilogue walks the whole tree).
    ``preview``: run it on an overlay and ask a person to apply its changes (``nexusd.sandbox.previewrun``'s
    spec: workspace, parent, socket, provider, session, cwd)."""
    if not plan.allowed or not plan.argv:
        return refusal_command(plan.reason or "no plan")
    if len(plan.argv) < 3 or plan.argv[-2] != "-c" or plan.argv[-1] != command:
        return refusal_command("the sandbox plan does not end in the command")  # never run something else
    shell_index = len(split_filter(plan.argv)[1]) - 1
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _clean(run_dir)
    scrub = json.dumps(
        {
            "scrub": plan.scrub,
            "scrub_below": plan.scrub_below,
            "protected_before": plan.protected_before,
            "socket": socket,
            "session": session,
        },  # socket and session: to report plantings and refusals
        sort_keys=True,
    )
    scrub_file = run_dir / f"{hashlib.sha256(scrub.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}.json"
    _write(scrub_file, scrub)
    text = _script(
        plan,
        str(scrub_file),
        shell_index,
        str(run_dir),
        socket,
        escape_hint,
        known,
        preview,
    )
    script = run_dir / f"{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}.sh"
    _write(script, text)
    since = (time.time() if now is None else now) - SINCE_MARGIN_S
    tag = tag or secrets.token_hex(12)
    back = str(run_dir / f"cd.{tag}")  # this call's: where the final directory comes back
    if _tap_tools() is not None and plan.backend in ("bwrap", "unshare"):
        # the tap's FIFO, made here (microseconds) rather than by an mkfifo per call; when it cannot be made,
        # this call is not tapped (its refusals go unrecorded, nothing else changes)
        with contextlib.suppress(OSError):
            os.mkfifo(run_dir / f"tap.{tag}", 0o600)
    return carry_out(f"/bin/sh {q(str(script))} {since:.3f} {q(command)} {q(back)}", back)


def ports_planned(plan: SandboxPlanReply) -> bool:
    """Whether the plan's bubblewrap waits for the daemon to make a filtered network's proxy ports."""
    return plan.backend == "bwrap" and plan.network == "filtered"


def port_fifos(run_dir: Path, tag: str) -> tuple[str, str] | None:
    """A filtered call's two FIFOs, ``net.TAG.info`` and ``net.TAG.go`` (0600, in the private run directory):
    bubblewrap reports its first process on one and waits on the other until the daemon has made the ports
    (``nexusd.sandbox.netjoin``). None when they cannot be made: the call then runs with no network."""
    info, go = run_dir / f"net.{tag}.info", run_dir / f"net.{tag}.go"
    try:
        os.mkfifo(info, 0o600)
        os.mkfifo(go, 0o600)
    except OSError:
        for path in (info, go):
            with contextlib.suppress(OSError):
                os.unlink(path)
        return None
    return str(info), str(go)


def carry_out(wrapper: str, back: str) -> str:
    """The agent's text around the wrapper call. It holds ``back`` (a per-call file in the run directory)
    open on descriptor 7 while the wrapper runs; the wrapper writes there the directory the sandboxed
    command ended in (validated: absolute, one line, the same directory outside) and removes the name;
    the agent's shell reads the line through its descriptor, ``cd``s there (never ``eval``: the value is
    one double-quoted word after ``--``) and ends with the wrapper's exit status, so a shell that tracks
    its directory after the call (Claude Code's ``pwd -P``) follows the command's ``cd``, as it would
    unsandboxed. No command substitution (Gemini CLI refuses ``$(`` in a shell command); valid in sh,
    bash and zsh; ``builtin`` first so that a ``cd`` function (zoxide ...) is not run, then plain ``cd``
    where there is no ``builtin`` (dash). The status comes back through a function's ``return``, not a
    subshell's ``(exit N)``: that forked, ~0.75 ms of every call in bash."""
    return (
        f"{{ {wrapper} ; __nexus_rc=$?; IFS= read -r __nexus_cd <&7 || __nexus_cd=; }} 7<>{q(back)}; "
        '[ -z "$__nexus_cd" ] || builtin cd -P -- "$__nexus_cd" 2>/dev/null || cd -P -- "$__nexus_cd" 2>/dev/null '
        '|| :; __nexus_exit() { return "$1"; }; __nexus_exit "$__nexus_rc"'
    )


def wrapper_words(text: str) -> list[str] | None:
    """The ``/bin/sh SCRIPT SINCE COMMAND BACK`` words inside an agent's text (None: not ours)."""
    words = shlex.split(text)
    if len(words) < 8 or words[:2] != ["{", "/bin/sh"] or words[6:8] != [";", "__nexus_rc=$?;"]:
        return None
    return words[1:6]
