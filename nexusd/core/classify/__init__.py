"""Input classification: what a tool call really does, for the policy engine.

``classify(call, ctx, fs)`` is pure (file-system facts come through ``fs``) and never raises: an
internal error becomes ``Flag.UNPARSEABLE`` with danger-full-access.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Set
from typing import Any

import msgspec

from nexusd.core.classify import bash, commands, paths, text, urls
from nexusd.core.model import Classification, Command, Context, FileSystem, Flag, Redirect, Requirement, ToolKind
from nexusd.core.tools import (
    PLAN_APPROVAL,
    READ_REDIRECTS,
    WRITE_REDIRECTS,
    ToolInfo,
    extract,
    mcp_paths,
    patch_paths,
    tool_info,
)
from nexusd.protocol import PATH_MAX, CallDetails, CallInfo

__all__ = ["classify", "details", "domain_matches", "escape_for_display"]

domain_matches = urls.domain_matches
escape_for_display = text.escape_for_display

MAX_READ_SIZE = 10 * 1024 * 1024
MAX_WRITE_SIZE = 10 * 1024 * 1024
BINARY_PROBE = 8192
MAX_GLOB_MATCHES = 256
MAX_HOSTS = 4096  # hosts an MCP input's scan stops at (a shell command's words are bounded by the parser)
MAX_CWDS = 8  # directories a relative path may be resolved against after cd's the parser cannot order
_GIT_CONFIG_LIMIT = 64 * 1024

RO, WW, DFA = Requirement.READ_ONLY, Requirement.WORKSPACE_WRITE, Requirement.DANGER_FULL_ACCESS
_UNKNOWABLE = frozenset({Flag.UNPARSEABLE, Flag.DYNAMIC})  # what a command does is known only at run time
_UNKNOWABLE_CALL = _UNKNOWABLE | {Flag.UNKNOWN_TOOL}


_PROCESS_SUBSTITUTION = bash.PROCESS_SUBSTITUTION
_JSON_TOOL = commands.JSON_TOOL


class _Acc:
    """Accumulates a classification's findings in the order they are found."""

    def __init__(self, ctx: Context, fs: FileSystem) -> None:
        self.ctx, self.fs = ctx, fs
        self.requirement = RO
        self.flags: set[Flag] = set()
        self.notes: list[str] = []
        self._note_set: set[str] = set()  # the notes again, for the duplicate test (a list scan was quadratic)
        self.reads: list[str] = []
        self.writes: list[str] = []
        # the same paths as sets: a membership test of the list per path was quadratic (5,000 redirects)
        self._read_set: set[str] = set()
        self._write_set: set[str] = set()
        # symlinks created earlier in this command: link path -> its target ("" when the target is unknown)
        self.links: dict[str, str] = {}
        self.recursive: list[str] = []  # directories read with everything below them (grep -r, rg, find)
        self.hosts: list[str] = []  # network hosts the call names (normalised), for refusals in every mode
        self._host_set: set[str] = set()

    def need(self, req: Requirement) -> None:
        if req > self.requirement:
            self.requirement = req

    def add_read(self, path: str) -> None:
        if path not in self._read_set:
            self._read_set.add(path)
            self.reads.append(path)

    def add_write(self, path: str) -> None:
        if path not in self._write_set:
            self._write_set.add(path)
            self.writes.append(path)

    def flag(self, flag: Flag, note: str) -> None:
        self.flags.add(flag)
        if note not in self._note_set:
            self._note_set.add(note)
            self.notes.append(note)

    def note(self, note: str) -> None:
        if note and note not in self._note_set:
            self._note_set.add(note)
            self.notes.append(note)

    def path(
        self, raw: str, cwd: str | None, write: bool, dynamic: bool = False, expand: bool = True
    ) -> paths.PathInfo | None:
        """Resolve and check one path read or written; raise requirements and flags as needed."""
        verb = "writes" if write else "reads"
        if raw == _PROCESS_SUBSTITUTION and not write:
            return None  # <(cmd): a pipe from a command walked on its own, no file
        if expand and not dynamic and cwd is not None and len(raw) < PATH_MAX:
            self._glob(raw, cwd, write)
        if dynamic and paths.expand_user(raw, self.ctx.home) is not None:
            dynamic = False  # $HOME/... is known
        if dynamic or cwd is None:
            why = "depends on a variable" if dynamic else "is relative to a directory changed at run time"
            # either way no rule, mode or protected-name check can see where it lands: a person decides
            self.flag(Flag.DYNAMIC, f"{verb} a path that {why}: {raw}")
            self.need(DFA)
            return None
        if self.links and self._through_link(raw, cwd, write):
            return None
        info = paths.resolve(raw, cwd, self.ctx, self.fs)
        if info.unresolved:
            # ~user/... (or a literal $ we cannot expand): where it lands is unknown, so no rule or mode
            # may allow it (a Bash allow rule only checks the paths it can see)
            shown = raw if len(raw) <= 200 else f"{raw[:200]}... ({len(raw)} characters)"
            self.flag(Flag.DYNAMIC, f"{verb} a path we cannot resolve: {shown}")
            self.need(DFA)
            if write:
                self.flag(Flag.OUTSIDE_WORKSPACE, f"writes outside the workspace: {shown}")
            return info
        if write:
            self.add_write(info.path)
        else:
            self.add_read(info.path)
            self.secret(info.path, raw)
        if info.symlink_escape:
            self.flag(Flag.SYMLINK_ESCAPE, f"{raw} is a symlink that leads outside the workspace: {info.path}")
        if not info.inside:
            self.flag(Flag.OUTSIDE_WORKSPACE, f"{verb} outside the workspace: {info.path}")
        if write:
            self.need(WW)
            if (
                info.path.startswith("/dev/")
                and info.path not in commands.SAFE_DEVICES
                and not info.path.startswith(("/dev/fd/", "/dev/pts/"))
            ):
                self.flag(Flag.CATASTROPHIC, f"writes to a device: {info.path}")
            if not info.inside or info.symlink_escape:
                self.need(DFA)
            if info.protected:
                self.flag(Flag.PROTECTED_PATH, f"writes to a protected path: {info.path}")
                self.need(DFA)
            if paths.touches_audit(info.path, self.ctx):
                self.flag(Flag.AUDIT_TRAIL, f"writes nexusd's audit trail: {info.path}")
        return info

    def host(self, host: str) -> None:
        """A network host the call names: a metadata or link-local one is refused in every mode."""
        if host in self._host_set:
            return
        self._host_set.add(host)
        self.hosts.append(host)
        if urls.metadata_host(host):
            self.flag(Flag.METADATA_ADDRESS, f"reaches a cloud metadata or link-local address: {host}")

    def words(self, words: Iterable[str]) -> None:
        """The hosts shell words may name (``urls.hosts_in_word``); words that cannot name one are skipped."""
        for w in words:
            if "." in w or ":" in w or w.isdigit() or w[:2].lower() == "0x" or w.lower() in urls.METADATA_NAMES:
                for h in urls.hosts_in_word(w):
                    self.host(h)

    def secret(self, path: str, raw: str) -> None:
        """A read of what the sandbox hides (``nexusd.core.protected``): no mode allows it by itself."""
        why = paths.secret_read(path, raw, self.ctx)
        if why is not None:
            self.flag(Flag.SECRET_READ, f"reads {why}")

    def secrets_below(self, directory: str) -> None:
        """A recursive read (``Grep``, ``grep -r``, ``rg``) of ``directory`` reads the workspace's secret files
        below it, as far as a bounded look finds them (three levels, the decision's glob budget; dot-directories
        are skipped as bash's globs skip them). Credential locations below it are ``_recursive_read``'s."""
        glob = getattr(self.fs, "glob", None)
        if glob is None or not directory:
            return
        # the workspace's .env files are what the sandbox masks: look in the workspace part of the read only
        # (``grep -r x /`` reads the workspace too; /proc and /usr hold no .env of the project's)
        starts = (
            [directory]
            if paths.inside_workspace(directory, self.ctx)
            else [r for r in self.ctx.workspace_roots if paths.within(r, directory)]
        )
        for start in starts:
            for pattern in (".env*", "*/.env*", "*/*/.env*"):
                found = glob(paths.join(start, pattern), MAX_GLOB_MATCHES)
                for match in found or ():
                    if paths.is_secret_file_name(match.rsplit("/", 1)[-1]):
                        self.path(match, "/", write=False, expand=False)

    def _through_link(self, raw: str, cwd: str, write: bool) -> bool:
        """A path under a symlink this command created earlier (``ln -s ~/.ssh k; cat k/id_rsa``) is checked
        as the target it will reach; an unknown target makes it unresolvable. True when it was handled."""
        expanded = paths.expand_user(raw, self.ctx.home)
        if expanded is None:
            return False
        lexical = posixpath.normpath(posixpath.join(cwd, expanded))
        for link, target in self.links.items():
            if lexical == link or lexical.startswith(link + "/"):
                if not target:
                    self.flag(
                        Flag.DYNAMIC,
                        f"{'writes' if write else 'reads'} through a link this command "
                        f"creates, to a place we cannot tell: {raw}",
                    )
                    self.need(DFA)
                    return True
                through = target + lexical[len(link) :]
                if through == lexical:
                    return False
                self.path(through, cwd, write, expand=False)
                return True
        return False

    def link(self, dest_raw: str, target_raw: str, cwds: list[str] | None, dynamic: bool) -> None:
        """Remember ``ln -s TARGET DEST`` for the paths the rest of the command names."""
        for c in cwds or []:
            dest = paths.expand_user(dest_raw, self.ctx.home)
            target = None if dynamic else paths.expand_user(target_raw, self.ctx.home)
            if dest is None:
                continue
            dest_abs = posixpath.normpath(posixpath.join(c, dest))
            # a relative target is relative to the link's directory, as the kernel reads it
            self.links[dest_abs] = (
                "" if target is None else posixpath.normpath(posixpath.join(posixpath.dirname(dest_abs), target))
            )

    def _glob(self, raw: str, cwd: str, write: bool) -> None:
        """``cat .e*`` reads .env: the files a glob matches now are checked too (deny rules see them)."""
        if not paths.has_glob(raw) and not paths.has_glob(self.ctx.home):
            return  # nearly every word: expanding ~ or $HOME can only bring in the home's own glob characters
        expanded = paths.expand_user(raw, self.ctx.home)
        glob = getattr(self.fs, "glob", None)
        if expanded is None or glob is None or not paths.has_glob(expanded):
            return
        pattern = paths.join(cwd, expanded)
        found = glob(pattern, MAX_GLOB_MATCHES)
        if found is None:  # too large to expand here: what it reaches is not known
            self.flag(Flag.DYNAMIC, f"{raw} reaches too many directory entries to check what it matches")
            return
        if len(found) > MAX_GLOB_MATCHES:
            self.flag(Flag.DYNAMIC, f"{raw} matches more than {MAX_GLOB_MATCHES} files")
        for match in found[:MAX_GLOB_MATCHES]:
            self.path(match, cwd, write, expand=False)


