"""PowerShell (``pwsh -c``, ``powershell -Command``): the read-only cmdlets read, the file cmdlets write.

Windows-style agents and WSL users run PowerShell; treated as an unknown program, every ``Get-ChildItem``
needed a person. This reads the small, static part of the language an agent's one-liners use: statements
separated by ``;``, newlines, ``|``, ``&&`` and ``||``, each a cmdlet (or its alias) with named parameters
(case-insensitive, abbreviated to any unique prefix, ``-Name:value``) and positional arguments, quoted with
``'...'`` or ``"..."`` without ``$`` or backticks, and ``>``/``>>`` redirections. Everything else —
variables, subexpressions, script blocks, the call and dot-source operators, arrays, type literals,
provider drives (``Env:``, ``HKLM:``), ``-EncodedCommand``, ``-File``, a cmdlet or parameter not in the
table — makes the whole call opaque (``commands.opaque``: every word read and written, a person decides).

Paths go to the ordinary checks as raw words (``~`` is the home directory in PowerShell too; wildcards are
globs). A cmdlet that writes makes the call workspace-write; ``Remove-Item -Recurse`` is a recursive delete
(catastrophic outside the workspace); a link made by ``New-Item -ItemType SymbolicLink`` is opaque.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from nexusd.core.model import Requirement


class Opaque(Exception):
    """Outside the static subset: the caller treats the program as unknown."""


class Cmdlet(NamedTuple):
    params: dict[str, str]  # lower-case parameter -> switch | value | read | write | dest | recurse | itemtype
    positional: tuple[str, ...] = ()  # roles of the positional arguments; a trailing "*" repeats the last
    writes: bool = False


_COMMON = {
    "erroraction": "value",
    "warningaction": "value",
    "informationaction": "value",
    "verbose": "switch",
    "debug": "switch",
    "whatif": "switch",
    "confirm": "switch",
    "ea": "value",
    "wa": "value",
}
_FILTERS = {"filter": "value", "include": "value", "exclude": "value"}


def _c(params: str, positional: tuple[str, ...] = (), writes: bool = False) -> Cmdlet:
    table = dict(_COMMON)
    for item in params.split():
        name, _, role = item.partition("=")
        table[name] = role or "switch"
    return Cmdlet(table, positional, writes)


_PATHS_R = "path=read literalpath=read lp=read pspath=read"
_PATHS_W = "path=write literalpath=write lp=write pspath=write"
_FILTER = " ".join(f"{k}={v}" for k, v in _FILTERS.items())

CMDLETS: dict[str, Cmdlet] = {
    "get-childitem": _c(
        f"{_PATHS_R} {_FILTER} recurse depth=value force name file directory hidden readonly "
        "system followsymlink attributes=value",
        ("read", "value"),
    ),
    "get-content": _c(
        f"{_PATHS_R} totalcount=value head=value first=value tail=value last=value raw "
        "encoding=value readcount=value delimiter=value wait",
        ("read",),
    ),
    "get-item": _c(f"{_PATHS_R} {_FILTER} force", ("read",)),
    "test-path": _c(f"{_PATHS_R} {_FILTER} pathtype=value isvalid", ("read",)),
    "resolve-path": _c(f"{_PATHS_R} relative", ("read",)),
    "get-location": _c(""),
    "select-string": _c(
        f"pattern=value {_PATHS_R} {_FILTER} simplematch casesensitive context=value notmatch "
        "allmatches list quiet raw encoding=value",
        ("value", "read"),
    ),
    "get-filehash": _c(f"{_PATHS_R} algorithm=value", ("read",)),
    "measure-object": _c("property=value line word character sum average maximum minimum", ("value",)),
    "select-object": _c("first=value last=value skip=value property=value unique expandproperty=value", ("value",)),
    "sort-object": _c("property=value descending unique", ("value",)),
    "group-object": _c("property=value noelement", ("value",)),
    "format-table": _c("property=value autosize wrap", ("value",)),
    "format-list": _c("property=value", ("value",)),
    "out-string": _c("width=value stream"),
    "out-null": _c(""),
    "write-output": _c("noenumerate", ("value", "*")),
    "write-host": _c("nonewline foregroundcolor=value backgroundcolor=value separator=value", ("value", "*")),
    "get-date": _c("format=value uformat=value", ("value",)),
    "get-command": _c("name=value module=value commandtype=value", ("value",)),
    "get-help": _c("name=value full examples detailed", ("value",)),
    "get-process": _c("name=value id=value", ("value",)),
    "get-unique": _c("asstring"),
    # writers
    "set-content": _c(f"{_PATHS_W} value=value encoding=value nonewline force passthru", ("write", "value"), True),
    "add-content": _c(f"{_PATHS_W} value=value encoding=value nonewline force passthru", ("write", "value"), True),
    "out-file": _c(
        "filepath=write literalpath=write encoding=value append force nonewline width=value noclobber",
        ("write", "value"),
        True,
    ),
    "new-item": _c(f"{_PATHS_W} itemtype=itemtype type=itemtype value=value force", ("write",), True),
    "remove-item": _c(f"{_PATHS_W} {_FILTER} recurse=recurse force", ("write",), True),
    "clear-content": _c(f"{_PATHS_W} {_FILTER} force", ("write",), True),
    "copy-item": _c(f"{_PATHS_R} destination=dest {_FILTER} recurse force container", ("read", "dest"), True),
    "move-item": _c(f"{_PATHS_W} destination=dest {_FILTER} force", ("write", "dest"), True),
}
# Not here on purpose: ls, cat, cp, mv, rm, rmdir, ps, sort, tee, write, ac, sc ... are aliases on Windows but
# the native programs on Linux and macOS (PowerShell 6+ dropped them there), where ``sort .env`` prints the file:
# one spelling, two meanings, so they are unknown (opaque).
ALIASES = {
    "gci": "get-childitem",
    "dir": "get-childitem",
    "gc": "get-content",
    "type": "get-content",
    "gi": "get-item",
    "rvpa": "resolve-path",
    "gl": "get-location",
    "pwd": "get-location",
    "sls": "select-string",
    "measure": "measure-object",
    "select": "select-object",
    "group": "group-object",
    "ft": "format-table",
    "fl": "format-list",
    "echo": "write-output",
    "gcm": "get-command",
    "gps": "get-process",
    "ni": "new-item",
    "del": "remove-item",
    "ri": "remove-item",
    "rd": "remove-item",
    "erase": "remove-item",
    "clc": "clear-content",
    "copy": "copy-item",
    "cpi": "copy-item",
    "move": "move-item",
    "mi": "move-item",
}
_PLAIN_ITEM_TYPES = frozenset({"file", "directory"})

_TOKEN = re.compile(
    r"""(?P<ws>[ \t]+)
      |(?P<sep>\r?\n|;|&&|\|\||\|)
      |(?P<redir>(?:[2*]?>>?)(?:&1)?)
      |(?P<sq>'(?:[^']|'')*')
      |(?P<dq>"[^"$`]*")
      |(?P<null>\$null\b)
      |(?P<switch>-[A-Za-z]+:\$(?:true|false)\b)
      |(?P<bare>[A-Za-z0-9_./~*?\[\]=+%@-][A-Za-z0-9_./~*?\[\]=+%@:-]*)
    """,
    re.VERBOSE,
)
_DRIVE = re.compile(r"[A-Za-z][A-Za-z0-9]*:")  # Env:, HKLM:, C: ... not files of this file system


class Word(NamedTuple):
    text: str
    quoted: bool


def tokenize(source: str) -> list[list[Word | str]]:
    """Statements of words; a pipeline or ``&&`` joins commands, so each command is its own statement here.
    Redirections stay in the word list as ``">"``/``">>"`` markers (strings) followed by their target."""
    statements: list[list[Word | str]] = [[]]
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            raise Opaque(f"PowerShell syntax nexusd does not read statically near {source[pos : pos + 12]!r}")
        pos = m.end()
        kind = m.lastgroup
        text = m.group()
        if kind == "ws":
            continue
        if kind == "sep":
            statements.append([])
        elif kind == "redir":
            statements[-1].append(text)
        elif kind == "sq":
            statements[-1].append(Word(text[1:-1].replace("''", "'"), True))
        elif kind == "dq":
            statements[-1].append(Word(text[1:-1], True))
        elif kind in ("null", "switch"):
            statements[-1].append(Word(text, False))
        else:
            if text.startswith("@") or (_DRIVE.match(text) and not text.startswith("-")):
                raise Opaque(f"{text!r} is not a plain PowerShell word")
            statements[-1].append(Word(text, False))
    return [s for s in statements if s]


def _param(spec: Cmdlet, name: str) -> tuple[str, str]:
    """(canonical, role) of ``-name``: exact, or the one parameter it is a unique prefix of."""
    low = name.lower()
    if low in spec.params:
        return low, spec.params[low]
    hits = [p for p in spec.params if p.startswith(low)] if low else []
    if len(hits) == 1:
        return hits[0], spec.params[hits[0]]
    raise Opaque(f"parameter -{name} is unknown or ambiguous")


class Effects(NamedTuple):
    requirement: Requirement
    reads: list[str]
    writes: list[str]
    recursive: list[str]


def _path(word: Word) -> str:
    if not word.text or (not word.quoted and word.text.startswith("-")) or "$" in word.text:
        raise Opaque("an empty, option-like or variable path")
    if _DRIVE.match(word.text) or "\\" in word.text:
        raise Opaque(f"{word.text!r}: a provider or Windows path")
    return word.text


def effects(source: str) -> Effects:
    """What a PowerShell command line reads and writes; Opaque when it is outside the static subset."""
    reads: list[str] = []
    writes: list[str] = []
    recursive: list[str] = []
    wrote = False
    for stmt in tokenize(source):
        head = stmt[0]
        if not isinstance(head, Word) or head.quoted:
            raise Opaque("a statement that does not start with a command name")
        name = ALIASES.get(head.text.lower(), head.text.lower())
        spec = CMDLETS.get(name)
        if spec is None:
            raise Opaque(f"{head.text} is not a cmdlet nexusd knows")
        wrote = wrote or spec.writes
        positional: list[Word] = []
        rec = False
        targets: list[str] = []  # this statement's paths written (for -Recurse)
        i = 1
        while i < len(stmt):
            w = stmt[i]
            if isinstance(w, str):  # a redirection and its target
                target = stmt[i + 1] if i + 1 < len(stmt) else None
                if w.endswith("&1") or (isinstance(target, Word) and target.text.lower() == "$null"):
                    i += 1 if w.endswith("&1") else 2
                    continue
                if not isinstance(target, Word):
                    raise Opaque("a redirection without a target")
                writes.append(_path(target))
                wrote = True
                i += 2
                continue
            if w.text.startswith("-") and not w.quoted and len(w.text) > 1:
                pname, _, glued = w.text[1:].partition(":")
                _, role = _param(spec, pname)
                if role in ("switch", "recurse"):
                    if glued and glued.lower() not in ("$true", "$false"):
                        raise Opaque(f"-{pname}:{glued}")
                    rec = rec or (role == "recurse" and glued.lower() != "$false")
                    i += 1
                    continue
                if glued:
                    value = Word(glued, False)
                    i += 1
                else:
                    if i + 1 >= len(stmt) or not isinstance(stmt[i + 1], Word):
                        raise Opaque(f"-{pname} without a value")
                    value = stmt[i + 1]  # type: ignore[assignment]
                    i += 2
                _role(role, value, reads, writes, targets)
                continue
            positional.append(w)
            i += 1
        roles = list(spec.positional)
        if len(positional) > len(roles) and not (roles and roles[-1] == "*"):
            raise Opaque(f"{head.text}: more arguments than it takes")
        for n, w in enumerate(positional):
            role = roles[n] if n < len(roles) and roles[n] != "*" else roles[-2]
            _role(role, w, reads, writes, targets)
        if rec:
            recursive += targets
    req = Requirement.WORKSPACE_WRITE if wrote else Requirement.READ_ONLY
    return Effects(req, reads, writes, recursive)


_ROUGH = re.compile(r"'([^']*)'|\"([^\"]*)\"|([^\s;|&(){}'\"`,]+)")


