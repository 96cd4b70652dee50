"""Shell commands parsed with tree-sitter-bash into the simple commands they really run.

Prefix matching on a raw command string is how every agent's gate was bypassed, so we parse: every
simple command across every separator and compound construct, every redirect, and every construct
that cannot be judged statically (substitutions, expansion in command position, eval, source,
backgrounding ...). Wrappers (``timeout``, ``env``, ``xargs``, ``bash -c`` ...) are peeled so rules
see the real command.

``parse`` is pure and cached with a module-level ``functools.lru_cache`` keyed on the command string
(the one deliberate piece of module state, together with the reusable tree-sitter parser: the daemon
classifies on one thread).
"""

from __future__ import annotations

import functools
import re

import msgspec
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from nexusd.core.model import Command, Flag, Redirect, Requirement

MAX_COMMAND_BYTES = 64 * 1024  # longer input is not parsed at all (our parser-timeout equivalent)
# tree-sitter-bash 0.25 corrupts memory (a segfault some parses later) on characters outside the Basic
# Multilingual Plane; lone surrogates are not even valid UTF-8. Such input is never handed to the
# parser: it is unparseable, so a person decides (tests/core/classify/test_parser_crash.py).
_UNSAFE_FOR_PARSER = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")
MAX_NODE_DEPTH = 200  # deeper trees are refused rather than walked
MAX_SHELL_DEPTH = 4  # nested `bash -c` levels parsed recursively
MAX_BRACE_WORDS = 64  # brace expansion larger than this is refused
MAX_UNWRAP = 16  # wrapper layers peeled from one command

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox-sh", "fish", "csh", "tcsh"})