def classify(call: CallInfo, ctx: Context, fs: FileSystem) -> Classification:
    """What ``call`` really does. Pure; never raises."""
    try:
        return _classify(call, ctx, fs)
    except Exception as exc:
        info = _safe_info(call)
        return Classification(
            kind=info.kind if info else ToolKind.OTHER,
            tool=info.canonical if info else str(getattr(call, "tool", "?")),
            requirement=DFA,
            flags=frozenset({Flag.UNPARSEABLE}),
            notes=(f"internal error while classifying: {type(exc).__name__}",),
        )


def _safe_info(call: CallInfo) -> ToolInfo | None:
    try:
        return tool_info(call.tool, call.provider)
    except Exception:
        return None


def _scan_text(value: Any, acc: _Acc, depth: int = 0) -> None:
    """NUL and hidden characters anywhere in the input (keys too)."""
    if depth > 32:
        acc.flag(Flag.UNPARSEABLE, "input nests too deeply")
        return
    if isinstance(value, str):
        if value.isascii() and value.isprintable():
            return  # the common case: no NUL, control, bidi or zero-width character can be in it
        if "\x00" in value:
            acc.flag(Flag.UNPARSEABLE, "NUL byte in input")
        hidden = text.hidden_chars(value)
        if hidden:
            acc.flag(Flag.HIDDEN_CHARS, f"hidden characters in input: {', '.join(hidden[:5])}")
    elif isinstance(value, dict):
        if depth < 32:  # a plain string child cannot nest too deeply: checked here without a call
            for k, v in value.items():
                if not (type(k) is str and k.isascii() and k.isprintable()):
                    _scan_text(k, acc, depth + 1)
                if not (type(v) is str and v.isascii() and v.isprintable()):
                    _scan_text(v, acc, depth + 1)
        else:
            for k, v in value.items():
                _scan_text(k, acc, depth + 1)
                _scan_text(v, acc, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _scan_text(v, acc, depth + 1)


def _classify(call: CallInfo, ctx: Context, fs: FileSystem) -> Classification:
    info = tool_info(call.tool, call.provider)  # remembered per spelling
    acc = _Acc(ctx, fs)
    tool, cwd = call.tool, call.cwd
    if not (type(tool) is str and tool.isascii() and tool.isprintable()):  # the scan's own first test, inline
        _scan_text(tool, acc)
    _scan_text(call.input, acc)
    if not (type(cwd) is str and cwd.isascii() and cwd.isprintable()):
        _scan_text(cwd, acc)
    cwd = call.cwd if call.cwd.startswith("/") else ctx.cwd
    if not info.known:
        acc.flag(Flag.UNKNOWN_TOOL, f"unknown tool {call.tool}")
        acc.need(DFA)
        return _finish(info, acc)
    ti = extract(info, call.input)
    for p in ti.problems:
        acc.flag(Flag.UNPARSEABLE, p)
        acc.need(DFA)
    if ti.cwd:
        cwd = ti.cwd if ti.cwd.startswith("/") else posixpath.join(cwd, ti.cwd)
        acc.path(ti.cwd, call.cwd if call.cwd.startswith("/") else ctx.cwd, write=False)
    if info.kind is ToolKind.MCP:
        acc.need(DFA)
        for raw in mcp_paths(call.input):  # a filesystem server: deny rules, protected paths, the boundary
            acc.path(raw, cwd, write=False)
            acc.path(raw, cwd, write=True)
        _mcp_hosts(call.input, acc)  # a fetch-like server: metadata addresses and denied domains
        return _finish(info, acc)
    if info.canonical in ("Bash", "PowerShell"):
        if ti.background:
            acc.flag(Flag.BACKGROUND, "runs in the background")
        if ti.command is None:
            # Codex's shell(["apply_patch", body]) carries no command, only the files it writes
            for raw in ti.writes:
                acc.path(raw, cwd, write=True)
            if ti.writes:
                acc.need(WW)
            if ti.write_bytes > MAX_WRITE_SIZE:
                acc.flag(Flag.LARGE_WRITE, f"writes {ti.write_bytes} bytes (over {MAX_WRITE_SIZE})")
            return _finish(info, acc)
        return _bash(info, ti.command, cwd, acc)
    if info.kind is ToolKind.FETCH:
        acc.need(DFA)
        return _fetch(info, ti.urls, acc)
    if info.kind in (ToolKind.SEARCH, ToolKind.AGENT):
        acc.need(DFA if info.kind is ToolKind.SEARCH else RO)
        return _finish(info, acc)
    if info.canonical in PLAN_APPROVAL:
        acc.need(DFA)  # every mode that asks asks; dontAsk denies
        # leaving plan mode changes the agent's own permission mode: gate management, so no mode (bypass
        # included: it has no plan to approve) and no rule approves it; a person does
        acc.flag(Flag.GATE_CONTROL, "leaving plan mode is the plan's approval: a person decides")
        return _finish(info, acc)
    if info.kind is ToolKind.OTHER or info.canonical in ("BashOutput", "KillShell", "KillBash"):
        acc.need(WW if info.canonical in ("KillShell", "KillBash") else RO)
        return _finish(info, acc)
    for raw in ti.reads:
        pinfo = acc.path(raw, cwd, write=False)
        if pinfo is not None and pinfo.path and info.canonical == "Read":
            _size_checks(pinfo.path, acc, sliced=ti.sliced)
        if info.canonical == "Grep":
            _recursive_read(pinfo, acc)  # a search prints lines of every file below: credentials, .env files
    for raw in ti.writes:
        pinfo = acc.path(raw, cwd, write=True)
        if pinfo is not None and info.canonical in _EDITS_THAT_SHOW:
            acc.secret(pinfo.path, raw)  # the edit tool prints lines of the file it changes
    if ti.writes:
        acc.need(WW)
    written = ti.write_bytes + call.omitted_bytes  # what the client could not even send counts too
    if written > MAX_WRITE_SIZE:
        acc.flag(Flag.LARGE_WRITE, f"writes {written} bytes (over seed 000's limit of {MAX_WRITE_SIZE})")
    return _finish(info, acc)


_EDITS_THAT_SHOW = frozenset({"Edit", "MultiEdit", "NotebookEdit"})


def _network_words(sa: bash.ShellAnalysis, acc: _Acc) -> None:
    """Every host a shell command may connect to, as far as its words say: arguments (curl, wget, nc, ssh,
    git, an interpreter's code), assignments in front of it (``http_proxy=...``), the literal text it reads
    on standard input, and ``/dev/tcp`` redirects."""
    for cmd in sa.commands:
        acc.words(cmd.argv[1:])
        acc.words(v for _, v in cmd.env)
        if cmd.stdin:
            acc.words(cmd.stdin.split())
    acc.words(r.target for r in sa.redirects if r.target)


_HOST_KEYS = frozenset({"url", "urls", "uri", "href", "endpoint", "host", "hostname", "address", "server"})


def _mcp_hosts(value: object, acc: _Acc, key: str = "", depth: int = 0) -> None:
    """An MCP tool's hosts: URLs in any string of its input, and the values of keys that name a host."""
    if depth > 6 or len(acc.hosts) >= MAX_HOSTS:
        return
    if isinstance(value, str):
        if key.lower() in _HOST_KEYS:
            acc.words((value[:4096],))
        elif "://" in value:
            acc.words(m.group(0) for m in urls.URL_RE.finditer(value[:65536]))
    elif isinstance(value, dict):
        for k, v in list(value.items())[:256]:
            _mcp_hosts(v, acc, str(k), depth + 1)
    elif isinstance(value, list | tuple):
        for v in value[:256]:
            _mcp_hosts(v, acc, key, depth + 1)


def _size_checks(path: str, acc: _Acc, *, sliced: bool = False) -> None:
    both = getattr(acc.fs, "size_and_head", None)  # optional: one open answers both (RealFileSystem)
    if both is not None:
        size, head = both(path, BINARY_PROBE)
    else:
        size, head = acc.fs.size(path), acc.fs.head(path, BINARY_PROBE)
    if size is not None and size > MAX_READ_SIZE and not sliced:
        acc.flag(Flag.LARGE_READ, f"reads a large file ({size} bytes): {path}; read it in slices (offset/limit)")
    if head and b"\x00" in head:
        acc.flag(Flag.BINARY_READ, f"reads a binary file: {path}")


def _fetch(info: ToolInfo, raw_urls: tuple[str, ...], acc: _Acc) -> Classification:
    domains: list[str] = []
    first_url = raw_urls[0] if raw_urls else None
    for raw in raw_urls:
        u = urls.parse_url(raw)
        for p in u.problems:
            acc.note(p)
        if u.domain is None or u.scheme not in ("http", "https"):
            acc.flag(Flag.UNPARSEABLE, f"cannot tell where this URL goes: {text.escape_for_display(raw)[:200]}")
        else:
            if u.domain not in domains:
                domains.append(u.domain)
        if u.private:
            acc.flag(Flag.PRIVATE_ADDRESS, f"private, loopback or metadata address: {u.domain or raw}")
        if u.domain is not None:
            acc.host(u.domain)
        acc.words((raw[:4096],))  # spellings the URL parser refuses ([fe80::1%25eth0]) may still connect
    if len(domains) > 1:
        acc.note(f"fetches from several domains: {', '.join(domains)}")
    domain = domains[0] if len(domains) == 1 else None
    return _finish(info, acc, url=first_url, domain=domain)


def _bash(info: ToolInfo, command: str, cwd: str, acc: _Acc) -> Classification:
    sa = bash.parse(command)
    acc.flags |= sa.flags
    for n in sa.notes:
        acc.note(n)
    if not sa.flags.isdisjoint(_UNKNOWABLE):
        acc.need(DFA)
    cwds: list[str] | None = [cwd]
    out: list[Command] = []
    own: list[tuple[int, int]] = []  # the slice of acc.writes each command added (an interpreter's code words too)
    for k, cmd in enumerate(sa.commands):
        before = len(acc.writes)
        eff = commands.effect(cmd)
        if cmd.function_call:
            # a function this command defined: its body's commands are judged on their own
            eff = commands.Effect(RO, note=f"calls the function {cmd.argv[0]} defined in this command")
        elif (
            eff.note
            and eff.note == _JSON_TOOL
            and (_planted_module(cwds, acc, "json") or "json/" in command or "json.py" in command)
        ):  # a json module there now, or one this command may write (mkdir json; echo ... > json/tool.py)
            eff = commands.opaque(cmd.argv)
        # a known program with a hidden effect runs code its words carry (git -c core.sshCommand='...', awk
        # system(...)): deny and ask rules look inside its words as they do for an unknown program
        command_out = cmd.to_command(opaque=not eff.known or bool(eff.hidden), requirement=eff.requirement)
        if cwds is not None and (len(cwds) > 1 or cwds[0] != cwd):
            command_out = _respelled(command_out, cwd, cwds)
        out.append(command_out)
        fed = cmd.stdin_args and cmd.argv and cmd.argv[0] not in commands.PURE
        _command_effect(cmd, eff, cwds, acc, _feed(sa, k, command, cwds, acc) if fed else None)
        if cmd.dynamic_args:
            for indices, write in ((eff.reads, False), (eff.writes, True)):
                for i in indices:
                    if i in cmd.dynamic_args:
                        _maybe_paths(cmd.argv[i], sa, cwds, acc, write)
                        _listed_paths(cmd.argv[i], cwds, acc, write)
        if (
            eff.known
            and cmd.argv[0].endswith("ln")
            and commands.program_name(cmd.argv[0]) == "ln"
            and commands._has_flag(cmd.argv, "s", ("--symbolic",))
        ):
            _remember_links(cmd, eff, cwds, acc)
        if cmd.argv and cmd.argv[0].endswith(_APPLY_PATCH) and cmd.argv[0].rsplit("/", 1)[-1] in _APPLY_PATCH:
            _apply_patch_in_shell(command, cwds, acc)
        if eff.cd is not None:
            cwds = _apply_cd(eff.cd, cwds, acc)
        own.append((before, len(acc.writes)))
    for i, r in enumerate(sa.redirects):
        _redirect(r, i in sa.dynamic_redirects, cwds, acc)
        if i in sa.dynamic_redirects and sa.maybe and r.target and r.op in WRITE_REDIRECTS | READ_REDIRECTS:
            _maybe_paths(r.target, sa, cwds, acc, r.op in WRITE_REDIRECTS)
    _network_words(sa, acc)
    if (acc.writes or sa.redirects) and len(sa.commands) > 1:
        _runs_what_it_writes(sa, own, cwd, acc)
    return _finish(info, acc, commands=tuple(out), redirects=sa.redirects)


_INTERPRETERS = bash.SHELLS | bash.CODE_PROGRAMS | {"make", "source", "."}
_APPLY_PATCH = ("apply_patch", "applypatch")


def _planted_module(cwds: list[str] | None, acc: _Acc, module: str) -> bool:
    """``python -m X`` imports from the cwd first: a module of that name there would run instead."""
    return cwds is None or any(
        acc.fs.lexists(paths.join(c, f"{module}.py")) or acc.fs.lexists(paths.join(c, module)) for c in cwds
    )


def _maybe_paths(raw: str, sa: bash.ShellAnalysis, cwds: list[str] | None, acc: _Acc, write: bool) -> None:
    """A variable word whose values this command assigned (``f=~/.ssh/id_rsa; cat "$f"``): each value is read or
    written too, so a deny rule that covers one denies the call instead of asking (the word stays dynamic)."""
    for k, alts in sa.maybe:
        if k == raw:
            for alt in alts:
                for c in _each_cwd(alt, cwds):
                    acc.path(alt, c, write)
            return


_LIST_SUBSTITUTION = re.compile(r"\$\(\s*(?:cat\s+|<\s*)([A-Za-z0-9_./~@%+,:=-]+)\s*\)")


def _listed_paths(raw: str, cwds: list[str] | None, acc: _Acc, write: bool) -> None:
    """``cat $(cat list.txt)``, ``cat $(<list.txt)``: the names a list in the workspace holds are read or written
    (deny rules see them; the word stays dynamic, since the list may change before it runs)."""
    m = _LIST_SUBSTITUTION.fullmatch(raw)
    if m is None:
        return
    feed = _list_file(m.group(1), None, cwds, acc, set(acc.writes))
    for name in feed.raws if feed.kind == "paths" else ():
        for c in _each_cwd(name, cwds):
            acc.path(name, c, write)


def _respelled(c: Command, cwd: str, cwds: list[str] | None) -> Command:
    """After a ``cd``, the command with its relative operands written from the call's cwd (for deny rules)."""
    views: list[tuple[str, ...]] = []
    for d in cwds or []:
        if d == cwd:
            continue
        # (relpath is slow: it asks the OS for the process's own cwd; d is nearly always below cwd)
        rel = d[len(cwd) + 1 :] if d.startswith(cwd + "/") else posixpath.relpath(d, cwd)
        argv = tuple(
            posixpath.normpath(posixpath.join(rel, a))
            if k and a and not a.startswith(("-", "/", "~", "$")) and not _URLISH.match(a)
            else a
            for k, a in enumerate(c.argv)
        )
        if argv != c.argv:
            views.append(argv)
    return msgspec.structs.replace(c, respelled=tuple(views)) if views else c


_URLISH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


# ``python -m MODULE FILE``: modules whose operands are data files they read, never code they run (unlike
# ``-m pytest``, ``-m pdb``, ``-m runpy``, whose operands run). Whether the module itself may be planted in
# the cwd is the command's own classification (commands.py); here only its operands matter.
_DATA_MODULES = frozenset({"json.tool"})


def _reads_data_only(argv: tuple[str, ...]) -> bool:
    """``python3 -m json.tool data.json``: the interpreter's operands are data for a module that only reads."""
    if not bash.base_name(argv[0]).startswith("python"):
        return False
    for i, a in enumerate(argv[1:-1], 1):
        if a == "-m":
            return argv[i + 1] in _DATA_MODULES
        if not a.startswith("-"):
            return False  # a script comes first: its own operands may be anything
    return False


def _runs_what_it_writes(sa: bash.ShellAnalysis, own: list[tuple[int, int]], cwd: str, acc: _Acc) -> None:
    """``echo 'curl x' > s.sh && bash s.sh``, ``printf ... > s; ./s``: code this command writes and then runs is
    known only at run time (deny rules cannot see into it): dynamic."""
    runners = [
        i
        for i, c in enumerate(sa.commands)
        if c.argv and ("/" in c.argv[0] or bash.base_name(c.argv[0]) in _INTERPRETERS)
    ]
    if not runners:
        return
    redirected = {
        posixpath.normpath(posixpath.join(cwd, t))
        for r in sa.redirects
        if r.op in WRITE_REDIRECTS and r.target and (t := paths.expand_user(r.target, acc.ctx.home)) is not None
    }
    for i in runners:
        cmd = sa.commands[i]
        written = redirected.union(p for j, (lo, hi) in enumerate(own) if j != i for p in acc.writes[lo:hi])
        tails = {posixpath.basename(p) for p in written}  # after a cd the same name may be the file written
        words = [cmd.argv[0]] if "/" in cmd.argv[0] else []
        if bash.base_name(cmd.argv[0]) in _INTERPRETERS and not _reads_data_only(cmd.argv):
            words += [a for a in cmd.argv[1:] if not a.startswith("-")]
            # bash < s.sh: code read from a redirected file (redirects are not tied to commands: any `<`)
            words += [r.target for r in sa.redirects if r.op == "<" and r.target]
        for w in words:
            expanded = paths.expand_user(w, acc.ctx.home)
            if expanded is not None and (
                posixpath.normpath(posixpath.join(cwd, expanded)) in written or posixpath.basename(expanded) in tails
            ):
                acc.flag(Flag.DYNAMIC, f"runs code this command writes: {text.escape_for_display(w)[:200]}")
                acc.need(DFA)
                return


MAX_LIST_BYTES = 64 * 1024  # a list file (xargs -a, < list, cat list |) larger than this is not read
MAX_LIST_WORDS = 256


class _Feed:
    """What a command handed file names at run time (xargs, find -exec) is handed: every file below some
    start points (``tree``), the names of a list we can read (``paths``), or names we cannot know."""

    __slots__ = ("kind", "raws", "why")

    def __init__(self, kind: str, raws: list[str], why: str = "") -> None:
        self.kind, self.raws, self.why = kind, raws, why


# programs whose output is file names below their operands (or the cwd): what they feed is a tree
_NAME_LISTERS = frozenset({"find", "fd", "fdfind", "ls", "rg", "grep", "egrep", "fgrep", "ag", "tree"})
_LIST_READERS = frozenset({"cat", "head", "tail", "sort", "uniq"})


def _feed(sa: bash.ShellAnalysis, k: int, command: str, cwds: list[str] | None, acc: _Acc) -> _Feed:
    """Where the file names that command ``k`` receives at run time come from."""
    cmd = sa.commands[k]
    if "find" in cmd.wrappers:
        starts = _fed_from(sa, k, command)
        return _Feed("tree", starts or ["."])
    feeder = cmd.feeder
    if not feeder:
        return _Feed("unknown", [], "its arguments arrive at run time")
    opts = _xargs_options(feeder)
    if opts is None:
        return _Feed("unknown", [], "xargs with options we do not read")
    arg_file, delim = opts
    # a list this command itself writes (`echo ~/.ssh/id_rsa > l; xargs -a l cat`) holds what it writes then
    written = set(acc.writes) | {
        posixpath.normpath(posixpath.join(c, r.target))
        for r in sa.redirects
        if r.op in WRITE_REDIRECTS and r.target
        for c in (cwds or [])
    }
    if arg_file is not None:
        return _list_file(arg_file, delim, cwds, acc, written)
    if cmd.stdin:
        return _split_list(cmd.stdin, delim)
    # the command piped into this one: the last before it with other text (sudo xargs cat records sudo too)
    prev = next((c for c in reversed(sa.commands[:k]) if c.text != cmd.text), None)
    piped = (
        prev is not None
        and prev.text
        and cmd.text
        and re.search(re.escape(prev.text) + r"[ \t]*\|&?[ \t]*" + re.escape(cmd.text), command)
    )
    if piped and prev is not None and prev.argv:
        name = commands.program_name(prev.argv[0])
        if name == "find":
            return _Feed("tree", [prev.argv[i] for i in commands.find_starts(prev.argv)] or ["."])
        if name == "git" and _git_lists_names(prev.argv):
            return _Feed("tree", ["."])
        if name in _NAME_LISTERS and not prev.dynamic_args:
            operands = [a for a in prev.argv[1:] if not a.startswith("-")]
            if name in ("rg", "grep", "egrep", "fgrep", "ag") and operands:
                operands = operands[1:] if not any(a in ("--files", "-e", "-f") for a in prev.argv) else operands
            return _Feed("tree", operands or ["."])
        if name in _LIST_READERS and not prev.dynamic_args:
            files = [a for a in prev.argv[1:] if not a.startswith("-")]
            if len(files) == 1 and name == "cat":
                return _list_file(files[0], delim, cwds, acc, written)
        return _Feed("unknown", [], f"xargs hands it what {prev.argv[0]} prints")
    m = re.search(re.escape(cmd.text) + r"[ \t]*<[ \t]*([A-Za-z0-9_./~@%+,:-]+)", command) if cmd.text else None
    if m is not None:
        return _list_file(m.group(1), delim, cwds, acc, written)
    return _Feed("unknown", [], "xargs hands it the names on its standard input")


def _git_lists_names(argv: tuple[str, ...]) -> bool:
    """git ls-files, git diff/log/show --name-only, git grep -l: workspace-relative names."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    sub = words[0] if words else ""
    if any(a.startswith(("-C", "--git-dir", "--work-tree")) for a in argv[1:]):
        return False
    if any(".." in a or a.startswith(("/", "~", "$")) for a in words[1:]):
        return False  # git ls-files ../..: names above the cwd, maybe outside the workspace (a repository above it)
    return sub in ("ls-files", "ls-tree") or (
        sub in ("diff", "log", "show", "grep")  # (status -s prints ../x for files above the cwd)
        and any(a in ("--name-only", "--name-status", "-l", "--files-with-matches") for a in argv)
    )


def _xargs_options(argv: tuple[str, ...]) -> tuple[str | None, str | None] | None:
    """xargs's list file (-a/--arg-file) and delimiter (-0, -d); None for a -d we cannot read."""
    arg_file: str | None = None
    delim: str | None = None
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-a", "--arg-file") and i + 1 < len(argv):
            arg_file = argv[i + 1]
            i += 2
            continue
        if a.startswith("--arg-file="):
            arg_file = a.split("=", 1)[1]
        elif a in ("-0", "--null"):
            delim = "\x00"
        elif a in ("-d", "--delimiter") and i + 1 < len(argv):
            delim = argv[i + 1]
            i += 2
            if len(delim) != 1:
                return None
            continue
        elif a.startswith("--delimiter="):
            delim = a.split("=", 1)[1]
        elif a.startswith("-") and not a.startswith("--") and len(a) > 1:
            # a cluster: -0a FILE, -0, -aFILE, -d, -I{} ...
            for j, ch in enumerate(a[1:], 1):
                if ch == "0":
                    delim = "\x00"
                elif ch == "a":
                    arg_file = a[j + 1 :] or (argv[i + 1] if i + 1 < len(argv) else None)
                    if not a[j + 1 :]:
                        i += 1
                    break
                elif ch == "d":
                    delim = a[j + 1 :] or (argv[i + 1] if i + 1 < len(argv) else "")
                    if not a[j + 1 :]:
                        i += 1
                    if len(delim) != 1:
                        return None
                    break
                elif ch in "EILnPs":
                    if not a[j + 1 :]:
                        i += 1
                    break
                elif ch == "i":
                    break
        i += 1
    return arg_file, delim


def _list_file(raw: str, delim: str | None, cwds: list[str] | None, acc: _Acc, written: Set[str]) -> _Feed:
    """A list of names in a file the gate may read: one inside the workspace, small and plain."""
    if "$" in raw or cwds is None or len(cwds) != 1:
        return _Feed("unknown", [], f"the names come from {raw}, which we cannot see")
    info = paths.resolve(raw, cwds[0], acc.ctx, acc.fs)
    if info.unresolved or not info.inside or info.symlink_escape:
        return _Feed("unknown", [], f"the names come from {raw}, outside the workspace")
    if info.path in written or posixpath.basename(info.path) in {posixpath.basename(w) for w in written}:
        return _Feed("unknown", [], f"the names come from {raw}, which this command writes")
    size = acc.fs.size(info.path)
    head = acc.fs.head(info.path, MAX_LIST_BYTES + 1) if size is not None and size <= MAX_LIST_BYTES else None
    if head is None or len(head) > MAX_LIST_BYTES:
        return _Feed("unknown", [], f"the names come from {raw}, which we cannot read here")
    try:
        body = head.decode("utf-8")
    except UnicodeDecodeError:
        return _Feed("unknown", [], f"the names come from {raw}, which is not text")
    return _split_list(body, delim)


def _split_list(body: str, delim: str | None) -> _Feed:
    """xargs's split of a list: one delimiter (-0, -d), else blanks and newlines with quotes and backslashes."""
    if delim is not None:
        words = [w for w in body.split(delim) if w != ""]
        if delim != "\n" and words and words[-1].endswith("\n"):
            words[-1] = words[-1][:-1]
    else:
        try:
            words = shlex.split(body, comments=False, posix=True)
        except ValueError:
            return _Feed("unknown", [], "a list whose quoting we cannot read")
    if len(words) > MAX_LIST_WORDS:
        return _Feed("unknown", [], f"a list of more than {MAX_LIST_WORDS} names")
    return _Feed("paths", words)


def _fed_from(sa: bash.ShellAnalysis, k: int, command: str) -> list[str] | None:
    """The start points of the find that hands command ``k`` its file names (``find src | xargs cat``,
    ``find src -exec cat {} +``); None when it is fed by anything else (the caller assumes the cwd)."""
    cmd = sa.commands[k]
    producer: bash.ParsedCommand | None = None
    if "find" in cmd.wrappers:
        # -exec: the find itself is recorded after the commands it runs, with the same source text
        producer = next(
            (
                c
                for c in sa.commands[k + 1 :]
                if c.text == cmd.text and c.argv and commands.program_name(c.argv[0]) == "find"
            ),
            None,
        )
    elif "xargs" in cmd.wrappers and k > 0:
        prev = sa.commands[k - 1]
        # only a find piped straight into this xargs (its text, a pipe, then this command's text)
        piped = re.escape(prev.text) + r"[ \t]*\|[ \t]*" + re.escape(cmd.text)
        if prev.text and cmd.text and re.search(piped, command):
            producer = prev
    if producer is None or not producer.argv or commands.program_name(producer.argv[0]) != "find":
        return None
    return [producer.argv[i] for i in commands.find_starts(producer.argv)] or ["."]


def _remember_links(cmd: bash.ParsedCommand, eff: commands.Effect, cwds: list[str] | None, acc: _Acc) -> None:
    """``ln -s TARGET... DEST``: with one target and a destination, DEST becomes a link to TARGET (or, for an
    existing directory DEST, DEST/basename(TARGET)); anything else makes paths below every DEST unknown."""
    targets = [cmd.argv[i] for i in eff.reads]
    dests = [cmd.argv[i] for i in eff.writes] + list(eff.extra_writes)
    dynamic = any(i in cmd.dynamic_args for i in (*eff.reads, *eff.writes))
    for dest in dests:
        if len(targets) == 1:
            acc.link(dest, targets[0], cwds, dynamic)
            acc.link(posixpath.join(dest, posixpath.basename(targets[0].rstrip("/"))), targets[0], cwds, dynamic)
        else:
            acc.link(dest, "", cwds, True)


def _apply_patch_in_shell(command: str, cwds: list[str] | None, acc: _Acc) -> None:
    """Codex's ``apply_patch <<'EOF' ...``: the files named anywhere in the command are written."""
    found = patch_paths(command)
    if not found:
        acc.flag(Flag.UNPARSEABLE, "apply_patch with a body that names no file we can see")
    for raw in found:
        for c in _each_cwd(raw, cwds):
            acc.path(raw, c, write=True)


def _apply_cd(target: str, cwds: list[str] | None, acc: _Acc) -> list[str] | None:
    """After ``cd``, later relative paths may resolve against either directory (control flow is not tracked)."""
    if cwds is None or target == "" or (paths.expand_user(target, acc.ctx.home) is None):
        return None
    expanded = paths.expand_user(target, acc.ctx.home) or target
    new = [posixpath.normpath(paths.join(c, expanded)) for c in cwds]
    merged = list(dict.fromkeys([*cwds, *new]))
    # past the bound the real cwd may be any of them: later relative paths are unknown (never drop one)
    return merged if len(merged) <= MAX_CWDS else None


def _each_cwd(raw: str, cwds: list[str] | None) -> list[str | None]:
    if raw.startswith(("/", "~", "$HOME", "${HOME}")):
        return [cwds[0] if cwds else "/"]
    return list(cwds) if cwds else [None]


def _command_effect(
    cmd: bash.ParsedCommand, eff: commands.Effect, cwds: list[str] | None, acc: _Acc, feed: _Feed | None = None
) -> None:
    acc.need(eff.requirement)
    if eff.note and (eff.requirement is DFA or eff.catastrophic):
        acc.note(eff.note)
    if eff.catastrophic:
        acc.flag(Flag.CATASTROPHIC, eff.catastrophic)
    if eff.hidden:
        acc.flag(Flag.HIDDEN_EFFECT, eff.hidden)
        acc.need(DFA)
    if eff.beyond_rule:
        acc.flag(Flag.HIDDEN_EFFECT, eff.beyond_rule)
    if eff.gate_control:
        acc.flag(Flag.GATE_CONTROL, eff.note or f"{cmd.argv[0]} manages nexusd itself")
        acc.need(DFA)
    if cmd.glob_args:
        _glob_options(cmd, cwds, acc)
    if cmd.stdin_args and cmd.argv and cmd.argv[0] not in commands.PURE:
        feed = feed or _Feed("unknown", [], "its arguments arrive at run time")
        reader = commands.reads_operands(cmd.argv[0])
        # a known program that only reads, handed names we can see (a list we read, or every file below
        # the start points of a find / git ls-files / ls): read-only, checked as those reads
        if not (eff.known and eff.requirement is RO and not eff.hidden and reader and feed.kind != "unknown"):
            acc.need(DFA)
            acc.note(f"{cmd.argv[0]} receives its file arguments at run time")
        if feed.kind == "paths":
            # xargs -a list.txt cat, echo ~/.ssh/id_rsa | xargs cat: the names are known, checked as written
            for raw in feed.raws:
                for c in _each_cwd(raw, cwds):
                    acc.path(raw, c, write=not reader)
        elif feed.kind == "tree":
            # `find . | xargs cat`, `find . -exec cat {} +`: any file below the start points; Read deny rules
            # for any of them apply (the names are unknown here)
            for raw in feed.raws if reader else ():
                for c in _each_cwd(raw, cwds):
                    _recursive_read(acc.path(raw, c, write=False, dynamic="$" in raw), acc)
        else:
            # names we cannot see: any file at all, one a deny rule covers included; never allowed unasked.
            # Names relative to the cwd are the likeliest: deny rules below it deny the call outright
            for c in (cwds or []) if reader else ():
                _recursive_read(acc.path(".", c, write=False), acc)
            acc.flag(
                Flag.DYNAMIC,
                f"{cmd.argv[0]} is handed file names at run time ({feed.why}): "
                "it may read or write any file, one a deny rule covers included",
            )
            acc.need(DFA)
        if (
            (
                cmd.argv[0] == "rm"
                and "-r"
                in "".join(a for a in cmd.argv[1:] if a.startswith("-") and not a.startswith("--")).replace("R", "r")
            )
            or "--recursive" in cmd.argv
            or (cmd.argv[0] in ("chmod", "chown", "chgrp") and "-R" in cmd.argv)
        ):
            acc.flag(Flag.CATASTROPHIC, f"{cmd.argv[0]} -r on paths that arrive at run time")
    if eff.git_config_check is not None and (
        eff.requirement is not DFA
        or eff.git_config_check != "."
        or any(c not in acc.ctx.workspace_roots for c in cwds or ["?"])
    ):
        # read-only git anywhere; any other git command where the repository may be a nested one (its
        # config is not the user's own: a vendored or extracted repository with core.fsmonitor)
        _git_check(eff.git_config_check, cwds, acc)
    # read and written (unknown programs): resolved once and recorded as both; globs go both ways in full
    if not (eff.writes and eff.reads):
        both: Set[object] = _NONE
    else:
        common = set(eff.reads) if eff.reads == eff.writes else set(eff.reads) & set(eff.writes)
        both = (
            {i for i in common if not paths.has_glob(cmd.argv[i])}
            if cmd.glob_args or paths.has_glob("\x00".join(cmd.argv))
            else common
        )
    len_before = len(acc.writes)
    for indices, write in ((eff.reads, False), (eff.writes, True)):
        if not indices:
            continue
        for i in indices:
            raw = cmd.argv[i]
            if (cmd.stdin_args and raw == "{}") or (not write and i in both):
                continue
            if not eff.known and (i in cmd.dynamic_args or _inert_word(raw, cwds, acc)):
                continue  # a variable word (the program is asked for anyway), or a plain word naming no file
            for c in _each_cwd(raw, cwds):
                info = acc.path(raw, c, write, dynamic=i in cmd.dynamic_args)
                if i in both and info is not None and not info.unresolved:
                    acc.add_read(info.path)
                if not write and eff.recursive_reads and i in eff.recursive_reads:
                    _recursive_read(info, acc)
    extra_both = (
        {r for r in set(eff.extra_reads) & set(eff.extra_writes) if not paths.has_glob(r)}
        if eff.extra_reads and eff.extra_writes
        else _NONE
    )
    for raws, write in ((eff.extra_reads, False), (eff.extra_writes, True)):
        for raw in raws:
            if (not eff.known and ("$" in raw or _inert_word(raw, cwds, acc))) or (not write and raw in extra_both):
                continue
            for c in _each_cwd(raw, cwds):
                info = acc.path(raw, c, write, dynamic="$" in raw)
                if raw in extra_both and info is not None and not info.unresolved:
                    acc.add_read(info.path)
                if not write and raw in eff.extra_recursive_reads:
                    _recursive_read(info, acc)
    if len(acc.writes) > len_before:
        _into_home(cmd, len_before, acc)
    if eff.unnamed_writes:
        where = ", ".join(acc.writes[len_before:]) or "the working directory"
        acc.flag(
            Flag.PROTECTED_PATH,
            f"{cmd.argv[0]} writes files its words do not name below {where} "
            "(.git/hooks, agent settings and shell rc files included)",
        )
        acc.need(DFA)
    if (
        eff.writes
        and not eff.recursive_targets
        and cmd.argv[0].endswith(("rm", "rmdir"))
        and commands.program_name(cmd.argv[0]) in ("rm", "rmdir")
    ):
        for i in eff.writes:
            _critical_removal(cmd.argv[i], cwds, acc, cmd.argv[0])
    if not (eff.recursive_targets or eff.extra_recursive):
        return
    name = commands.program_name(cmd.argv[0]) or cmd.argv[0] if cmd.argv else ""
    if name == "find" and not any(a in _FIND_FILTERS or a.startswith("-newer") for a in cmd.argv):
        name = "find -delete"  # removes everything below its start: judged as rm -r is
    for i in eff.recursive_targets:
        _catastrophic_target(cmd.argv[i], cwds, acc, name)
    for raw in eff.extra_recursive:
        _catastrophic_target(raw, cwds, acc, name)


def _recursive_read(info: paths.PathInfo | None, acc: _Acc) -> None:
    """A directory read with everything below it: deny rules for any file below apply (the engine matches
    them against ``Classification.recursive_reads``), and the credential locations below it (``grep -r key ~``,
    ``rg token`` in a workspace that is the home directory) are read too: outside the workspace, always."""
    if info is None or info.unresolved or not info.path:
        return
    d = info.path
    if d not in acc.recursive:
        acc.recursive.append(d)
    acc.secrets_below(d)
    home = acc.ctx.home.rstrip("/")
    if not (paths.within(home, d) or paths.within(d, home)):
        return  # no credential location can lie below it
    for rel in paths.CREDENTIAL_PATHS:
        cred = f"{home}/{rel}"
        if cred != d and paths.within(cred, d) and cred not in acc.reads and acc.fs.lexists(cred):
            acc.path(cred, "/", write=False, expand=False)


_NONE: frozenset[object] = frozenset()
# find tests that choose what -delete removes; without one it removes everything below its start points
_FIND_FILTERS = frozenset(
    {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-empty",
        "-user",
        "-group",
        "-nouser",
        "-nogroup",
        "-perm",
        "-links",
        "-inum",
        "-samefile",
        "-used",
        "-uid",
        "-gid",
        "-fstype",
    }
)
_REMOVERS = frozenset({"rm", "rmdir", "shred", "chmod", "chown", "chgrp", "find", "touch", "unlink", "git"})


def _into_home(cmd: bash.ParsedCommand, first: int, acc: _Acc) -> None:
    """A destination that is the home directory (or /) itself: what lands there is named by a source or an
    archive (``cp -r dotfiles/. ~``, ``tar -C ~ -x``, ``unzip -d ~``, ``mv .bashrc ~``), rc files included.
    Removers and mode changers of the home directory are the catastrophic check's."""
    home = acc.ctx.home.rstrip("/") or "/"
    new = acc.writes[first:]
    if home not in new and "/" not in new:
        return
    name = commands.program_name(cmd.argv[0]) if cmd.argv else None
    if name in ("chmod", "chown", "chgrp"):
        # the home directory's (or /'s) own mode or owner: every login and program that needs it breaks
        acc.flag(Flag.CATASTROPHIC, f"{name} of {home if home in new else '/'} itself")
        return
    if name in _REMOVERS:
        return
    for p in new:
        if p in (home, "/"):
            acc.flag(Flag.PROTECTED_PATH, f"writes files into {p} itself, where protected files live")
            acc.need(DFA)
            return


_PLAIN_WORD = re.compile(r"-{0,2}[A-Za-z0-9_][A-Za-z0-9_=,:+@%-]*|[^/~.*?\[][^/*?\[]*\s[^/*?\[]*")
_DOTLESS_PROTECTED = frozenset(
    n.lower() for n in paths.PROTECTED_FILE_NAMES | paths.PROTECTED_DIR_NAMES if not n.startswith(".")
)


def _inert_word(raw: str, cwds: list[str] | None, acc: _Acc) -> bool:
    """An unknown program's plain word (``test``, ``clippy``, ``--watch``, ``-c`` code with spaces) that names no
    existing file in any candidate directory and no protected name: resolving it would only say "a new file
    in the workspace". Keeps classification fast; every other word (a dot without a space, a slash, ~, a
    glob, an existing file) is checked in full."""
    return (
        cwds is not None
        and _PLAIN_WORD.fullmatch(raw) is not None
        and raw.lower() not in _DOTLESS_PROTECTED
        and not any(acc.fs.lexists(paths.join(c, raw)) for c in cwds)
    )


_GLOB_START = ("*", "?", "[", "@(", "!(", "+(", "-")


def _glob_options(cmd: bash.ParsedCommand, cwds: list[str] | None, acc: _Acc) -> None:
    """A glob in an option position may expand to a planted ``--output=x`` / ``--pre=sh`` file name (issue 28.1).

    For a program with options that write or run something (or one we do not know), any such glob is a
    hidden effect, whatever the directory holds now: the file may be created by an earlier part of the
    same command (a redirect included) or by another process before it runs. A ``--`` before it, a glob that
    cannot start with ``-`` (``src/*``, ``./*``, ``.*``), or a program whose options only read, keeps it
    ordinary. File names cannot hold ``/``, so a planted option cannot name a path outside; a program whose
    options only read (grep -f) is flagged when such a file is there now or written earlier in the command.
    """
    name = commands.program_name(cmd.argv[0]) if cmd.argv else None
    read_only_options = name in commands.GLOB_READ_OPTIONS
    if not read_only_options and not commands.options_from_globs_matter(name):
        return
    try:
        end = cmd.argv.index("--")
    except ValueError:
        end = len(cmd.argv)
    glob = getattr(acc.fs, "glob", None)
    for i in sorted(cmd.glob_args):
        if not (0 < i < end and cmd.argv[i].startswith(_GLOB_START)):
            continue
        if read_only_options:
            # its options only read (-f FILE): a file planted now, or earlier in this command, is what counts
            planted = any(posixpath.basename(w).startswith("-") for w in acc.writes)
            if not planted and glob is not None and cwds:
                for c in cwds:
                    found = glob(posixpath.join(c, cmd.argv[i]), MAX_GLOB_MATCHES)
                    # too large to expand (None): it may match such a name; we cannot tell that it does not
                    if found is None or any(posixpath.basename(m).startswith("-") for m in found):
                        planted = True
                        break
            if not planted:
                continue
        acc.flag(
            Flag.HIDDEN_EFFECT,
            f"{cmd.argv[i]} may expand to a file name that {cmd.argv[0]} reads as an "
            "option (a planted --output=x or --pre=sh)",
        )
        acc.need(DFA)
        return


_UNDER_VARIABLE = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/\*?$")


def _critical_removal(raw: str, cwds: list[str] | None, acc: _Acc, name: str) -> None:
    """``rm`` / ``rmdir`` (recursive or not) of a critical path: the root, a top-level directory, the home, a
    workspace root, the cwd or a parent of either, or a glob right under a variable (``rm "$D"/*`` is
    ``rm /*`` when D is empty). Claude Code's circuit breaker: a person decides, bypass included."""
    if _UNDER_VARIABLE.match(raw):
        acc.flag(Flag.CATASTROPHIC, f"{name} on {raw}: the root's entries when the variable is empty")
        return
    expanded = paths.expand_user(raw, acc.ctx.home)
    if expanded is None:
        return
    home = acc.ctx.home.rstrip("/") or "/"
    holders = (*acc.ctx.workspace_roots, home, acc.ctx.cwd)
    # lexical only: rm and rmdir remove a symlink itself, never what it points to
    for c in cwds or ["/"]:
        cand = posixpath.normpath(paths.join(c, expanded))
        if cand == "/" or posixpath.dirname(cand) == "/" or any(paths.within(r, cand) for r in holders):
            acc.flag(Flag.CATASTROPHIC, f"{name} removes a critical path: {cand}")
            return


def _catastrophic_target(raw: str, cwds: list[str] | None, acc: _Acc, name: str) -> None:
    """Recursive deletes (and chmod/chown -R) of a directory outside the workspace are catastrophic (28.4)."""
    home = acc.ctx.home.rstrip("/") or "/"
    candidates = {raw.rstrip("/") or "/"}
    expanded = paths.expand_user(raw, acc.ctx.home)
    if expanded is None:
        if raw.startswith(("$", "${", "~")):
            acc.flag(Flag.CATASTROPHIC, f"{name} -r on a path we cannot resolve: {raw}")
        return
    absolutes: list[str] = []
    for c in cwds or ["/"]:
        absolute = posixpath.normpath(paths.join(c, expanded))
        candidates.add(absolute)
        stripped = absolute
        while stripped.endswith(("/*", "/.*")) or stripped in ("*", ".*"):
            stripped = posixpath.dirname(stripped) if "/" in stripped else c
            candidates.add(stripped or "/")
        real = posixpath.normpath(acc.fs.realpath(absolute)) if "*" not in absolute else absolute
        candidates.add(real)
        if cwds is not None or expanded.startswith("/"):
            absolutes += [absolute, real]
    for cand in candidates:
        if cand in commands.SYSTEM_TOP or cand == home or cand in ("~", "$HOME", "${HOME}"):
            acc.flag(Flag.CATASTROPHIC, f"{name} -r on {cand}")
            return
        # the whole workspace, or a directory that holds it or the home directory
        holders = (*acc.ctx.workspace_roots, home)
        if name in ("rm", "find -delete") and cand.startswith("/") and any(paths.within(r, cand) for r in holders):
            acc.flag(Flag.CATASTROPHIC, f"{name} -r on {cand}, which holds the workspace or home")
            return
    if name == "mv":
        return  # moving a directory away is judged as the write it is
    is_mount = getattr(acc.fs, "is_mount", None)  # optional: a file system that can tell mount points
    for cand in absolutes:
        if is_mount is not None and is_mount(cand):
            acc.flag(Flag.CATASTROPHIC, f"{name} recursively removes or changes a mount point: {cand}")
            return
        if not any(paths.within(cand, r) for r in acc.ctx.workspace_roots):
            acc.flag(Flag.CATASTROPHIC, f"{name} recursively removes or changes {cand}, outside the workspace")
            return


def _redirect(r: Redirect, dynamic: bool, cwds: list[str] | None, acc: _Acc) -> None:
    if r.target is None:
        return
    op = r.op
    if op in (">&", "<&", ">&-", "<&-") and (r.target.isdigit() or r.target == "-" or r.target.endswith("-")):
        return
    if r.target in commands.SAFE_DEVICES and op not in READ_REDIRECTS:
        return
    write = op in WRITE_REDIRECTS
    if not write and op not in READ_REDIRECTS:
        return
    if r.target.startswith(("/dev/tcp/", "/dev/udp/")):
        # bash opens a socket for these in a redirect, reading or writing: the network
        acc.need(DFA)
        acc.note(f"connects to the network through {r.target}")
    for c in _each_cwd(r.target, cwds):
        acc.path(r.target, c, write, dynamic=dynamic)
        if op == "<>":
            acc.path(r.target, c, True, dynamic=dynamic)


def _git_check(repo: str, cwds: list[str] | None, acc: _Acc) -> None:
    """git is read-only only where the repository's own config cannot run code (fsmonitor, pager, ...)."""
    start_dirs = [
        posixpath.normpath(paths.join(c, paths.expand_user(repo, acc.ctx.home) or repo)) for c in (cwds or [])
    ]
    if not start_dirs or "$" in repo:
        acc.need(DFA)
        acc.note("git runs in a directory we cannot determine")
        return
    for d in start_dirs:
        reason = _git_repo_problem(d, acc.fs)
        if reason:
            # the repository's own configuration runs programs: no allow rule may cover any git command here
            acc.need(DFA)
            acc.flag(Flag.HIDDEN_EFFECT, f"git runs programs its configuration names here: {reason}")
            return


def _git_repo_problem(start: str, fs: FileSystem) -> str:
    both = getattr(fs, "realpath_if_lexists", None)  # optional: one question fewer (DecisionFileSystem)
    cur = (both(start) if both is not None else fs.realpath(start) if fs.lexists(start) else None) or start
    for _ in range(64):
        dotgit = paths.join(cur, ".git")
        if fs.lexists(dotgit):
            data = fs.head(dotgit, 4096)
            gitdir = dotgit
            if data is not None:  # a file: "gitdir: <path>" (worktree or submodule)
                line = data.decode("utf-8", "replace").strip()
                if not line.startswith("gitdir:"):
                    return f"{dotgit} is not a git directory"
                gitdir = posixpath.normpath(posixpath.join(cur, line[7:].strip()))
                common = fs.head(posixpath.join(gitdir, "commondir"), 4096)
                if common is not None:
                    return "linked worktree (its shared config is not checked)"
            return _git_config_problem(posixpath.join(gitdir, "config"), fs)
        if (
            fs.lexists(paths.join(cur, "HEAD"))
            and fs.lexists(paths.join(cur, "config"))
            and fs.lexists(paths.join(cur, "objects"))
        ):
            return _git_config_problem(paths.join(cur, "config"), fs)  # a bare repository
        if cur == "/":
            return ""
        cur = posixpath.dirname(cur)
    return "repository search went too deep"


def _git_config_problem(config_path: str, fs: FileSystem) -> str:
    both = getattr(fs, "size_and_head", None)  # optional: one open answers both (RealFileSystem)
    if both is not None:
        size, data = both(config_path, _GIT_CONFIG_LIMIT)
    else:
        size, data = fs.size(config_path), None
    if size is None:
        return "" if not fs.lexists(config_path) else f"cannot read {config_path}"
    if size > _GIT_CONFIG_LIMIT:
        return f"{config_path} is too large to check"
    if both is None:
        data = fs.head(config_path, _GIT_CONFIG_LIMIT)
    if data is None:
        return f"cannot read {config_path}"
    if not commands.git_config_is_inert(data):
        return f"{config_path} sets options that run programs (fsmonitor, pager, textconv, filters, includes ...)"
    return ""


def _finish(
    info: ToolInfo,
    acc: _Acc,
    commands: tuple[Command, ...] = (),
    redirects: tuple[Redirect, ...] = (),
    url: str | None = None,
    domain: str | None = None,
) -> Classification:
    if not acc.flags.isdisjoint(_UNKNOWABLE_CALL):
        acc.need(DFA)
    return Classification(
        hosts=tuple(acc.hosts),
        kind=info.kind,
        tool=info.canonical,
        requirement=acc.requirement,
        commands=commands,
        redirects=redirects,
        reads=tuple(acc.reads),
        writes=tuple(acc.writes),
        url=url,
        domain=domain,
        flags=frozenset(acc.flags),
        notes=tuple(acc.notes),
        recursive_reads=tuple(acc.recursive),
    )


def details(cls: Classification) -> CallDetails:
    """The classification as people see it (every string escaped for display)."""
    argvs = [c.argv for c in cls.commands]
    if text.all_displayable(
        cls.tool, cls.domain or "", *cls.reads, *cls.writes, *cls.notes, *(a for v in argvs for a in v)
    ):
        # nearly every call: nothing to escape or cut, so one check for all its strings instead of one each
        return CallDetails(
            kind=str(cls.kind),
            tool=cls.tool,
            commands=[list(v) for v in argvs],
            reads=list(cls.reads),
            writes=list(cls.writes),
            domain=cls.domain or None,
            notes=list(cls.notes),
        )
    esc = text.escape_for_display
    return CallDetails(
        kind=str(cls.kind),
        tool=esc(cls.tool),
        commands=[[esc(a) for a in v] for v in argvs],
        reads=[esc(p) for p in cls.reads],
        writes=[esc(p) for p in cls.writes],
        domain=esc(cls.domain) if cls.domain else None,
        notes=[esc(n) for n in cls.notes],
    )