def rough_words(source: str) -> list[str]:
    """Every word of text outside the static subset that may name a path (quoted or not, ``-Name:`` and
    ``$var/`` prefixes cut), so deny rules and the workspace boundary still see ``.env`` in ``cat .env``."""
    out: list[str] = []
    for m in _ROUGH.finditer(source):
        w = next(g for g in m.groups() if g is not None)
        if w.startswith("-"):
            w = w.partition(":")[2]
        if "$" in w:
            w = w[w.find("/") + 1 :] if "/" in w else ""
        if w and ("/" in w or "." in w or "~" in w) and "://" not in w:
            out.append(w)
    return out


def _role(role: str, value: Word, reads: list[str], writes: list[str], targets: list[str]) -> None:
    if role == "value":
        if "$" in value.text:
            raise Opaque("a value with a variable")
        return
    if role == "itemtype":
        if value.text.lower() not in _PLAIN_ITEM_TYPES:
            raise Opaque(f"New-Item -ItemType {value.text}: a link or another provider's item")
        return
    path = _path(value)
    if role == "read":
        reads.append(path)
    else:  # write, dest
        writes.append(path)
        targets.append(path)


# pwsh's own options (case-insensitive, any unique prefix): those nexusd lets stand before -Command.
_PWSH_SWITCHES = ("noprofile", "nologo", "noninteractive", "mta", "sta")
_PWSH_VALUES = ("executionpolicy", "outputformat", "inputformat", "workingdirectory", "windowstyle")


def command_of(argv: tuple[str, ...]) -> str:
    """The command text of ``pwsh|powershell [options] -Command TEXT...``; Opaque for every other form
    (a script file, -EncodedCommand, stdin, -WorkingDirectory, a profile to load with -Login ...)."""
    i = 1
    while i < len(argv):
        a = argv[i]
        low = a.lower().lstrip("-/") if a.startswith(("-", "/")) else ""
        if not low:
            raise Opaque("a script file or argument, not -Command")
        if low in ("c", "co", "com", "comm", "comma", "comman", "command"):
            rest = argv[i + 1 :]
            if not rest or rest == ("-",):
                raise Opaque("-Command reads the command from standard input")
            return " ".join(rest)
        if any(s.startswith(low) for s in _PWSH_SWITCHES) and len(low) >= 3:
            i += 1
            continue
        if low in ("ep", "ex", "exec") or any(
            v.startswith(low) and v != "workingdirectory" and len(low) >= 3 for v in _PWSH_VALUES
        ):
            i += 2
            continue
        raise Opaque(f"pwsh option {a} is not one nexusd reads")
    raise Opaque("pwsh without -Command starts an interactive shell")