# Variables that change what a command loads or runs; in front of a command, exported or assigned.
DANGEROUS_ENV = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PATH",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
        "GLOBIGNORE",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "SYSTEMD_PAGER",
        "BROWSER",
        "ZDOTDIR",
        "HOME",
        "XDG_CONFIG_HOME",
        "LD_BIND_NOW",
        "MALLOC_CHECK_",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "DOCKER_HOST",
        "NPM_CONFIG_SCRIPT_SHELL",
        "npm_config_script_shell",
    }
)
_DANGEROUS_ENV_PREFIXES = ("DYLD_", "LD_", "GIT_", "BASH_FUNC_", "NPM_CONFIG_", "npm_config_", "PIP_", "CARGO_")
# GIT_ variables that only identify people or tune output are harmless; everything else (GIT_CONFIG_*,
# GIT_EXEC_PATH, GIT_SSH_COMMAND, GIT_EXTERNAL_DIFF, GIT_PAGER, GIT_DIR ...) can run code.
_HARMLESS_GIT_ENV = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_TERMINAL_PROMPT",
        "GIT_MERGE_AUTOEDIT",
        "GIT_OPTIONAL_LOCKS",
    }
)
_HARMLESS_PREFIXED = frozenset({"CARGO_TERM_COLOR", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT"})


def is_dangerous_env(name: str) -> bool:
    """Whether assigning ``name`` in front of (or before) a command can change what it loads or runs."""
    if name in DANGEROUS_ENV:
        return True
    if name in _HARMLESS_GIT_ENV or name in _HARMLESS_PREFIXED:
        return False
    return name.startswith(_DANGEROUS_ENV_PREFIXES)


class ParsedCommand(msgspec.Struct, frozen=True):
    """A simple command as parsed, with what path checks need beyond ``model.Command``."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    wrappers: tuple[str, ...] = ()
    text: str = ""
    dynamic_args: frozenset[int] = frozenset()  # argv indices whose value depends on a variable
    stdin_args: bool = False  # receives further arguments at run time (xargs, find -exec {})
    # argv indices of words with an unquoted glob character (* ? [ or an extglob) that bash may expand
    # into several words, any of which may start with "-" (a file named --output=x in the workspace)
    glob_args: frozenset[int] = frozenset()

    def to_command(self, opaque: bool = False, requirement: Requirement = Requirement.READ_ONLY) -> Command:
        return Command(argv=self.argv, env=self.env, wrappers=self.wrappers, text=self.text, opaque=opaque,
                       requirement=requirement)


class ShellAnalysis(msgspec.Struct, frozen=True):
    """Everything the classifier needs from one shell command string."""

    commands: tuple[ParsedCommand, ...]
    redirects: tuple[Redirect, ...]
    dynamic_redirects: frozenset[int] = frozenset()  # indices of redirects whose target depends on a variable
    flags: frozenset[Flag] = frozenset()
    notes: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()  # names of shell functions the command defines


@functools.lru_cache(maxsize=4096)
def parse(command: str) -> ShellAnalysis:
    """Parse a command string; never raises (failures come back as Flag.UNPARSEABLE)."""
    try:
        return _analyse(command, 0)
    except RecursionError:
        return ShellAnalysis((), (), flags=frozenset({Flag.UNPARSEABLE}), notes=("command nests too deeply",))
    except Exception as exc:  # the classifier must never raise: fail closed instead
        return ShellAnalysis(
            (), (), flags=frozenset({Flag.UNPARSEABLE}), notes=(f"internal error while parsing: {exc!r}",)
        )


def _analyse(command: str, shell_depth: int) -> ShellAnalysis:
    if "\x00" in command:
        return ShellAnalysis((), (), flags=frozenset({Flag.UNPARSEABLE}), notes=("NUL byte in command",))
    if _UNSAFE_FOR_PARSER.search(command):
        return ShellAnalysis(
            (),
            (),
            flags=frozenset({Flag.UNPARSEABLE}),
            notes=("characters outside the Basic Multilingual Plane (emoji, surrogates) are not parsed",),
        )
    src = command.encode("utf-8", "surrogatepass")
    if len(src) > MAX_COMMAND_BYTES:
        return ShellAnalysis((), (), flags=frozenset({Flag.UNPARSEABLE}), notes=("command too long to parse",))
    tree = _PARSER.parse(src)
    walker = _Walker(shell_depth)
    root = tree.root_node
    if root.has_error:
        walker.flag(Flag.UNPARSEABLE, "the shell parser found a syntax error")
    walker.walk(root, 0)
    walker.check_fork_bomb()
    return ShellAnalysis(
        tuple(walker.commands),
        tuple(walker.redirects),
        frozenset(walker.dyn_redirects),
        frozenset(walker.flags),
        tuple(walker.notes),
        tuple(walker.functions),
    )


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "surrogateescape") if node.text is not None else ""


_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ANSI_SIMPLE.update({"v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"})
_ANSI_RE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S)


def _ansi_c(body: str) -> str:
    """Decode ``$'...'`` the way bash does, so ``$'\\x72m'`` is seen as ``rm``."""

    def sub(m: re.Match[str]) -> str:
        esc = m.group(1)
        head = esc[0]
        if head in "xuU":
            code = int(esc[1:], 16)
            return chr(code) if code < 0x110000 else "\ufffd"
        if head.isdigit():
            return chr(int(esc, 8) & 0xFF)
        if head == "c":
            return chr(ord(esc[1].upper()) ^ 0x40) if len(esc) > 1 else ""
        return _ANSI_SIMPLE.get(head, "\\" + head)

    return _ANSI_RE.sub(sub, body)


_UNQUOTED_ESC = re.compile(r"\\(.)", re.S)
_DQ_ESC = re.compile(r"\\([$`\"\\\n])")


class _Word:
    """A word being evaluated: segments of (text, quoted) and whether it depends on run-time values."""

    __slots__ = ("dynamic", "segs", "substituted")

    def __init__(self) -> None:
        self.segs: list[tuple[str, bool]] = []
        self.dynamic = False  # contains a parameter expansion whose value we do not know
        self.substituted = False  # contains a command/process substitution

    def value(self) -> str:
        return "".join(s for s, _ in self.segs)


class _Walker:
    def __init__(self, shell_depth: int) -> None:
        self.shell_depth = shell_depth
        self.commands: list[ParsedCommand] = []
        self.redirects: list[Redirect] = []
        self.dyn_redirects: set[int] = set()
        self.flags: set[Flag] = set()
        self.notes: list[str] = []
        self.functions: list[str] = []
        self._fn_bodies: list[tuple[str, int, int]] = []  # name, first and last command index of its body

    # ------------------------------------------------------------------ bookkeeping
    def flag(self, flag: Flag, note: str) -> None:
        self.flags.add(flag)
        if note not in self.notes:
            self.notes.append(note)

    def check_fork_bomb(self) -> None:
        for name, lo, hi in self._fn_bodies:
            if any(c.argv and c.argv[0] == name for c in self.commands[lo:hi]):
                self.flag(Flag.CATASTROPHIC, f"function {name!r} calls itself (fork bomb pattern)")

    # ------------------------------------------------------------------ statements
    def walk(self, node: Node, depth: int) -> None:
        if depth > MAX_NODE_DEPTH:
            self.flag(Flag.UNPARSEABLE, "command nests too deeply")
            return
        t = node.type
        if t in ("command", "pipeline") and _misparsed(node):
            # tree-sitter-bash joins `a | b | c<newline>d && e` into `c d` without an ERROR node
            self.flag(Flag.UNPARSEABLE, "the shell parser misread the command's structure")
        if t == "command":
            self._command(node, depth)
        elif t == "redirected_statement":
            for child in node.children:
                if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                    self._redirect(child, depth)
                else:
                    self.walk(child, depth + 1)
        elif t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self._redirect(node, depth)
        elif t == "variable_assignment":
            self._assignment(node, depth, standalone=True)
        elif t == "declaration_command":
            self._declaration(node, depth)
        elif t == "unset_command":
            self.commands.append(ParsedCommand(argv=tuple(_text(c) for c in node.children), text=_text(node)))
        elif t == "function_definition":
            name_node = node.child_by_field_name("name")
            name = _text(name_node) if name_node is not None else ""
            self.functions.append(name)
            lo = len(self.commands)
            for child in node.children:
                if child is not name_node:
                    self.walk(child, depth + 1)
            self._fn_bodies.append((name, lo, len(self.commands)))
        elif t in ("command_substitution", "process_substitution"):
            self.flag(Flag.DYNAMIC, f"command substitution {_short(_text(node))}")
            for child in node.children:
                self.walk(child, depth + 1)
        elif t in ("simple_expansion", "expansion"):
            for child in node.children:  # ${x:-$(id)} hides substitutions inside
                self.walk(child, depth + 1)
        elif t == "&":
            self.flag(Flag.BACKGROUND, "runs a command in the background (&)")
            self.flag(Flag.DYNAMIC, "runs a command in the background (&)")
        elif t in ("ERROR",) or node.is_missing:
            self.flag(Flag.UNPARSEABLE, "the shell parser found a syntax error")
            for child in node.children:
                self.walk(child, depth + 1)
        elif t == "comment":
            return
        elif t == "heredoc_body":
            for child in node.children:
                self.walk(child, depth + 1)
        else:
            for child in node.children:
                self.walk(child, depth + 1)

    def _assignment(self, node: Node, depth: int, standalone: bool) -> tuple[str, str]:
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None else _text(node).split("=", 1)[0]
        value_node = node.child_by_field_name("value")
        value = ""
        if value_node is not None:
            words = self._word(value_node, depth, split_braces=False)
            value = words[0].value() if words else ""
        if name_node is not None and name_node.type == "subscript":
            # a[$(id)]=x and friends: the subscript is evaluated
            self.walk(name_node, depth + 1)
            name = _text(name_node).split("[", 1)[0]
        if is_dangerous_env(name):
            where = "assigned in the shell" if standalone else "in front of a command"
            self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} {where}")
        return name, value

    def _declaration(self, node: Node, depth: int) -> None:
        argv: list[str] = []
        env: list[tuple[str, str]] = []
        for child in node.children:
            if child.type == "variable_assignment":
                name, value = self._assignment(child, depth, standalone=True)
                env.append((name, value))
                argv.append(f"{name}={value}")
            elif child.type == "variable_name":
                name = _text(child)
                argv.append(name)
                if is_dangerous_env(name):
                    self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} exported")
            elif child.is_named:
                words = self._word(child, depth)
                argv.extend(w.value() for w in words)
            else:
                argv.append(_text(child))
        self.commands.append(ParsedCommand(argv=tuple(argv), text=_text(node)))

    # ------------------------------------------------------------------ words
    def _word(self, node: Node, depth: int, split_braces: bool = True) -> list[_Word]:
        """Evaluate one argument node to its word(s) after quote removal (and brace expansion)."""
        w = _Word()
        self._word_into(node, w, depth, quoted=False)
        if split_braces and any(not q and "{" in s for s, q in w.segs):
            expanded = _brace_expand(w.segs)
            if expanded is None:
                self.flag(Flag.UNPARSEABLE, f"brace expansion too large: {_short(_text(node))}")
                return [w]
            if len(expanded) > 1 or expanded[0] != w.segs:
                out = []
                for segs in expanded:
                    nw = _Word()
                    nw.segs = segs
                    nw.dynamic, nw.substituted = w.dynamic, w.substituted
                    out.append(nw)
                return out
        return [w]

    def _word_into(self, node: Node, w: _Word, depth: int, quoted: bool) -> None:
        if depth > MAX_NODE_DEPTH:
            self.flag(Flag.UNPARSEABLE, "command nests too deeply")
            return
        t = node.type
        if t == "word" or t == "number" or t == "regex" or t == "extglob_pattern":
            text = _text(node)
            w.segs.append((_UNQUOTED_ESC.sub(r"\1", text) if "\\" in text else text, quoted))
        elif t == "raw_string":
            w.segs.append((_text(node)[1:-1], True))
        elif t == "ansi_c_string":
            w.segs.append((_ansi_c(_text(node)[2:-1]), True))
        elif t in ("string", "translated_string"):
            children = node.children
            if not any(c.is_named for c in children):
                w.segs.append(("", True))
            for child in children:
                if child.type == "string_content":
                    text = _text(child)
                    w.segs.append((_DQ_ESC.sub(r"\1", text) if "\\" in text else text, True))
                elif child.is_named:
                    self._word_into(child, w, depth + 1, quoted=True)
                elif child.type not in ('"', '$"'):
                    w.segs.append((_text(child), True))
        elif t == "concatenation":
            for child in node.children:
                self._word_into(child, w, depth + 1, quoted)
        elif t in ("simple_expansion", "expansion"):
            w.dynamic = True
            w.segs.append((_text(node), True))
            for child in node.children:
                self.walk(child, depth + 1)
        elif t in ("command_substitution", "process_substitution"):
            static = _static_heredoc_cat(node) if t == "command_substitution" else None
            if static is not None:
                w.segs.append((static, True))
                return
            w.substituted = True
            w.dynamic = True
            w.segs.append((_text(node), True))
            self.walk(node, depth + 1)
        elif t == "arithmetic_expansion":
            w.dynamic = True
            w.segs.append((_text(node), True))
            for child in node.children:
                self.walk(child, depth + 1)
        elif t == "brace_expression":
            w.segs.append((_text(node), quoted))
        else:
            # array, test operators and other oddities: keep the text, still look for substitutions inside
            w.segs.append((_text(node), quoted))
            for child in node.children:
                self.walk(child, depth + 1)

    # ------------------------------------------------------------------ redirects
    def _redirect(self, node: Node, depth: int) -> None:
        t = node.type
        fd: int | None = None
        op = ""
        target: str | None = None
        dynamic = False
        for child in node.children:
            ct = child.type
            if ct == "file_descriptor":
                try:
                    fd = int(_text(child))
                except ValueError:
                    fd = None
            elif ct in ("heredoc_body",):
                self.walk(child, depth + 1)
            elif ct in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self._redirect(child, depth + 1)
            elif ct in ("heredoc_start", "heredoc_end", "heredoc_content"):
                continue
            elif not child.is_named:
                op = op or _text(child)
            elif child.is_named:
                if t == "herestring_redirect":
                    self._word(child, depth + 1)  # substitutions inside count
                    continue
                words = self._word(child, depth + 1, split_braces=False)
                if words:
                    target = words[0].value()
                    dynamic = words[0].dynamic
        if t == "heredoc_redirect":
            op = op or "<<"
            target = None
        elif t == "herestring_redirect":
            op = "<<<"
            target = None
        if dynamic:
            self.dyn_redirects.add(len(self.redirects))
        self.redirects.append(Redirect(op=op, target=target, fd=fd))

    # ------------------------------------------------------------------ simple commands
    def _command(self, node: Node, depth: int) -> None:
        env: list[tuple[str, str]] = []
        words: list[_Word] = []
        name_seen = False
        for child in node.children:
            ct = child.type
            if ct == "variable_assignment" and not name_seen:
                env.append(self._assignment(child, depth + 1, standalone=False))
            elif ct in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self._redirect(child, depth + 1)
            elif ct == "command_name":
                name_seen = True
                for sub in child.children:
                    words.extend(self._word(sub, depth + 1))
            elif ct == "comment":
                continue
            elif child.is_named:
                words.extend(self._word(child, depth + 1))
            else:
                words.append(_lit(_text(child)))
        text = _text(node)
        if not words:
            return
        if words[0].dynamic:
            self.flag(Flag.DYNAMIC, f"the command name is computed at run time: {_short(words[0].value())}")
        argv = [w.value() for w in words]
        dyn = frozenset(i for i, w in enumerate(words) if w.dynamic)
        self._emit(argv, dyn, tuple(env), (), text, depth, False)

    def _emit(
        self,
        argv: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
        stdin_args: bool,
    ) -> None:
        """Record a simple command, peeling wrappers so the command that really runs is what we report."""
        for _ in range(MAX_UNWRAP):
            if not argv:
                return
            name = argv[0]
            if 0 in dyn:
                break
            base = name.rsplit("/", 1)[-1] if "/" in name else name
            peeled = _peel(base, argv, env)
            if peeled is None:
                break
            kind, rest, extra_env, note = peeled
            if note:
                self.flag(Flag.DYNAMIC if kind != "unparseable" else Flag.UNPARSEABLE, note)
            for k, _v in extra_env:
                if is_dangerous_env(k):
                    self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {k} set through {base}")
            env = env + extra_env
            shift = len(argv) - len(rest)
            dyn = frozenset(i - shift for i in dyn if i >= shift)
            if kind == "shell":
                self._shell_script(base, rest, dyn, env, wrappers, text, depth)
                return
            if kind == "keep":  # sudo & co: report the wrapper itself and the command it runs
                self.commands.append(
                    ParsedCommand(tuple(argv), env, wrappers, text, _shift_dyn(dyn, shift), stdin_args)
                )
            wrappers = (*wrappers, base)
            if base == "xargs":
                stdin_args = True
            argv = rest
        else:
            self.flag(Flag.UNPARSEABLE, "too many wrapper layers")
        if not argv:
            return
        name = argv[0]
        if name == "find" or name.endswith("/find"):
            self._find_exec(argv, dyn, env, wrappers, text, depth)
        if name in _DYNAMIC_BUILTINS:
            self.flag(Flag.DYNAMIC, _DYNAMIC_BUILTINS[name])
        elif name in ("hash",) and "-p" in argv[1:]:
            self.flag(Flag.DYNAMIC, "hash -p rebinds a command name to another program")
        elif name in ("mapfile", "readarray") and any(a.startswith("-C") for a in argv[1:]):
            self.flag(Flag.DYNAMIC, f"{name} -C runs a callback")
        elif name == "coproc":
            self.flag(Flag.BACKGROUND, "coproc runs a command in the background")
            self.flag(Flag.DYNAMIC, "coproc runs a command in the background")
            if len(argv) > 1:
                self._emit(
                    argv[1:],
                    frozenset(i - 1 for i in dyn if i >= 1),
                    env,
                    (*wrappers, "coproc"),
                    text,
                    depth,
                    stdin_args,
                )
            return
        self.commands.append(ParsedCommand(tuple(argv), env, wrappers, text, dyn, stdin_args))

    def _find_exec(
        self,
        argv: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
    ) -> None:
        i = 1
        while i < len(argv):
            if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(argv) and argv[j] not in (";", "+"):
                    j += 1
                inner = argv[i + 1 : j]
                if inner:
                    inner_dyn = frozenset(k - i - 1 for k in dyn if i + 1 <= k < j)
                    self._emit(list(inner), inner_dyn, env, (*wrappers, "find"), text, depth, True)
                i = j + 1
            else:
                i += 1

    def _shell_script(
        self,
        shell: str,
        rest: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
    ) -> None:
        """``bash -c 'script'``: parse the script itself, with a depth limit."""
        script = rest[0]
        if 0 in dyn:
            self.flag(Flag.DYNAMIC, f"{shell} -c runs a script computed at run time")
            self.commands.append(ParsedCommand((shell, "-c", script), env, wrappers, text, frozenset({2})))
            return
        if self.shell_depth + 1 > MAX_SHELL_DEPTH:
            self.flag(Flag.UNPARSEABLE, f"{shell} -c nested too deeply")
            self.commands.append(ParsedCommand((shell, "-c", script), env, wrappers, text))
            return
        inner = _analyse(script, self.shell_depth + 1)
        for c in inner.commands:
            self.commands.append(
                ParsedCommand(
                    c.argv, env + c.env, (*wrappers, shell, *c.wrappers), c.text, c.dynamic_args, c.stdin_args
                )
            )
        base = len(self.redirects)
        self.redirects.extend(inner.redirects)
        self.dyn_redirects.update(base + i for i in inner.dynamic_redirects)
        for f in inner.flags:
            self.flags.add(f)
        for n in inner.notes:
            if n not in self.notes:
                self.notes.append(n)
        self.functions.extend(inner.functions)


def _misparsed(node: Node) -> bool:
    """A pipeline holding a list, or one command whose words sit on different lines (no ``\\`` continuation)."""
    if node.type == "pipeline":
        return any(c.type == "list" for c in node.children)
    src = node.text or b""
    base = node.start_byte
    prev_end: int | None = None
    for c in node.children:
        if prev_end is not None:
            gap = src[prev_end - base : c.start_byte - base].replace(b"\\\n", b"")
            if b"\n" in gap:
                return True
        prev_end = c.end_byte
    return False


def _shift_dyn(dyn: frozenset[int], shift: int) -> frozenset[int]:
    return frozenset(i + shift for i in dyn)


def _lit(text: str) -> _Word:
    w = _Word()
    w.segs.append((text, True))
    return w


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_DYNAMIC_BUILTINS = {
    "eval": "eval runs a string as shell code",
    "source": "source runs another file's shell code",
    ".": "'.' runs another file's shell code",
    "trap": "trap installs code that runs later",
    "alias": "alias rebinds command names",
    "enable": "enable loads or toggles builtins",
    "fc": "fc re-runs commands from history",
    "bind": "bind can attach shell code to keys",
    "complete": "complete can attach commands to completion",
}

# ---------------------------------------------------------------------------- wrappers

# options of each wrapper that take a separate value
_TIMEOUT_OPTS = {"-s", "--signal", "-k", "--kill-after"}
_NICE_OPTS = {"-n", "--adjustment"}
_STDBUF_OPTS = {"-i", "-o", "-e", "--input", "--output", "--error"}
_IONICE_OPTS = {"-c", "-n", "--class", "--classdata"}
_XARGS_OPTS = {
    "-a",
    "-d",
    "-E",
    "-I",
    "-L",
    "-n",
    "-P",
    "-s",
    "--arg-file",
    "--delimiter",
    "--eof",
    "--replace",
    "--max-lines",
    "--max-args",
    "--max-procs",
    "--max-chars",
    "--process-slot-var",
}
_ENV_OPTS = {
    "-u",
    "--unset",
    "-C",
    "--chdir",
    "-S",
    "--split-string",
    "--block-signal",
    "--default-signal",
    "--ignore-signal",
}
_SHELL_OPTS_WITH_ARG = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
_SUDO_OPTS = {
    "-u",
    "-g",
    "-h",
    "-p",
    "-C",
    "-r",
    "-t",
    "-U",
    "-D",
    "-T",
    "--user",
    "--group",
    "--host",
    "--prompt",
    "--close-from",
    "--role",
    "--type",
    "--other-user",
    "--chdir",
    "--command-timeout",
}

Peeled = tuple[str, list[str], tuple[tuple[str, str], ...], str]


def _skip_opts(args: list[str], with_value: set[str], stop_at_first_plain: bool = True) -> list[str] | None:
    """Drop leading options (and the values of those that take one); None when nothing is left."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in with_value:
            i += 2
            continue
        if a.startswith("--") and "=" in a:
            i += 1
            continue
        # short option with an attached value (-n5, -k10) or a cluster of flags
        i += 1
    rest = args[i:]
    return rest or None


def _peel(base: str, argv: list[str], env: tuple[tuple[str, str], ...]) -> Peeled | None:
    """If ``argv`` is a wrapper, return (kind, inner argv, env it sets, note); else None."""
    args = argv[1:]
    if base in ("timeout",):
        rest = _skip_opts(args, _TIMEOUT_OPTS)
        if rest is None or len(rest) < 2:
            return None
        return ("wrap", rest[1:], (), "")
    if base in ("time", "nohup", "builtin"):
        rest = _skip_opts(args, set())
        return ("wrap", rest, (), "") if rest else None
    if base == "nice":
        rest = _skip_opts(args, _NICE_OPTS)
        return ("wrap", rest, (), "") if rest else None
    if base == "stdbuf":
        rest = _skip_opts(args, _STDBUF_OPTS)
        return ("wrap", rest, (), "") if rest else None
    if base == "ionice":
        if any(a in ("-p", "-P", "-u", "--pid", "--pgid", "--uid") for a in args):
            return None
        rest = _skip_opts(args, _IONICE_OPTS)
        return ("wrap", rest, (), "") if rest else None
    if base == "command":
        if any(a in ("-v", "-V") for a in args[:2]):
            return None  # `command -v x` only looks a name up
        rest = _skip_opts(args, set())
        return ("wrap", rest, (), "") if rest else None
    if base == "exec":
        rest = _skip_opts(args, {"-a"})
        return ("wrap", rest, (), "") if rest else None
    if base == "env":
        return _peel_env(args)
    if base == "xargs":
        rest = _skip_opts(args, _XARGS_OPTS)
        return ("wrap", rest or ["echo"], (), "")
    if base in ("sudo", "doas"):
        rest = _skip_opts(args, _SUDO_OPTS)
        return ("keep", rest, (), "") if rest else None
    if base in SHELLS:
        return _peel_shell(base, args)
    return None


def _peel_env(args: list[str]) -> Peeled | None:
    i = 0
    note = ""
    assigns: list[tuple[str, str]] = []
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-S", "--split-string") or a.startswith(("-S", "--split-string=")):
            return ("unparseable", [], (), "env -S splits a string into a command we do not parse")
        if a in ("-C", "--chdir") or a.startswith("--chdir="):
            note = "env -C changes the directory paths resolve against"
        if a in _ENV_OPTS:
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        break
    while i < len(args) and "=" in args[i] and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", args[i]):
        k, v = args[i].split("=", 1)
        assigns.append((k, v))
        i += 1
    rest = args[i:]
    if not rest:
        return None if not assigns else ("wrap", ["env"], tuple(assigns), note)
    return ("wrap", rest, tuple(assigns), note)


def _peel_shell(base: str, args: list[str]) -> Peeled | None:
    """``bash [-opts] -c SCRIPT [name args...]`` -> ("shell", [SCRIPT, ...])."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _SHELL_OPTS_WITH_ARG:
            i += 2
            continue
        if a == "--":
            return None
        if a.startswith("-") and len(a) > 1 and not a.startswith("--"):
            if "c" in a[1:]:
                rest = args[i + 1 :]
                if not rest:
                    return None
                return ("shell", rest, (), "")
            i += 1
            continue
        if a.startswith("--"):
            i += 1
            continue
        return None  # bash script.sh: runs a file
    return None


# ---------------------------------------------------------------------------- brace expansion


def _brace_expand(segs: list[tuple[str, bool]]) -> list[list[tuple[str, bool]]] | None:
    """Bash brace expansion over unquoted text: ``{a,b}`` and ``{1..3}``; None when the result is too big."""
    chars: list[tuple[str, bool]] = [(ch, q) for s, q in segs for ch in s]
    results = _expand_chars(chars, 0)
    if results is None:
        return None
    out = []
    for r in results:
        merged: list[tuple[str, bool]] = []
        for ch, q in r:
            if merged and merged[-1][1] == q:
                merged[-1] = (merged[-1][0] + ch, q)
            else:
                merged.append((ch, q))
        out.append(merged or [("", True)])
    return out


def _expand_chars(chars: list[tuple[str, bool]], level: int) -> list[list[tuple[str, bool]]] | None:
    if level > 8:
        return None
    n = len(chars)
    for start in range(n):
        ch, q = chars[start]
        if ch != "{" or q or (start and chars[start - 1] == ("$", False)):
            continue
        depth = 0
        commas: list[int] = []
        end = -1
        for j in range(start + 1, n):
            c, cq = chars[j]
            if cq:
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                if depth == 0:
                    end = j
                    break
                depth -= 1
            elif c == "," and depth == 0:
                commas.append(j)
        if end < 0:
            continue
        prefix, suffix = chars[:start], chars[end + 1 :]
        alternatives: list[list[tuple[str, bool]]]
        if commas:
            bounds = [start, *commas, end]
            alternatives = [chars[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)]
        else:
            body = "".join(c for c, _ in chars[start + 1 : end])
            m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])", body)
            if not m:
                continue
            if m.group(4):
                a, b = ord(m.group(4)), ord(m.group(5))
                step = 1 if b >= a else -1
                items = [chr(x) for x in range(a, b + step, step)]
            else:
                a, b = int(m.group(1)), int(m.group(2))
                inc = abs(int(m.group(3) or 1)) or 1
                if abs(b - a) // inc + 1 > MAX_BRACE_WORDS:
                    return None
                step = inc if b >= a else -inc
                items = [str(x) for x in range(a, b + (1 if step > 0 else -1), step)]
            alternatives = [[(c, False) for c in item] for item in items]
        out: list[list[tuple[str, bool]]] = []
        tails = _expand_chars(suffix, level + 1)
        if tails is None:
            return None
        for alt in alternatives:
            heads = _expand_chars(alt, level + 1)
            if heads is None:
                return None
            for h in heads:
                for tail in tails:
                    out.append(prefix + h + tail)
                    if len(out) > MAX_BRACE_WORDS:
                        return None
        return out
    return [chars]


def _static_heredoc_cat(node: Node) -> str | None:
    """``$(cat <<'EOF' ... EOF)`` is static text (Claude's commit-message idiom); return it, else None."""
    named = [c for c in node.children if c.is_named]
    if len(named) != 1 or named[0].type != "redirected_statement":
        return None
    stmt = named[0]
    parts = [c for c in stmt.children if c.is_named]
    if len(parts) != 2 or parts[0].type != "command" or parts[1].type != "heredoc_redirect":
        return None
    cmd = parts[0]
    cmd_named = [c for c in cmd.children if c.is_named]
    if len(cmd_named) != 1 or _text(cmd_named[0]) != "cat":
        return None
    redirect = parts[1]
    start = body = None
    for c in redirect.children:
        if c.type == "heredoc_start":
            start = c
        elif c.type == "heredoc_body":
            body = c
        elif c.is_named and c.type != "heredoc_end":
            return None
    if start is None or (_text(start)[:1] not in ("'", '"') and "\\" not in _text(start)):
        return None
    if body is None:
        return ""
    if any(c.is_named and c.type != "heredoc_content" for c in body.children):
        return None
    return _text(body).rstrip("\n")
