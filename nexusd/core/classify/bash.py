"""Shell commands parsed with tree-sitter-bash into the simple commands they really run.

Prefix matching on a raw command string is how every agent's gate was bypassed, so we parse: every
simple command across every separator and compound construct, every redirect, and every construct
that cannot be judged statically (substitutions, expansion in command position, eval, source,
backgrounding ...). Wrappers (``timeout``, ``env``, ``xargs``, ``bash -c`` ...) are peeled so rules
see the real command; their layouts are data in ``wrappers.py``, and a wrapper option we do not know stops
the peeling (the wrapper stays an unknown program: fail closed).

Words are evaluated the way bash does (tests/core/classify/test_bash_differential.py holds us to
``/bin/bash`` itself): quote removal, ``$'...'`` (cut at NUL), backslash-newline, brace expansion, tilde
forms. What we cannot evaluate is marked dynamic: parameter expansions, arithmetic that reads a variable
whose text is not a known integer (``x='a[$(id)]'; (( x ))`` runs id), globs after glob options change.

Plain commands (words and ``'...'`` strings joined by ``;`` ``&&`` ``||`` ``|``: most of what agents run) are
split without tree-sitter into the same words (``_plain_split``; tests/core/classify/test_bash_plain.py
holds both paths to one answer), which keeps classification within its time budget.

``parse`` is pure and cached with a module-level ``functools.lru_cache`` keyed on the command string
(the one deliberate piece of module state, together with the reusable tree-sitter parser: the daemon
classifies on one thread).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator

import msgspec
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from nexusd.core.classify.wrappers import WRAPPERS, Wrapper
from nexusd.core.model import Command, Flag, Redirect, Requirement

MAX_COMMAND_BYTES = 64 * 1024  # longer input is not parsed at all (our parser-timeout equivalent)
# tree-sitter-bash 0.25 corrupts memory (a segfault some parses later) on characters outside the Basic
# Multilingual Plane; lone surrogates are not even valid UTF-8. Such input is never handed to the
# parser: it is unparseable, so a person decides (tests/core/classify/test_parser_crash.py).
_UNSAFE_FOR_PARSER = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")
MAX_NODE_DEPTH = 200  # deeper trees are refused rather than walked
# Simple commands and their words in one command string, nested scripts and each loop value's pass over a
# body included: past either the command is unparseable. Checking a word costs more the more words came
# before it in places (links made earlier, paths seen), so an agent could fill its 64 KB with 3,000 `ln -s`
# or 9,000 `grep -r` operands and hold the daemon's one thread for seconds; no real command comes close.
MAX_SIMPLE_COMMANDS = 256
MAX_WORDS = 2048


class _TooMuch(Exception):
    """The command has more simple commands or words than one decision classifies."""


class _Budget:
    """What is left of MAX_SIMPLE_COMMANDS and MAX_WORDS for one command string, nested scripts included."""

    __slots__ = ("commands", "words")

    def __init__(self) -> None:
        self.commands = MAX_SIMPLE_COMMANDS
        self.words = MAX_WORDS

    def spend(self, words: int) -> None:
        self.commands -= 1
        self.words -= words
        if self.commands < 0 or self.words < 0:
            raise _TooMuch


MAX_SHELL_DEPTH = 4  # nested `bash -c` levels parsed recursively
MAX_BRACE_WORDS = 64  # brace expansion larger than this is refused
MAX_UNWRAP = 16  # wrapper layers peeled from one command

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)

SHELLS = frozenset(
    {
        "sh",
        "bash",
        "rbash",
        "zsh",
        "dash",
        "ksh",
        "ksh93",
        "mksh",
        "ash",
        "busybox-sh",
        "yash",
        "posh",
        "fish",
        "csh",
        "tcsh",
    }
)
# shells whose -c script is not bash: parsed as bash only when it is plain words (else a person decides)
FOREIGN_SHELLS = frozenset({"fish", "csh", "tcsh", "zsh"})
# POSIX shells without bash's $'...' quoting (dash, posh): such a script means something else there
NO_ANSI_C_SHELLS = frozenset({"dash", "posh", "sh"})  # sh is dash on Debian and Ubuntu
_PLAIN_SCRIPT = re.compile(r"[A-Za-z0-9_./:@%+,= \t-]*")

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
        # more variables that make a program load or run code it was not asked to
        "GCONV_PATH",  # iconv loads modules from it
        "GLIBC_TUNABLES",
        "LUA_INIT",
        "LUA_PATH",
        "LUA_CPATH",
        "R_PROFILE",
        "R_PROFILE_USER",
        "PHPRC",
        "PHP_INI_SCAN_DIR",
        "DOTNET_STARTUP_HOOKS",
        "CORECLR_PROFILER_PATH",
        "GOFLAGS",  # -toolexec runs a program
        "RUSTC_WRAPPER",
        "RUSTC",
        "KUBECONFIG",  # exec credential plugins
        "DOCKER_CONFIG",  # credential helpers
        "AWS_CONFIG_FILE",  # credential_process
        "VIMINIT",
        "EXINIT",
        "MYVIMRC",
        "TAR_OPTIONS",  # --to-command, --checkpoint-action=exec=
        "RSYNC_RSH",
        "RSYNC_CONNECT_PROG",
        "CVS_RSH",
        "FCEDIT",
        "SUDO_EDITOR",
        "CONFIG_SHELL",
        "PYTHONWARNINGS",  # a warning category names a module to import
        "PYTHONUSERBASE",
        "GEM_HOME",
        "GEM_PATH",
        "BUNDLE_GEMFILE",
        "CLASSPATH",
        "MAVEN_OPTS",
        "GRADLE_OPTS",
        "BASH_LOADABLES_PATH",
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
    stdin: str = ""  # literal text fed on standard input (model.Command.stdin)
    feeder: tuple[str, ...] = ()  # the xargs (argv, options included) that hands this command its arguments
    # calls a shell function this command defined before (its body was walked as commands of their own)
    function_call: bool = False

    def to_command(self, opaque: bool = False, requirement: Requirement = Requirement.READ_ONLY) -> Command:
        return Command(
            argv=self.argv,
            env=self.env,
            wrappers=self.wrappers,
            text=self.text,
            opaque=opaque,
            requirement=requirement,
            stdin=self.stdin,
        )


class ShellAnalysis(msgspec.Struct, frozen=True):
    """Everything the classifier needs from one shell command string."""

    commands: tuple[ParsedCommand, ...]
    redirects: tuple[Redirect, ...]
    dynamic_redirects: frozenset[int] = frozenset()  # indices of redirects whose target depends on a variable
    flags: frozenset[Flag] = frozenset()
    notes: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()  # names of shell functions the command defines
    # a variable word ("$f", "${a[0]}", "${F:-x}") -> the literal values it may take, from assignments in this
    # command (``f=~/.ssh/id_rsa; cat "$f"``): deny and ask rules see them; the word stays dynamic
    maybe: tuple[tuple[str, tuple[str, ...]], ...] = ()


@functools.lru_cache(maxsize=4096)
def parse(command: str) -> ShellAnalysis:
    """Parse a command string; never raises (failures come back as Flag.UNPARSEABLE)."""
    try:
        return _analyse(command, 0)
    except _TooMuch:
        note = f"too many commands or words to check (over {MAX_SIMPLE_COMMANDS} commands or {MAX_WORDS} words)"
        return ShellAnalysis((), (), flags=frozenset({Flag.UNPARSEABLE}), notes=(note,))
    except RecursionError:
        return ShellAnalysis((), (), flags=frozenset({Flag.UNPARSEABLE}), notes=("command nests too deeply",))
    except Exception as exc:  # the classifier must never raise: fail closed instead
        return ShellAnalysis(
            (), (), flags=frozenset({Flag.UNPARSEABLE}), notes=(f"internal error while parsing: {exc!r}",)
        )


def _analyse(
    command: str, shell_depth: int, glob_changed: bool = False, fast: bool = True, budget: _Budget | None = None
) -> ShellAnalysis:
    """The analysis of one script; ``fast=False`` always uses tree-sitter (the plain path's tests compare)."""
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
    walker = _Walker(shell_depth, budget)
    walker.source = src
    # asked at every command node: scanning the whole source each time made 2,800 small commands cost 0.4 s
    walker.multiline, walker.heredocs = b"\n" in src, b"<<" in src
    # shopt globstar/dotglob/extglob/nullglob..., set -f/+f or GLOBIGNORE anywhere in the command change what
    # every glob matches (loops make "earlier" meaningless): then every glob word is dynamic
    walker.glob_changed = glob_changed or (
        ("shopt" in command or "set" in command or "GLOB" in command or "BASHOPTS" in command or "noglob" in command)
        and _GLOB_CHANGERS.search(command) is not None
    )
    plain = _plain_split(command) if fast and _PLAIN_CHARS.fullmatch(command) else None
    if plain is not None:
        for tokens, text, stdin in plain:
            if "'" in text or '"' in text or "~" in text:
                # a quoted * ? [ ~ or { is no glob, tilde or brace, an unquoted ~ may be the home directory or
                # not (~+, a=~): the word checks need the quoting
                walker._simple(_plain_words(tokens), [], text, 0, stdin)
            else:  # nothing to expand: the words are the argv (what _simple would find, without its work)
                walker._emit(tokens, _NO_INDICES, (), (), text, 0, False, _NO_INDICES, stdin)
    else:
        root = _PARSER.parse(src).root_node
        if root.has_error:
            walker.flag(Flag.UNPARSEABLE, "the shell parser found a syntax error")
        if (b"\\ " in src or b"\\\t" in src) and _dropped_escape(root, src):
            walker.flag(Flag.UNPARSEABLE, "the shell parser dropped part of a word (an escaped blank)")
        walker.walk(root, 0)
    walker.check_fork_bomb()
    walker.check_arith()
    return ShellAnalysis(
        tuple(walker.commands),
        tuple(walker.redirects),
        frozenset(walker.dyn_redirects),
        frozenset(walker.flags),
        tuple(walker.notes),
        tuple(walker.functions),
        tuple(walker.maybe.items()),
    )


# The common command needs no parser. Plain words (letters, digits and _ . / = : , @ + ~ -), whole '...'
# strings of printable ASCII, whole "..." strings of printable ASCII without $ ` \ ! ' or " (nothing in them
# expands: literal text, as '...' is), blanks and the separators ; && || | mean one thing to bash wherever
# they stand: no expansion, glob, quote removal beyond the quotes, redirect or keyword can hide in them (a
# ~ is judged by the walker's own word checks, as for a parsed word). Such a command is split here into the
# words tree-sitter would give the walker, and everything after that (wrappers, nested scripts, knowledge)
# is the same code. Anything else, and any case below that is not certain (a syntax error, a keyword, an
# assignment, a word tree-sitter may call a number), goes to tree-sitter.
# tests/core/classify/test_bash_plain.py holds both paths to the same analysis.
_PLAIN_CHARS = re.compile(
    r"[A-Za-z0-9_./=:,@+~ ;|&-]*(?:(?:'[ -&(-~]*'|\"[ #%&(-\[\]-_a-~]*\")[A-Za-z0-9_./=:,@+~ ;|&-]*)*"
)
_PLAIN_OPS = re.compile(r"(&&|\|\||[;|&])")
_PLAIN_TOKEN = re.compile(
    r"(&&|\|\||[;|&])|((?:[A-Za-z0-9_./=:,@+~-]+|'[ -&(-~]*'|\"[ #%&(-\[\]-_a-~]*\")+)|( +)|(.)", re.S
)
_PLAIN_SEG = re.compile(r"'([ -&(-~]*)'|\"([ #%&(-\[\]-_a-~]*)\"|([^'\"]+)")
_NUMBERISH = re.compile(r"[-+]?[0-9]")
# command names tree-sitter reads as one plain word (it lexes a name with @, + or = or a bare - its own way)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./,:-]*")
# words tree-sitter reads as syntax (keywords, declaration and unset commands) in command position
_NOT_PLAIN_NAMES = frozenset(
    {
        "if",
        "then",
        "elif",
        "else",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "declare",
        "typeset",
        "export",
        "readonly",
        "local",
        "unset",
        "unsetenv",
        "let",
        "time",
        "coproc",
        "!",
        "{",
        "}",
        "[[",
        "]]",
    }
)

_NO_INDICES: frozenset[int] = frozenset()

PlainCommand = tuple[list[str], str, "tuple[str, str] | None"]  # tokens as written, source text, piped stdin


def _plain_split(command: str) -> list[PlainCommand] | None:
    """The simple commands of a plain command as (tokens, text, piped stdin); None: tree-sitter must parse it."""
    stages: list[tuple[list[str], str, str]] = []  # words, source text, the operator after it
    if "'" not in command and '"' not in command:
        parts = _PLAIN_OPS.split(command)  # text, operator, text, ...
        last = len(parts) - 1
        for k in range(0, last + 1, 2):
            seg = parts[k]
            stages.append((seg.split(), seg.strip(" "), parts[k + 1] if k < last else ""))
    else:
        toks: list[str] = []
        start = end = 0
        for m in _PLAIN_TOKEN.finditer(command):
            op, word, _blank, bad = m.groups()
            if bad is not None:
                return None  # an unterminated quote
            if word is not None:
                if not toks:
                    start = m.start()
                toks.append(word)
                end = m.end()
            elif op is not None:
                stages.append((toks, command[start:end], op))
                toks = []
        stages.append((toks, command[start:end], ""))
    out: list[PlainCommand] = []
    producer: list[str] | None = None  # the previous stage of this pipeline
    for k, (words, text, op) in enumerate(stages):
        if not words:
            if k == len(stages) - 1 and k > 0 and stages[k - 1][2] == ";":
                break  # `ls;`: a trailing separator
            return None  # empty, `; ls`, `a && || b`, a trailing `|`: syntax errors
        if op == "&":
            return None  # in the background: tree-sitter's (and flagged there)
        cmd = _plain_command(words, text, producer)
        if cmd is None:
            return None
        out.append(cmd)
        producer = words if op == "|" else None
    return out


def _plain_command(tokens: list[str], text: str, producer: list[str] | None) -> PlainCommand | None:
    first = tokens[0]
    if _PLAIN_NAME.fullmatch(first) is None or first in _NOT_PLAIN_NAMES:
        return None  # an assignment, a quoted, reserved or odd command name: tree-sitter's
    if "==" in text or "=~" in text:
        return None  # tree-sitter reads a bare == or =~ as a test operator
    stdin: tuple[str, str] | None = None
    if producer is not None:
        stdin = _plain_piped(producer)
        if stdin is None:
            return None
    return tokens, text, stdin


def _plain_words(tokens: list[str]) -> list[_Word]:
    """Plain tokens as the walker's words: unquoted runs and '...' strings (quoted) in order."""
    words: list[_Word] = []
    for tok in tokens:
        w = _Word()
        if "'" not in tok and '"' not in tok:
            w.segs.append((tok, False))
        else:
            for seg in _PLAIN_SEG.finditer(tok):
                single, double, bare = seg.groups()
                if single is not None:
                    w.segs.append((single, True))
                elif double is not None:
                    # as the walker reads a "..." node: an empty quoted segment opens it
                    w.segs.append(("", True))
                    if double:
                        w.segs.append((double, True))
                else:
                    w.segs.append((bare, False))
        words.append(w)
    return words


_PRINTF_EACH = frozenset({"%s\\n", "%s\n", "%s "})  # each argument, then a separator xargs splits at ("%s" glues them)


def _plain_piped(words: list[str]) -> tuple[str, str] | None:
    """``_piped_text`` for a plain stage: echo/printf of plain words and whole '...' strings, else unknown."""
    if words[0] not in ("echo", "printf"):
        return ("unknown", "")
    out: list[str] = []
    for t in words[1:]:
        if len(t) >= 2 and t[0] == "'" and t.find("'", 1) == len(t) - 1:
            out.append(t[1:-1])  # one raw string
        elif len(t) >= 2 and t[0] == '"' and t.find('"', 1) == len(t) - 1 and "%" not in t:
            out.append(t[1:-1])  # one "..." string (nothing in it expands)
        elif "'" in t or '"' in t or "%" in t:
            return ("unknown", "")
        elif _NUMBERISH.match(t):
            return None  # tree-sitter may read it as a number node (unknown) or a word (text)
        else:
            out.append(t)
    if words[0] == "printf" and len(out) > 1 and out[0] in _PRINTF_EACH:
        return ("text", "\n".join(out[1:]))  # printf '%s\n' a b: one word a line (as _piped_text)
    if (out and out[0].startswith("-")) or (words[0] == "printf" and len(out) != 1):
        return ("unknown", "")
    return ("text", " ".join(out))


def _dropped_escape(root: Node, src: bytes) -> bool:
    """Whether tree-sitter left a ``\\<blank>`` out of every token (``echo a \\ ;`` loses the word " ")."""
    for m in re.finditer(rb"\\[ \t]", src):
        n = root.descendant_for_byte_range(m.start(), m.start() + 1)
        if n is None or n.child_count > 0:
            return True
    return False


def _text(node: Node) -> str:
    raw = node.text  # a fresh copy of the bytes on every access: read it once
    return raw.decode("utf-8", "surrogateescape") if raw is not None else ""


_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ANSI_SIMPLE.update({"v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"})
_ANSI_RE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S)


def _ansi_c(body: str) -> tuple[str, bool]:
    """Decode ``$'...'`` the way bash does, so ``$'\\x72m'`` is seen as ``rm``; (text, cannot-be-text).

    Bash truncates the string at a NUL (``$'git\\0status'`` is ``git``). Bytes 0x80-0xff and code points
    beyond the BMP are not text we can compare with what bash passes on, so the word becomes dynamic.
    """
    odd = False

    def sub(m: re.Match[str]) -> str:
        nonlocal odd
        esc = m.group(1)
        head = esc[0]
        if head in "xuU":
            code = int(esc[1:], 16)
            if (head == "x" and code >= 0x80) or code >= 0xD800:
                odd = True
                return "\ufffd"
            return chr(code)
        if head.isdigit():
            code = int(esc, 8) & 0xFF
            if code >= 0x80:
                odd = True
                return "\ufffd"
            return chr(code)
        if head == "c":
            if len(esc) < 2:
                return "\\c"
            ch = esc[1]
            if ch == "?":
                return "\x7f"
            if ord(ch) >= 0x80 or ch == "\\":
                odd = True
                return "\ufffd"
            return chr(ord(ch.upper()) & 0x1F)
        return _ANSI_SIMPLE.get(head, "\\" + head)

    text = _ANSI_RE.sub(sub, body)
    nul = text.find("\x00")
    if nul >= 0:
        text = text[:nul]
    return text, odd


_ANSI_END = re.compile(r"\$'(?:[^'\\]|\\.)*'\Z", re.S)  # one whole $'...' string, nothing after it
_DQ_ESC = re.compile(r"\\([$`\"\\\n])")
_SPECIAL_WORD = re.compile(r"[*?\[~]|[+@!]\(")  # a word that may glob or hold a tilde (the rest is plain text)
_GLOBBY = re.compile(r"[*?\[]|[+@!]\(")  # quick test: could the unquoted text be a pattern at all
_BRACKET = re.compile(r"\[.+\]", re.S)
_EXTGLOB = re.compile(r"[+@!]\(")
# what changes the meaning of a glob: shopt (globstar, dotglob, extglob, nullglob, failglob, nocaseglob ...),
# set -f / +f / -o noglob, GLOBIGNORE, GLOBSORT
_GLOB_CHANGERS = re.compile(r"\bshopt\b|\bnoglob\b|\bset\b[^;&|\n]*\s[-+][A-Za-z]*f|GLOBIGNORE|GLOBSORT|BASHOPTS")


def _dq_unescape(text: str) -> str:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline (a backslash-newline vanishes)."""
    return _DQ_ESC.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _unquoted_segs(text: str) -> list[tuple[str, bool]]:
    """An unquoted word's text as segments: a backslash quotes the next character, backslash-newline vanishes."""
    if "\\" not in text:
        return [(text, False)]
    out: list[tuple[str, bool]] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            if buf:
                out.append(("".join(buf), False))
                buf = []
            if text[i + 1] != "\n":
                out.append((text[i + 1], True))
            i += 2
            continue
        buf.append(ch)
        i += 1
    if buf:
        out.append(("".join(buf), False))
    return out


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ELEMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[[0-9]\]")  # a[0]: an indexed element (bound only when certain)
# $name, ${name}, ${name[sub]}, ${name:-literal} / ${name-literal} / ${name:=literal}
_VAR_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]}]*\])?(?::?[-=]([^}$`]*))?\}")
_INTEGER = re.compile(r"[-+]?[0-9]+|")
# a maximal run of word characters not just after $ or { (a name standing as itself); see _Walker._mentions
_MENTION = re.compile(r"(?<![$\w{])\w+")
_WORD_ONLY = re.compile(r"\w+")
# variables bash itself keeps numeric (an assignment in the command makes them ordinary again)
_NUMERIC_SPECIALS = frozenset(
    {"RANDOM", "SRANDOM", "LINENO", "SECONDS", "BASHPID", "PPID", "UID", "EUID", "EPOCHSECONDS", "OPTIND"}
)
_ARITH_LENGTHS = re.compile(r"\$\{#[A-Za-z_][A-Za-z0-9_]*(?:\[[@*]\])?\}|\$#")  # lengths are numbers
_ARITH_NUMBERS = re.compile(r"(?<![$\w])[0-9]+#[0-9A-Za-z@_]+|(?<![$\w])0[xX][0-9A-Fa-f]+|(?<![$\w])[0-9]+")
_ARITH_NAMES = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)|\$\{?([0-9]+)|(?<![\w$])([A-Za-z_][A-Za-z0-9_]*)")
_ARITH_ASSIGN = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)|(?:\+\+|--)\s*([A-Za-z_][A-Za-z0-9_]*)"
)
_EXPANSION = re.compile(r"\$\{(!?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?(.*)\}", re.S)
_ARITH_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})


class _Word:
    """A word being evaluated: segments of (text, quoted) and whether it depends on run-time values."""

    __slots__ = ("dynamic", "globbed", "segs", "substituted")

    def __init__(self) -> None:
        self.segs: list[tuple[str, bool]] = []
        self.dynamic = False  # contains a parameter expansion whose value we do not know
        self.substituted = False  # contains a command/process substitution
        self.globbed = False  # holds a loop variable whose values come from a glob (any matching name)

    def value(self) -> str:
        segs = self.segs
        return segs[0][0] if len(segs) == 1 else "".join([s for s, _ in segs])

    def has_glob(self, extglob: bool) -> bool:
        """Whether bash would treat the word as a pattern (an unquoted * ? or [...], or an extglob)."""
        unquoted = "".join(t for t, q in self.segs if not q)
        if not unquoted or _GLOBBY.search(unquoted) is None:
            return False
        # quoted characters are masked so that only unquoted ones can open or close a pattern
        masked = "".join(t if not q else "\x01" * len(t) for t, q in self.segs)
        if "*" in masked or "?" in masked or _BRACKET.search(masked):
            return True
        return bool(extglob and _EXTGLOB.search(masked))


class _Walker:
    def __init__(self, shell_depth: int, budget: _Budget | None = None) -> None:
        self.budget = budget if budget is not None else _Budget()
        self.shell_depth = shell_depth
        self.commands: list[ParsedCommand] = []
        self.redirects: list[Redirect] = []
        self.dyn_redirects: set[int] = set()
        self.flags: set[Flag] = set()
        self.notes: list[str] = []
        self._note_set: set[str] = set()  # the notes again, for the duplicate test (a list scan was quadratic)
        self.functions: list[str] = []
        self._fn_bodies: list[tuple[str, int, int]] = []  # name, first and last command index of its body
        self.glob_changed = False  # glob options may differ from the defaults: glob words are dynamic
        # every variable assigned in this command -> whether every value it gets is a plain integer (an
        # arithmetic context evaluates a variable's text, so `x='a[$(id)]'; (( x ))` runs id)
        self.numeric: dict[str, bool] = {}
        self.arith_refs: list[tuple[str, str]] = []  # (variable, context) read by arithmetic
        self.int_vars: set[str] = set()  # declare -i: every assignment is arithmetic
        self.assoc_vars: set[str] = set()  # declare -A: subscripts are strings, not arithmetic
        self.namerefs: set[str] = set()  # declare -n: assignments go to another variable
        # loop variable -> (literal value, from a glob, starts with a ~ bash expanded to the home directory)
        self.bindings: dict[str, tuple[str, bool, bool]] = {}
        self.source = b""  # the whole command's bytes (to see what tree-sitter left out between words)
        self._mention_counts: Counter[str] | None = None  # _mentions: every word's standalone count, once
        self.multiline = False  # b"\n" in source
        self.heredocs = False  # b"<<" in source
        # what the next command reads on standard input: ("text", script) for a literal here-document or
        # here-string, ("unknown", "") for one with expansions; consumed by the first command walked
        self._redir_stdin: tuple[str, str] | None = None
        self._pipe_stdin: tuple[str, str] | None = None  # the same for every command of a piped-into stage
        # every variable assigned a literal anywhere in this command -> those values (for deny rules only)
        self.assigned: dict[str, list[str]] = {}
        self.maybe: dict[str, tuple[str, ...]] = {}  # a dynamic word's text -> the literal values it may take

    # ------------------------------------------------------------------ bookkeeping
    def flag(self, flag: Flag, note: str) -> None:
        self.flags.add(flag)
        self._note(note)

    def _note(self, note: str) -> None:
        if note not in self._note_set:
            self._note_set.add(note)
            self.notes.append(note)

    def check_fork_bomb(self) -> None:
        for name, lo, hi in self._fn_bodies:
            if any(c.argv and c.argv[0] == name for c in self.commands[lo:hi]):
                self.flag(Flag.CATASTROPHIC, f"function {name!r} calls itself (fork bomb pattern)")

    def _mentions(self, name: str) -> int:
        """How often ``name`` stands in the command as a word of its own, not as ``$name``/``${name``
        (``(?<![$\\w{])name\\b``). Counted for every name in one pass over the source, once: a findall per
        loop made 1,500 loops in one command cost 1.5 s."""
        if self._mention_counts is None:
            whole = self.source.decode("utf-8", "surrogateescape")
            self._mention_counts = Counter(m.group() for m in _MENTION.finditer(whole))
        if _WORD_ONLY.fullmatch(name) is None:  # not a plain name: count it the long way
            whole = self.source.decode("utf-8", "surrogateescape")
            return len(re.findall(rf"(?<![$\w{{]){re.escape(name)}\b", whole))
        return self._mention_counts.get(name, 0)

    def _escaped_blank_before(self, pos: int) -> bool:
        src = self.source
        return pos >= 2 and src[pos - 1 : pos] in (b" ", b"\t") and src[pos - 2 : pos - 1] == b"\\"

    def check_arith(self) -> None:
        for name, where in self.arith_refs:
            if name in _NUMERIC_SPECIALS and name not in self.numeric:
                continue
            if self.numeric.get(name) is True and name not in self.namerefs:
                continue
            self.flag(Flag.DYNAMIC, f"{where} evaluates the text of ${name} as arithmetic (it can run code)")

    def set_var(self, name: str, value: str | None, how: str) -> None:
        """Record that ``name`` is set (value None: not a known literal); flag dangerous or odd names."""
        base, _, sub = name.partition("[")
        if sub:
            self.arith(sub.rstrip("]"), f"the subscript of {name}", base)
        if not _NAME.fullmatch(base):
            self.flag(Flag.DYNAMIC, f"{how} sets a variable whose name is computed or invalid: {_short(name)}")
            return
        if is_dangerous_env(base):
            self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {base} set by {how}")
        if base in self.namerefs:
            self.flag(Flag.DYNAMIC, f"{how} assigns through the name reference {base}")
        is_num = value is not None and _INTEGER.fullmatch(value) is not None
        if base in self.int_vars and value is not None and not is_num:
            self.arith(value, f"the integer variable {base}")
            is_num = True
        self.numeric[base] = self.numeric.get(base, True) and is_num

    def arith(self, text: str, where: str, array: str | None = None) -> None:
        """Check an arithmetic expression's text: every variable it reads must hold a known integer."""
        if "$(" in text or "`" in text:
            # evaluated again when bash reads it (an associative array's subscript is expanded as a string,
            # an indexed one's as arithmetic): the substitution runs; deny rules see what it runs
            self.flag(Flag.DYNAMIC, f"{where} runs a command substitution inside arithmetic")
            self._code_in_text(text)
        if array is not None and array in self.assoc_vars:
            return
        stripped = _ARITH_NUMBERS.sub(" ", _ARITH_LENGTHS.sub(" 0 ", text))
        for m in _ARITH_ASSIGN.finditer(stripped):
            name = next(g for g in m.groups() if g)
            if is_dangerous_env(name):
                self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} set by arithmetic")
            self.numeric[name] = self.numeric.get(name, True)
        for m in _ARITH_NAMES.finditer(stripped):
            name = next((g for g in m.groups() if g), "")
            if name:
                self.arith_refs.append((name, where))

    def _code_in_text(self, text: str) -> None:
        """The ``$(...)`` and backtick bodies of a text bash evaluates again: parsed as the commands they are."""
        bodies = [m.group(1) for m in _BACKTICK_BODY.finditer(text)]
        start = text.find("$(")
        while start >= 0 and len(bodies) < 16:
            depth, i = 0, start + 1
            while i < len(text):
                if text[i] == "(":
                    depth += 1
                elif text[i] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            bodies.append(text[start + 2 : i])
            start = text.find("$(", i)
        for body in bodies:
            if body.strip() and self.shell_depth + 1 <= MAX_SHELL_DEPTH:
                self._merge(_analyse(body, self.shell_depth + 1, budget=self.budget), ())

    def expansion(self, node: Node) -> None:
        """``${...}``: indirection, prompt expansion, subscripts, substrings and default assignments."""
        whole = _text(node)
        if "`" in whole:
            self._backticks_in_expansion(node)
        m = _EXPANSION.fullmatch(whole)
        if m is None:
            self.flag(Flag.DYNAMIC, f"parameter expansion we do not understand: {_short(_text(node))}")
            return
        bang, name, sub, rest = m.group(1), m.group(2), m.group(3), m.group(4)
        listing = (sub in ("[@]", "[*]") and not rest) or (not sub and rest in ("*", "@"))
        if bang and not listing:
            self.flag(Flag.DYNAMIC, f"${{!{name}}} uses another variable's value as a name")
            self.arith_refs.append((name, "indirection"))
        if sub and sub not in ("[@]", "[*]"):
            self.arith(sub[1:-1], f"the subscript of ${{{name}[...]}}", name)
        if rest.startswith("@") and rest[1:2] in ("P", "E", "A", "K", "k", "a"):
            if rest[1] == "P":
                self.flag(Flag.DYNAMIC, f"${{{name}@P}} expands the value as a prompt (runs its substitutions)")
        elif rest.startswith(":") and rest[1:2] not in ("-", "=", "?", "+"):
            self.arith(rest[1:], f"the offset of ${{{name}:...}}")
        elif rest.startswith((":=", "=")):
            value = rest.split("=", 1)[1]
            self.set_var(
                name + (sub or ""),
                value if "$" not in value and "`" not in value else None,
                f"${{{name}{rest[:2] if rest[0] == ':' else '='}...}}",
            )

    # ------------------------------------------------------------------ statements
    def walk(self, node: Node, depth: int, extra: list[_Word] | None = None) -> None:
        """``extra``: arguments of a simple command that tree-sitter-bash put in its redirects."""
        if depth > MAX_NODE_DEPTH:
            self.flag(Flag.UNPARSEABLE, "command nests too deeply")
            return
        t = node.type
        # the misread structures all span a newline: a command without one cannot be misread this way
        if t in ("command", "pipeline") and self.multiline and _misparsed(node):
            # tree-sitter-bash joins `a | b | c<newline>d && e` into `c d` without an ERROR node
            self.flag(Flag.UNPARSEABLE, "the shell parser misread the command's structure")
        if t == "command" and _skipped(node):
            # tree-sitter-bash drops a lone `-` before `{1..3}` without an ERROR node: a word bash passes on
            self.flag(Flag.UNPARSEABLE, "the shell parser skipped part of the command")
        if t == "command":
            self._command(node, depth, extra or [])
        elif t == "test_command":
            self._test(node, depth)
        elif t == "compound_statement" and node.children and node.children[0].type == "((":
            self._arith_command(node, depth)
        elif t == "c_style_for_statement":
            self.arith(_between(node, "((", "))"), "for (( ))")
            for child in node.children:
                self.walk(child, depth + 1)
        elif t == "for_statement":
            self._for(node, depth)
        elif t == "arithmetic_expansion":
            self.arith(_arith_inner(node), "$(( ))")
            for child in node.children:
                self.walk(child, depth + 1)
        elif t == "redirected_statement":
            stdin = _stdin_of(node) if self.heredocs else None
            if stdin is not None:
                self._redir_stdin = stdin
            body = [c for c in node.children if c.type not in _REDIRECTS]
            gaps = _gap_words(node)
            if len(body) == 1 and body[0].type == "command" and gaps is not None:
                # one simple command: the words its redirects hold (``cp 2>/dev/null SRC DST``) are its own
                # arguments, after its words, and so is a plain word tree-sitter left out between them (the
                # `-` of ``python3 - <<EOF``); what follows a here-document's delimiter runs after it
                extras: list[_Word] = []
                trailing: list[Node] = []
                for child in node.children:
                    extras.extend(gaps.get(child.start_byte, ()))
                    if child.type in _REDIRECTS:
                        extras.extend(self._redirect(child, depth, trailing))
                self.walk(body[0], depth + 1, extras)
                for rest in _in_run_order(trailing):
                    self.walk(rest, depth + 1)
            else:
                if gaps is None or gaps:
                    self.flag(Flag.UNPARSEABLE, "the shell parser skipped part of the command")
                for child in node.children:
                    if child.type in _REDIRECTS:
                        self._stray(self._redirect(child, depth))
                    else:
                        self.walk(child, depth + 1)
        elif t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self._stray(self._redirect(node, depth))
        elif t == "pipeline":
            outer = self._pipe_stdin
            prev: Node | None = None
            for child in node.children:
                if child.is_named and child.type != "comment":
                    self._pipe_stdin = _piped_text(prev) if prev is not None else outer
                    self.walk(child, depth + 1)
                    prev = child
            self._pipe_stdin = outer
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
            if t == "expansion":
                self.expansion(node)
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
        known = True
        if value_node is not None:
            words = self._word(value_node, depth, split_braces=False)
            value = words[0].value() if words else ""
            known = not any(w.dynamic for w in words) and value_node.type != "array"
        if name_node is not None and name_node.type == "subscript":
            # a[$(id)]=x and friends: the subscript is evaluated (as arithmetic for an indexed array)
            self.walk(name_node, depth + 1)
        if (name_node is not None and name_node.type == "subscript") or "[" in name:
            full = _text(name_node) if name_node is not None else name
            name = full.split("[", 1)[0]
        else:
            full = name
        if is_dangerous_env(name):
            where = "assigned in the shell" if standalone else "in front of a command"
            self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} {where}")
        if name in self.namerefs:
            self.flag(Flag.DYNAMIC, f"assigns through the name reference {name}")
        if "[" in full and name not in self.assoc_vars:
            self.arith(full.split("[", 1)[1].rsplit("]", 1)[0], f"the subscript of {name}[...]", name)
        is_num = known and _INTEGER.fullmatch(value) is not None
        if name in self.int_vars and not is_num:
            self.arith(value, f"the integer variable {name}")
            is_num = True
        self.numeric[name] = self.numeric.get(name, True) and is_num
        if standalone and value_node is not None and _NAME.fullmatch(name):  # (VAR=x cmd: not in the shell)
            self._remember(name, value_node, value, depth)
            if standalone and name == full and self._certain(node):
                if known:
                    self._bind_literal(name, value)
                elif value_node.type == "array":
                    self._bind_array(name, value_node, depth)
        return name, value

    def _remember(self, name: str, value_node: Node, value: str, depth: int) -> None:
        """Keep the literal values ``name`` is given (an array's elements too) for deny rules."""
        values = self.assigned.setdefault(name, [])
        if len(values) >= 16:
            return
        if value_node.type == "array":
            for child in value_node.children:
                text = _text(child)
                if child.is_named and "$" not in text and "`" not in text:
                    values.extend(w.value() for w in self._word(child, depth, split_braces=False))
        elif "`" not in value and "$(" not in value:
            values.append(value)

    def alternatives(self, text: str) -> tuple[str, ...]:
        """The literal values a word with ``$name``, ``${name}``, ``${name[i]}``, ``${name:-lit}`` may take, from
        the values assigned in this command (a changed IFS also splits them). Empty when some part is unknown."""
        options: list[str] = [""]
        pos = 0
        for m in _VAR_REF.finditer(text):
            name = m.group(1) or m.group(2)
            values = list(self.assigned.get(name, ()))
            if m.group(3) is not None:  # ${name:-lit}: unset or empty gives the literal
                values.append(m.group(3))
            if name in ("HOME",):
                values.append(m.group(0))  # expanded by the path checks themselves
            if not values:
                return ()
            head = text[pos : m.start()]
            options = [o + head + v for o in options for v in values][:32]
            pos = m.end()
        if pos == 0:
            return ()
        options = [o + text[pos:] for o in options]
        if any("$" in o.replace("$HOME", "").replace("${HOME}", "") or "`" in o for o in options):
            return ()
        ifs = self.assigned.get("IFS")
        if ifs:
            seps = "".join(ifs)
            pieces = [p for o in options for p in re.split(f"[{re.escape(seps)}]+", o) if p] if seps else []
            options += pieces
        return tuple(dict.fromkeys(options))[:32]

    def _certain(self, node: Node) -> bool:
        """Whether the assignment runs before anything after it: a statement of the top-level script, or the
        first of an ``&&``/``||`` list that is one (not after a condition, in a loop, function or subshell)."""
        n = node
        while True:
            p = n.parent
            if p is None:
                return False
            if p.type == "program":
                nxt = n.next_sibling
                return nxt is None or nxt.type != "&"  # `f=x &` assigns in a background subshell
            if p.type != "list" or p.children[0].id != n.id:
                return False
            n = p

    def _bind_array(self, name: str, value_node: Node, depth: int) -> None:
        """``a=(x y); cat "${a[0]}"``: each plain element, by its index, as ``_bind_literal`` binds a scalar."""
        elements = [c for c in value_node.children if c.is_named]
        if len(elements) > 16 or any(c.type not in ("word", "raw_string", "string") for c in elements):
            return
        values = []
        for c in elements:
            text = _text(c)
            if "$" in text or "`" in text or "\\" in text:
                return
            words = self._word(c, depth, split_braces=False)
            if len(words) != 1:
                return
            values.append(words[0].value())
        if values and all(self._bindable(name, v) for v in values):
            for k, v in enumerate(values):
                self.bindings[f"{name}[{k}]"] = (v, False, False)

    def _bindable(self, name: str, value: str) -> bool:
        return not (
            not value
            or _SPLITS_OR_GLOBS.search(value)
            or "~" in value
            or "$" in value
            or "IFS" in self.assigned
            or b"IFS" in self.source
            or name in self.namerefs
            or name in self.bindings
            or is_dangerous_env(name)
            or self._mentions(name) != 1
        )

    def _bind_literal(self, name: str, value: str) -> None:
        """``f=README.md; cat "$f"``: a plain literal assigned once, for certain, and named nowhere else in the
        command (no read, unset, loop, function, nameref or second assignment can change it) is that literal
        wherever it is expanded, as a loop's value is."""
        if (
            not value
            or _SPLITS_OR_GLOBS.search(value)
            or "~" in value
            or "$" in value
            or "IFS" in self.assigned
            or b"IFS" in self.source
            or name in self.namerefs
            or name in self.bindings
            or is_dangerous_env(name)
            or self._mentions(name) != 1
        ):
            return
        self.bindings[name] = (value, False, False)

    def _declaration(self, node: Node, depth: int) -> None:
        argv: list[str] = []
        env: list[tuple[str, str]] = []
        opts = ""
        kw = _text(node.children[0]) if node.children else ""
        for child in node.children:
            if child.type == "word" and _text(child)[:1] in ("-", "+") and len(_text(child)) > 1:
                opts += _text(child)[1:] if _text(child)[0] == "-" else ""
        if "f" in opts and ("x" in opts or kw == "export"):
            self.flag(Flag.DANGEROUS_ENV, f"{kw} -f exports a function that child shells run instead of a command")
        nameref = "n" in opts
        # tree-sitter splits `export PA''GER=x` into PA and ''GER=x; bash reads one word PAGER=x
        kids = list(node.children)
        for k in range(1, len(kids) - 1):
            if kids[k].is_named and kids[k + 1].is_named and kids[k].end_byte == kids[k + 1].start_byte:
                joined = "".join(
                    _text(x) if x.type == "variable_name" else "".join(w.value() for w in self._word(x, depth))
                    for x in kids[k : k + 2]
                )
                name = joined.split("=", 1)[0].split("[", 1)[0]
                if is_dangerous_env(name):
                    self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} set by {kw}")
                self.flag(Flag.DYNAMIC, f"{kw} of a word the parser split: {_short(joined)}")
        for child in node.children:
            if child.type == "variable_assignment":
                cname = child.child_by_field_name("name")
                bare = _text(cname).split("[", 1)[0] if cname is not None else ""
                if "i" in opts:
                    self.int_vars.add(bare)
                if "A" in opts:
                    self.assoc_vars.add(bare)
                name, value = self._assignment(child, depth, standalone=True)
                if nameref:
                    self._nameref(bare, child, depth)
                env.append((name, value))
                argv.append(f"{name}={value}")
            elif child.type == "variable_name":
                name = _text(child)
                argv.append(name)
                if "i" in opts:
                    self.int_vars.add(name)
                if "A" in opts:
                    self.assoc_vars.add(name)
                if nameref:
                    self.namerefs.add(name)
                if is_dangerous_env(name):
                    self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} exported")
                self.numeric[name] = self.numeric.get(name, True) and "n" not in opts
            elif child.is_named:
                words = self._word(child, depth)
                for w in words:
                    v = w.value()
                    if w.dynamic and not v.startswith(("-", "+")):
                        self.flag(Flag.DYNAMIC, f"{kw} declares a variable whose name is computed: {_short(v)}")
                    elif not v.startswith(("-", "+")):
                        # export "PAGER=x", export PA''GER=x: bash splits NAME=VALUE after quote removal
                        name = v.split("=", 1)[0].split("[", 1)[0]
                        if is_dangerous_env(name):
                            self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {name} set by {kw}")
                        if "=" in v and name in self.namerefs | self.int_vars:
                            self.flag(Flag.DYNAMIC, f"{kw} assigns {name} through a quoted word")
                    argv.append(v)
            else:
                argv.append(_text(child))
        self.commands.append(ParsedCommand(argv=tuple(argv), text=_text(node)))

    def _nameref(self, name: str, assignment: Node, depth: int) -> None:
        """``declare -n ref=TARGET``: later assignments to ref set TARGET."""
        self.namerefs.add(name)
        value_node = assignment.child_by_field_name("value")
        if value_node is None:
            return
        words = self._word(value_node, depth, split_braces=False)
        target = words[0].value() if words else ""
        if any(w.dynamic for w in words):
            self.flag(Flag.DYNAMIC, f"name reference {name} points to a variable computed at run time")
        elif is_dangerous_env(target.split("[", 1)[0]):
            self.flag(Flag.DANGEROUS_ENV, f"name reference {name} points to the dangerous variable {target}")
        elif "[" in target:
            self.arith(target.split("[", 1)[1].rsplit("]", 1)[0], f"the subscript of {target}")
        self.numeric[target.split("[", 1)[0]] = False

    # ------------------------------------------------------------------ words
    def _word(self, node: Node, depth: int, split_braces: bool = True) -> list[_Word]:
        """Evaluate one argument node to its word(s) after quote removal (and brace expansion)."""
        w = _Word()
        self._word_into(node, w, depth, quoted=False)
        return self._braces(w) if split_braces else [w]

    def _braces(self, w: _Word) -> list[_Word]:
        """Brace expansion of an evaluated word (``{a,b}``, ``{1..3}``)."""
        if any(not q and "{" in s for s, q in w.segs):
            expanded = _brace_expand(w.segs)
            if expanded is None:
                self.flag(Flag.UNPARSEABLE, f"brace expansion too large or odd: {_short(w.value())}")
                return [w]
            if len(expanded) != 1 or expanded[0] != w.segs:
                out = []
                for segs in expanded:
                    nw = _Word()
                    nw.segs = segs
                    nw.dynamic, nw.substituted, nw.globbed = w.dynamic, w.substituted, w.globbed
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
            if quoted or "\\" not in text:
                w.segs.append((text, quoted))
            else:
                w.segs.extend(_unquoted_segs(text))
        elif t == "raw_string":
            w.segs.append((_text(node)[1:-1], True))
        elif t == "ansi_c_string":
            if _ANSI_END.match(_text(node)) is None:
                # tree-sitter's token does not end where bash's string ends ($'\\'\' is $'\\' then \')
                self.flag(Flag.UNPARSEABLE, f"the shell parser misread a $'...' string: {_short(_text(node))}")
            decoded, odd = _ansi_c(_text(node)[2:-1])
            w.segs.append((decoded, True))
            if odd:
                w.dynamic = True
                self.flag(Flag.DYNAMIC, f"$'...' holds bytes that are not text: {_short(_text(node))}")
        elif t == "translated_string":  # $"..." is a double-quoted string (translated through the locale)
            for child in node.children:
                if child.type == "string":
                    self._word_into(child, w, depth + 1, quoted=True)
        elif t == "string":
            children = node.children
            w.segs.append(("", True))
            pos: int | None = None
            for child in children:
                if pos is not None and child.start_byte > pos:
                    # text tree-sitter leaves out of string_content (blanks): still part of the string
                    gap = self.source[pos : child.start_byte].decode("utf-8", "surrogateescape")
                    w.segs.append((_dq_unescape(gap), True))
                pos = child.end_byte
                if child.type == "string_content":
                    text = _text(child)
                    w.segs.append((_dq_unescape(text) if "\\" in text else text, True))
                elif child.is_named:
                    self._word_into(child, w, depth + 1, quoted=True)
                elif child.type == '"' and child is not children[0] and len(_text(child)) > 1:
                    # tree-sitter folds blanks before the closing quote into the quote token
                    w.segs.append((_dq_unescape(_text(child)[:-1]), True))
                elif child.type not in ('"', '$"'):
                    w.segs.append((_text(child), True))
        elif t == "concatenation":
            children = node.children
            for k, child in enumerate(children):
                nxt = children[k + 1] if k + 1 < len(children) else None
                if (
                    _text(child) == "$"
                    and nxt is not None
                    and nxt.type == "string"
                    and nxt.start_byte == child.end_byte
                ):
                    continue  # $"..." (a translated string): the $ is not part of the value
                self._word_into(child, w, depth + 1, quoted)
        elif t in ("simple_expansion", "expansion"):
            bound = self.bindings.get(_bound_name(node)) if self.bindings else None
            if bound is not None:
                value, globbed, home = bound
                at_start = not any(t for t, _ in w.segs)
                if quoted and (at_start or not home):  # one value of the loop list, whole
                    if home:
                        # the list word's ~ was expanded by bash: keep the plain ~/ path checks read as home
                        head = "~/" if value.startswith("~/") else "~"
                        w.segs.clear()  # only empty segments so far (the string's own opening)
                        w.segs.append((head, False))
                        value = value[len(head) :]
                    if value or not home:
                        w.segs.append((value, True))
                    w.globbed = w.globbed or globbed
                    return
                if not home and not globbed and not _SPLITS_OR_GLOBS.search(value) and value:
                    w.segs.append((value, True))
                    return
            w.dynamic = True
            w.segs.append((_text(node), True))
            if t == "expansion":
                self.expansion(node)
            for child in node.children:
                self.walk(child, depth + 1)
        elif t in ("command_substitution", "process_substitution"):
            static = _static_heredoc_cat(node) if t == "command_substitution" else None
            if static is not None:
                w.segs.append((static, True))
                return
            text = _text(node)
            if t == "process_substitution" and text.startswith("<("):
                # <(cmd) is a pipe the word names (/dev/fd/N): reading it reads what cmd prints, and cmd is
                # walked as a command of its own; nothing here depends on run-time values
                w.segs.append((PROCESS_SUBSTITUTION, True))
                for child in node.children:
                    if child.is_named:
                        self.walk(child, depth + 1)
                return
            echoed = _ECHO_WORD.fullmatch(text) if t == "command_substitution" else None
            if echoed is not None and not echoed.group(1).startswith("-") and "echo" not in self.functions:
                # $(echo WORD) of one plain word is that word (no blank, glob or expansion to split or match)
                value = echoed.group(1)
                self.commands.append(ParsedCommand(("echo", value), text=text))  # still a command deny rules see
                if value == "~" or value.startswith("~/"):
                    head = value[:2]  # the inner shell expanded it: the home directory, as the path checks read it
                    w.segs.append((head, False))
                    value = value[len(head) :]
                elif value.startswith("~"):
                    w.dynamic = True  # ~user, ~+: not judged here
                if value:
                    w.segs.append((value, True))
                return
            m = _READ_SUBSTITUTION.fullmatch(text) if t == "command_substitution" else None
            if m is not None and "$" not in m.group(1) and "`" not in m.group(1):
                # $(<file) is the file's text: a read of that file (as `cat file`), whose value is unknown here
                self.commands.append(ParsedCommand(("cat", m.group(1)), text=text))
                w.dynamic = True
                w.segs.append((text, True))
                return
            w.substituted = True
            w.dynamic = True
            w.segs.append((_text(node), True))
            self.walk(node, depth + 1)
        elif t == "arithmetic_expansion":
            w.dynamic = True
            w.segs.append((_text(node), True))
            self.arith(_arith_inner(node), "$(( ))")
            for child in node.children:
                self.walk(child, depth + 1)
        elif t == "brace_expression":
            w.segs.extend(_unquoted_segs(_text(node)) if not quoted else [(_text(node), True)])
        else:
            # array, test operators and other oddities: keep the text, still look for substitutions inside
            w.segs.append((_text(node), quoted))
            for child in node.children:
                self.walk(child, depth + 1)

    # ------------------------------------------------------------------ redirects
    def _redirect(self, node: Node, depth: int, trailing: list[Node] | None = None) -> list[_Word]:
        """Record the redirect; return the words tree-sitter-bash attached to it that bash passes to the
        command as arguments: ``cp 2>/dev/null SRC DST`` parses as one redirect with three destinations, and
        ``cat <<EOF FILE`` holds FILE in the here-document's node. A list or pipeline that follows a
        here-document's delimiter (``cat <<EOF && rm -rf ~``) also sits in its node: it goes to ``trailing``
        (walked once the command is emitted) or, without one, is walked here. Neither may go unseen."""
        t = node.type
        fd: int | None = None
        op = ""
        target: str | None = None
        dynamic = False
        extras: list[_Word] = []
        # an ERROR inside a redirect stands for its parts (`3<>` comes out as `<` and an ERROR `>`, `>&- x y`
        # as an ERROR `x`): its words are the redirect's words like any other
        parts = [g for c in node.children for g in (c.children if c.type == "ERROR" else (c,))]
        for child in parts:
            ct = child.type
            if ct == "file_descriptor":
                try:
                    fd = int(_text(child))
                except ValueError:
                    fd = None
            elif ct in ("heredoc_body",):
                if trailing is not None:
                    trailing.append(child)  # (its substitutions run with the command: walked after it)
                else:
                    self.walk(child, depth + 1)
            elif ct in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                extras.extend(self._redirect(child, depth + 1, trailing))
            elif ct in ("heredoc_start", "heredoc_end", "heredoc_content"):
                continue
            elif not child.is_named:
                op = op or _text(child)
            elif child.is_named:
                if t == "herestring_redirect":
                    self._word(child, depth + 1)  # substitutions inside count
                    continue
                if t == "heredoc_redirect" and ct in _STATEMENTS:
                    if trailing is not None:
                        trailing.append(child)
                    else:
                        self.walk(child, depth + 1)
                    continue
                words = self._word(child, depth + 1, split_braces=False)
                if t == "heredoc_redirect" or target is not None or op.endswith("&-"):
                    # past the delimiter or the first destination, or after a close (`2>&-` has no target):
                    # the command's arguments
                    extras.extend(words)
                elif words:
                    target = words[0].value()
                    dynamic = words[0].dynamic
                    extras.extend(words[1:])
        if t == "heredoc_redirect":
            op = op or "<<"
            target = None
        elif t == "herestring_redirect":
            op = "<<<"
            target = None
        if dynamic:
            self.dyn_redirects.add(len(self.redirects))
            if target and (self.assigned or "${" in target) and target not in self.maybe:
                alts = self.alternatives(target)
                if alts:
                    self.maybe[target] = alts
        self.redirects.append(Redirect(op=op, target=target, fd=fd))
        return extras

    def _stray(self, extras: list[_Word]) -> None:
        """Arguments tree-sitter attached to a redirect with no simple command to give them to."""
        if extras:
            self.flag(Flag.UNPARSEABLE, "words after a redirect that the shell parser did not give to a command")

    # ------------------------------------------------------------------ [[ ]], (( )), for
    def _test(self, node: Node, depth: int) -> None:
        """``[[ ... ]]`` is a command too: emit it, and check operands bash evaluates as arithmetic."""
        argv: list[str] = []
        dyn: set[int] = set()

        def flat(n: Node, d: int) -> None:
            for c in n.children:
                if c.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
                    op = c.child_by_field_name("operator")
                    opt = _text(op) if op is not None else ""
                    operands = [x for x in c.children if x.is_named and x.type != "test_operator"]
                    if opt in _ARITH_OPS:
                        for x in operands:
                            ws = self._word(x, d + 1, split_braces=False)
                            self.arith(ws[0].value() if ws else _text(x), f"[[ {opt} ]]")
                    elif opt == "-v":
                        for x in operands:
                            v = _text(x)
                            if "[" in v:
                                self.arith(v.split("[", 1)[1].rsplit("]", 1)[0], "[[ -v ]]", v.split("[", 1)[0])
                    flat(c, d + 1)
                elif not c.is_named or c.type == "test_operator":
                    argv.append(_text(c))
                else:
                    for w in self._word(c, d + 1, split_braces=False):
                        if w.dynamic:
                            dyn.add(len(argv))
                        argv.append(w.value())

        flat(node, depth)
        self.commands.append(ParsedCommand(tuple(argv), text=_text(node), dynamic_args=frozenset(dyn)))

    def _arith_command(self, node: Node, depth: int) -> None:
        inner = _between(node, "((", "))")
        self.arith(inner, "(( ))")
        for child in node.children:
            self.walk(child, depth + 1)
        self.commands.append(ParsedCommand(("((", inner.strip(), "))"), text=_text(node)))

    def _for(self, node: Node, depth: int) -> None:
        """``for v in words``: v takes each literal value; the body sees each (a glob: any matching name)."""
        var_node = node.child_by_field_name("variable")
        name = _text(var_node) if var_node is not None else ""
        values: list[tuple[str, bool, bool]] = []
        bindable = bool(name) and not self.functions and name not in self.namerefs
        has_list = False
        body: list[Node] = []
        for child in node.children:
            field = node.field_name_for_child(node.children.index(child))
            if field == "value":
                has_list = True
                for w in self._word(child, depth + 1):
                    globbed = w.has_glob(self.glob_changed) or w.globbed
                    if w.dynamic or (globbed and self.glob_changed):
                        bindable = False
                    v = w.value()
                    home = v.startswith("~") and (v == "~" or v.startswith("~/")) and not _tilde_unknown(w, 1)
                    values.append((v, globbed, home))
            elif field == "body":
                body.append(child)
        if name:
            numeric = bool(values) and all(not g and _INTEGER.fullmatch(v) for v, g, _h in values)
            self.set_var(name, values[0][0] if numeric else None, "a for/select loop")
        # the name may appear only in this loop's header and as $v / ${v}: anything else anywhere in the command
        # (v=..., read v, declare -n r=v, a function that sets it, an enclosing loop) can change its value
        if not name or self._mentions(name) != 1:
            bindable = False
        if not has_list or not values or len(values) > 16 or name in self.bindings:
            bindable = False
        if not bindable:
            for b in body:
                self.walk(b, depth + 1)
            return
        for value in dict.fromkeys(values):
            self.bindings[name] = value
            for b in body:
                self.walk(b, depth + 1)
        del self.bindings[name]

    # ------------------------------------------------------------------ simple commands
    def _command(self, node: Node, depth: int, extra: list[_Word]) -> None:
        stdin = (_stdin_of(node) if self.heredocs else None) or self._redir_stdin or self._pipe_stdin
        self._redir_stdin = None
        env: list[tuple[str, str]] = []
        words: list[_Word] = []
        trailing: list[Node] = []  # what follows a here-document's delimiter (``_redirect``)
        name_seen = False
        whole = self.source
        prev_end: int | None = None
        prev_type = ""
        for child in node.children:
            ct = child.type
            # tree-sitter splits a\<newline>b in two; bash removes the backslash-newline and keeps one word
            start = child.start_byte
            joined = False
            if prev_end is None:
                if start >= 2 and whole[start - 1] in (32, 9) and whole[start - 2] == 92:
                    self.flag(Flag.UNPARSEABLE, "the shell parser dropped part of a word (an escaped blank)")
            elif start - prev_end != 1 or whole[prev_end] not in (32, 9):  # not the common single blank
                # zero gap: tree-sitter split one word (`$"x"` comes out as `$` then "x")
                bare = whole[prev_end:start].replace(b"\\\n", b"")
                joined = not bare and bool(words) and ct not in _NOT_WORDS and prev_type not in _NOT_WORDS
                if bare.strip(b" \t") or self._escaped_blank_before(start):
                    # tree-sitter drops an escaped blank at the start of a word (`\ x` is the word " x" in bash)
                    self.flag(Flag.UNPARSEABLE, "the shell parser dropped part of a word (an escaped blank)")
            prev_type = ct
            prev_end = child.end_byte
            before = len(words)
            if ct == "variable_assignment" and not name_seen:
                env.append(self._assignment(child, depth + 1, standalone=False))
            elif ct in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                words.extend(self._redirect(child, depth + 1, trailing))
            elif ct == "command_name":
                name_seen = True
                for sub in child.children:
                    words.extend(self._word(sub, depth + 1, split_braces=False))
            elif ct == "comment":
                continue
            elif child.is_named:
                words.extend(self._word(child, depth + 1, split_braces=False))
            else:
                tok = _Word()  # a bare token tree-sitter did not name (`\$`, `$`): unquoted text all the same
                tok.segs.extend(_unquoted_segs(_text(child)))
                words.append(tok)
            if joined and len(words) == before + 1 and before > 0:
                last, new = words[before - 1], words.pop()
                if ct == "string" and last.segs and last.segs[-1] == ("$", False):
                    last.segs.pop()  # $"..." is a translated string: the $ goes
                last.segs.extend(new.segs)
                last.dynamic = last.dynamic or new.dynamic
                last.substituted = last.substituted or new.substituted
                last.globbed = last.globbed or new.globbed
            elif joined and len(words) != before:
                self.flag(Flag.UNPARSEABLE, "a backslash-newline joins words we cannot evaluate")
        words.extend(extra)
        self._simple(words, env, _text(node), depth, stdin)
        if (
            len(words) in (4, 5)
            and not env
            and words[0].value() == "printf"
            and words[1].value() == "-v"
            and not any(w.dynamic for w in words)
            and ((len(words) == 4 and "%" not in words[3].value()) or words[3].value() == "%s")
            and self._certain(node)
        ):
            # printf -v f '%s' VALUE (or printf -v f VALUE), run for certain: f is VALUE, as f=VALUE would be
            self._bind_literal(words[2].value(), words[-1].value())
        for rest in _in_run_order(trailing):
            self.walk(rest, depth + 1)

    def _simple(
        self, words: list[_Word], env: list[tuple[str, str]], text: str, depth: int, stdin: tuple[str, str] | None
    ) -> None:
        """A simple command's evaluated words: brace expansion, globs and tildes, then wrappers (``_emit``)."""
        argv = [w.value() for w in words]
        blob = "\x00".join(argv)
        if "{" in blob:
            words = [x for w in words for x in self._braces(w)]
            argv = [w.value() for w in words]
        if not words:
            return
        globs: set[int] = set()
        for i, w in enumerate(words if _SPECIAL_WORD.search(blob) else ()):
            v = argv[i]
            if w.globbed or (_GLOBBY.search(v) is not None and w.has_glob(self.glob_changed)):
                globs.add(i)
                if self.glob_changed:
                    w.dynamic = True
                    self.flag(Flag.DYNAMIC, f"glob options set in this command change what {_short(v)} matches")
            if "~" in v and _tilde_unknown(w, i):
                w.dynamic = True
                self.flag(Flag.DYNAMIC, f"a tilde form path checks cannot read as the home directory: {_short(v)}")
        if self.assigned or "${" in blob:
            for i, w in enumerate(words):
                if w.dynamic and not w.substituted and argv[i] not in self.maybe:
                    alts = self.alternatives(argv[i])
                    if alts:
                        self.maybe[argv[i]] = alts
        if 0 in globs:
            self.flag(Flag.DYNAMIC, f"the command name is a glob pattern: {_short(argv[0])}")
        if words[0].dynamic:
            self.flag(Flag.DYNAMIC, f"the command name is computed at run time: {_short(argv[0])}")
        dynamic = [i for i, w in enumerate(words) if w.dynamic]
        self._emit(
            argv,
            frozenset(dynamic) if dynamic else _NO_INDICES,
            tuple(env),
            (),
            text,
            depth,
            False,
            frozenset(globs) if globs else _NO_INDICES,
            stdin,
        )

    def _emit(
        self,
        argv: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
        stdin_args: bool,
        globs: frozenset[int] = frozenset(),
        stdin: tuple[str, str] | None = None,
    ) -> None:
        """Record a simple command, peeling wrappers so the command that really runs is what we report."""
        self.budget.spend(len(argv))
        feeder: tuple[str, ...] = ()
        for _ in range(MAX_UNWRAP):
            if not argv:
                return
            name = argv[0]
            if 0 in dyn or 0 in globs:
                break
            base = name.rsplit("/", 1)[-1] if "/" in name else name
            peeled = _peel(base, argv, env)
            if peeled is None:
                break
            kind, rest, extra_env, note = peeled
            if note:
                self.flag(Flag.UNPARSEABLE if kind == "unparseable" else Flag.DYNAMIC, note)
            if kind == "unparseable":
                break
            if kind != "shell":
                for k, _v in extra_env:
                    if is_dangerous_env(k):
                        self.flag(Flag.DANGEROUS_ENV, f"dangerous variable {k} set through {base}")
                env = env + extra_env
            if kind in ("source", "keep-source"):
                # the wrapper runs shell source it was given (flock -c, su -c, script -c, watch 'a b')
                if kind == "keep-source":
                    self.commands.append(ParsedCommand(tuple(argv), env, wrappers, text, dyn, stdin_args, globs))
                src_dyn = frozenset({0}) if dyn - {0} else frozenset()
                self._shell_script("sh", rest, src_dyn, env, (*wrappers, base), text, depth)
                return
            shift = len(argv) - len(rest)
            # env -S re-splits one plain word (no $, no glob): the words after it keep their place at the end,
            # so counting from the end lines every dynamic or glob word up in all cases
            dyn = frozenset(i - shift for i in dyn if i >= shift)
            globs = frozenset(i - shift for i in globs if i >= shift)
            if kind == "shell":
                self._shell_script(base, rest, dyn, env, wrappers, text, depth, note_opts=extra_env)
                return
            if kind == "keep":  # sudo & co: report the wrapper itself and the command it runs
                self.commands.append(
                    ParsedCommand(
                        tuple(argv), env, wrappers, text, _shift_dyn(dyn, shift), stdin_args, _shift_dyn(globs, shift)
                    )
                )
            wrappers = (*wrappers, base)
            if base == "xargs":
                own = argv[: len(argv) - len(rest)]
                feeder = tuple(own)
                if any(a.startswith("--arg") or (a[:1] == "-" and a[1:2] != "-" and "a" in a) for a in own[1:]):
                    # its arguments come from a file: report that read (knowledge.py's xargs entry)
                    self.commands.append(ParsedCommand(tuple(own), env, wrappers, text))
                stdin_args = True
                ph = _xargs_placeholder(argv[1 : len(argv) - len(rest)])
                self._pasted(rest, ph, "xargs", appends=ph is None)
            argv = rest
        else:
            self.flag(Flag.UNPARSEABLE, "too many wrapper layers")
        if not argv:
            return
        name = argv[0]
        if name == "find" or name.endswith("/find"):
            self._find_exec(argv, dyn, env, wrappers, text, depth)
        elif name in ("fd", "fdfind"):
            self._fd_exec(argv, dyn, env, wrappers, text, depth)
        if name in _DYNAMIC_BUILTINS:
            self.flag(Flag.DYNAMIC, _DYNAMIC_BUILTINS[name])
            eval_args = argv[2:] if argv[1:2] == ["--"] else argv[1:]
            if name == "eval" and eval_args and not (dyn - {0}) and not (globs - {0}):
                # eval of literal words runs them joined by blanks, parsed again: what it runs is known, so deny
                # and ask rules see it (it stays dynamic, as every eval: a person decides the rest)
                self._shell_script("eval", [" ".join(eval_args)], frozenset(), env, wrappers, text, depth)
        elif name in ("hash",) and "-p" in argv[1:]:
            self.flag(Flag.DYNAMIC, "hash -p rebinds a command name to another program")
        elif name in ("mapfile", "readarray") and any(a.startswith("-C") for a in argv[1:]):
            self.flag(Flag.DYNAMIC, f"{name} -C runs a callback")
        elif name == "compgen" and any(a[:1] == "-" and ("C" in a or "F" in a) for a in argv[1:]):
            self.flag(Flag.DYNAMIC, "compgen -C/-F runs a command or function")
        elif name == "parallel" or name.endswith("/parallel"):
            self._parallel(argv, env, wrappers, text, depth)
        elif name == "coproc":
            if len(argv) > 2 and _NAME.fullmatch(argv[1]) and is_dangerous_env(argv[1]):
                self.flag(Flag.DANGEROUS_ENV, f"coproc {argv[1]} sets the dangerous variable {argv[1]}")
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
                    frozenset(i - 1 for i in globs if i >= 1),
                )
            return
        if name in _VAR_SETTERS:
            self._var_setter(name, argv, dyn)
        if stdin is not None and _reads_script_from_stdin(argv):
            base = base_name(name)
            kind, script = stdin
            if kind == "text":  # the script is known: report what it runs, as for -c
                self._shell_script(base, [script], frozenset(), env, (*wrappers, base), text, depth)
                if base not in _STDIN_SCRIPT_RUNNERS:
                    return
            else:
                self.flag(Flag.DYNAMIC, f"{base} runs shell code from its standard input, computed at run time")
        fed = stdin[1] if stdin is not None and stdin[0] == "text" else ""
        # a function this command defined: what runs (its body) was walked on its own
        called = name in self.functions and not wrappers and 0 not in dyn and 0 not in globs
        self.commands.append(
            ParsedCommand(tuple(argv), env, wrappers, text, dyn, stdin_args, globs, fed, feeder, called)
        )

    def _var_setter(self, name: str, argv: list[str], dyn: frozenset[int]) -> None:
        """Builtins that set variables named by their arguments (read PATH, printf -v PATH, let, getopts ...)."""
        with_value, name_opts = _VAR_SETTERS[name]
        names: list[int] = []
        positionals: list[int] = []
        i = 1
        while i < len(argv):
            a = argv[i]
            if a == "--":
                positionals.extend(range(i + 1, len(argv)))
                break
            if a.startswith("-") and len(a) > 1 and name not in ("let", "test", "["):
                for j, ch in enumerate(a[1:], 1):
                    if ch in with_value:
                        target = i + 1 if j == len(a) - 1 and i + 1 < len(argv) else -1
                        if ch in name_opts:
                            if target > 0:
                                names.append(target)
                            else:
                                self.set_var(a[j + 1 :], None, f"{name} -{ch}")
                        if target > 0:
                            i += 1
                        break
                i += 1
                continue
            positionals.append(i)
            i += 1
        if name in ("read",):
            names.extend(positionals)
        elif name in ("mapfile", "readarray", "getopts"):
            idx = 1 if name == "getopts" else 0
            if len(positionals) > idx:
                names.append(positionals[idx])
        elif name == "let":
            for k in range(1, len(argv)):
                if k in dyn:
                    self.flag(Flag.DYNAMIC, "let evaluates a computed expression")
                self.arith(argv[k], "let")
            return
        elif name in ("test", "["):
            for k in range(1, len(argv) - 1):
                if argv[k] == "-v" and "[" in argv[k + 1]:
                    v = argv[k + 1]
                    self.arith(v.split("[", 1)[1].rsplit("]", 1)[0], f"{name} -v", v.split("[", 1)[0])
            return
        for k in names:
            if k in dyn:
                self.flag(Flag.DYNAMIC, f"{name} sets a variable whose name is computed at run time: {argv[k]}")
            else:
                self.set_var(argv[k], None, name)
                if name == "printf" and k + 1 < len(argv) and _NAME.fullmatch(argv[k]):
                    # printf -v f '%s' VALUE / printf -v f VALUE: the values it may hold, for deny rules
                    fmt, rest = argv[k + 1], [a for j, a in enumerate(argv[k + 2 :], k + 2) if j not in dyn]
                    self.assigned.setdefault(argv[k], []).extend(
                        [fmt] if "%" not in fmt else rest[:16] if fmt.startswith("%s") or fmt == "%b" else []
                    )

    def _pasted(self, argv: list[str], placeholder: str | None, via: str, appends: bool = False) -> None:
        """find -exec / xargs -I: a placeholder inside shell or interpreter source pastes names in as code; so
        does one that is the whole script (``sh -c {}``), and xargs appending its input after ``sh -c``."""
        if not argv or (not placeholder and not appends):
            return
        if placeholder and placeholder in argv[0]:
            self.flag(Flag.DYNAMIC, f"{via} runs a program named by its input ({placeholder})")
        base = argv[0].rsplit("/", 1)[-1]
        stem = base.rstrip("0123456789.")
        if base not in SHELLS and base not in CODE_PROGRAMS and stem not in CODE_PROGRAMS:
            return
        why = f"{via} pastes file names or input lines into {base} source"
        for i, a in enumerate(argv[1:], 1):
            # `sh -c '...' sh {}` passes it as an argument: fine; `sh -c {}` makes it the script
            if placeholder and placeholder in a and (a != placeholder or _takes_code(argv[i - 1])):
                self.flag(Flag.HIDDEN_EFFECT, why)
                self.flag(Flag.DYNAMIC, why)
                return
        if appends and _takes_code(argv[-1]):
            self.flag(Flag.HIDDEN_EFFECT, f"{via} appends its input where {base}'s script goes")
            self.flag(Flag.DYNAMIC, f"{via} appends its input where {base}'s script goes")

    def _parallel(
        self, argv: list[str], env: tuple[tuple[str, str], ...], wrappers: tuple[str, ...], text: str, depth: int
    ) -> None:
        """GNU parallel runs its command template through a shell, with each input pasted in."""
        template: list[str] = []
        for a in argv[1:]:
            if a in (":::", "::::", ":::+", "::::+"):
                break
            template.append(a)
        while template and template[0].startswith("-"):
            template.pop(0)  # options (we cannot tell their values apart: the template stays opaque)
        script = " ".join(template)
        self.flag(Flag.DYNAMIC, "parallel runs a command template through a shell with its inputs pasted in")
        if "{" in script:
            self.flag(Flag.HIDDEN_EFFECT, "parallel pastes its inputs into shell source")
        if script:
            self._shell_script("sh", [script], frozenset(), env, (*wrappers, "parallel"), text, depth)

    def _fd_exec(
        self,
        argv: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
    ) -> None:
        """``fd -x cmd`` / ``--exec`` / ``-X`` / ``--exec-batch``: the rest of the words (up to ``;``) run per file."""
        for i, a in enumerate(argv[1:], 1):
            if a in ("-x", "--exec", "-X", "--exec-batch"):
                j = i + 1
                while j < len(argv) and argv[j] != ";":
                    j += 1
                inner = argv[i + 1 : j]
                if inner:
                    for placeholder in ("{}", "{/}", "{//}", "{.}", "{/.}"):
                        self._pasted(inner, placeholder, "fd --exec")
                    if not any("{" in w for w in inner):
                        self._pasted(inner, None, "fd --exec", appends=True)  # fd -x sh -c: the path is the script
                    inner_dyn = frozenset(k - i - 1 for k in dyn if i + 1 <= k < j)
                    self._emit(list(inner), inner_dyn, env, (*wrappers, base_name(argv[0])), text, depth, True)
                return

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
                    self._pasted(inner, "{}", "find -exec")
                    inner_dyn = frozenset(k - i - 1 for k in dyn if i + 1 <= k < j)
                    self._emit(list(inner), inner_dyn, env, (*wrappers, "find"), text, depth, True)
                i = j + 1
            else:
                i += 1

    def _backticks_in_expansion(self, node: Node) -> None:
        """tree-sitter leaves `...` inside ``${x:-`cmd`}`` as plain text; bash runs it (a substitution)."""
        parsed = {c.start_byte for c in _descendants(node) if c.type == "command_substitution"}
        for child in node.children:
            if child.type == "command_substitution" or b"`" not in (child.text or b""):
                continue
            if any(c.start_byte in parsed for c in _descendants(child)):
                continue
            text = _text(child)
            self.flag(Flag.DYNAMIC, f"command substitution {_short(text)}")
            for script in _BACKTICK_BODY.findall(text) or [text]:
                if self.shell_depth + 1 > MAX_SHELL_DEPTH:
                    self.flag(Flag.UNPARSEABLE, "command substitutions nested too deeply")
                    return
                self._merge(_analyse(script, self.shell_depth + 1, self.glob_changed, budget=self.budget), ())

    def _merge(
        self,
        inner: ShellAnalysis,
        wrappers: tuple[str, ...],
        env: tuple[tuple[str, str], ...] = (),
        text: str | None = None,
    ) -> None:
        """Take the commands, redirects, flags and notes of a script parsed on its own."""
        for c in inner.commands:
            self.commands.append(
                ParsedCommand(
                    c.argv,
                    env + c.env,
                    (*wrappers, *c.wrappers),
                    c.text if text is None else text,
                    c.dynamic_args,
                    c.stdin_args,
                    c.glob_args,
                    c.stdin,
                    c.feeder,
                    c.function_call,
                )
            )
        base = len(self.redirects)
        self.redirects.extend(inner.redirects)
        self.dyn_redirects.update(base + i for i in inner.dynamic_redirects)
        for f in inner.flags:
            self.flags.add(f)
        for n in inner.notes:
            self._note(n)
        self.functions.extend(inner.functions)
        for k, v in inner.maybe:
            self.maybe.setdefault(k, v)

    def _shell_script(
        self,
        shell: str,
        rest: list[str],
        dyn: frozenset[int],
        env: tuple[tuple[str, str], ...],
        wrappers: tuple[str, ...],
        text: str,
        depth: int,
        note_opts: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """``bash -c 'script'``: parse the script itself, with a depth limit."""
        script = rest[0]
        glob_changed = any(k == "glob_changed" for k, _ in note_opts)
        if 0 in dyn:
            self.flag(Flag.DYNAMIC, f"{shell} -c runs a script computed at run time")
            self.commands.append(ParsedCommand((shell, "-c", script), env, wrappers, text, frozenset({2})))
            return
        if shell in FOREIGN_SHELLS and not _PLAIN_SCRIPT.fullmatch(script):
            self.flag(Flag.UNPARSEABLE, f"{shell} -c runs {shell} code, which is not bash: {_short(script)}")
            self.commands.append(ParsedCommand((shell, "-c", script), env, wrappers, text))
            return
        if shell in NO_ANSI_C_SHELLS and "$'" in script:
            self.flag(Flag.UNPARSEABLE, f"{shell} has no $'...' quoting: the script means something else there")
        if self.shell_depth + 1 > MAX_SHELL_DEPTH:
            self.flag(Flag.UNPARSEABLE, f"{shell} -c nested too deeply")
            self.commands.append(ParsedCommand((shell, "-c", script), env, wrappers, text))
            return
        self._merge(_analyse(script, self.shell_depth + 1, glob_changed, budget=self.budget), (*wrappers, shell), env)


def _takes_code(word: str) -> bool:
    """An option whose value is a script: -c (-lc, +c), -e/-E (perl, ruby, node), -p, --eval, --command."""
    return (word[:1] in "-+" and not word.startswith("--") and len(word) > 1 and word[-1] in "ceEp") or word in (
        "--eval",
        "--print",
        "--command",
        "--exec",
    )


_STDIN_SCRIPT_OPERANDS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
_STDIN_SCRIPT_RUNNERS = frozenset({"at", "batch"})  # read the commands they schedule from standard input


def _reads_script_from_stdin(argv: list[str]) -> bool:
    """A shell with no -c and no script file (or -s, or a script named /dev/stdin), at or batch."""
    base = base_name(argv[0])
    if base in _STDIN_SCRIPT_RUNNERS:
        return not any(a.startswith("-f") or a == "--file" for a in argv[1:])
    if base not in SHELLS:
        return False
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--", "-"):
            return i + 1 >= len(argv) or a == "-" or argv[i + 1] in _STDIN_SCRIPT_OPERANDS
        if a.startswith("--"):
            i += 1
            continue
        if a[:1] in ("-", "+") and len(a) > 1:
            if "c" in a[1:]:
                return False
            if "s" in a[1:]:
                return True
            i += 1 + sum(1 for ch in a[1:] if ch in "oO")
            continue
        return a in _STDIN_SCRIPT_OPERANDS
    return True


def _stdin_of(node: Node) -> tuple[str, str] | None:
    """The here-document or here-string among ``node``'s children: its literal text, or unknown."""
    found: tuple[str, str] | None = None
    for c in node.children:
        if c.type == "herestring_redirect":
            vals = [x for x in c.children if x.is_named]
            v = vals[-1] if vals else None
            if v is not None and v.type == "raw_string":
                found = ("text", _text(v)[1:-1])
            elif v is not None and v.type in ("word", "string") and not _NOT_PLAIN.search(_text(v)):
                found = ("text", _text(v)[1:-1] if v.type == "string" else _text(v))
            else:
                found = ("unknown", "")
        elif c.type == "heredoc_redirect":
            start = next((x for x in c.children if x.type == "heredoc_start"), None)
            body = next((x for x in c.children if x.type == "heredoc_body"), None)
            quoted = start is not None and any(q in _text(start) for q in "'\"\\")
            raw = _text(body) if body is not None else ""
            if not quoted and (
                (body is not None and any(x.is_named and x.type != "heredoc_content" for x in body.children))
                or _NOT_PLAIN.search(raw)
            ):
                found = ("unknown", "")
            else:
                if any(x.type == "<<-" for x in c.children) or _text(c).startswith("<<-"):
                    raw = "\n".join(line.lstrip("\t") for line in raw.split("\n"))
                found = ("text", raw)
    return found


_NOT_PLAIN = re.compile(r"[$`\\]")


def _piped_text(producer: Node) -> tuple[str, str]:
    """What a pipeline stage writes, when it is ``echo``/``printf`` of plain words; otherwise unknown."""
    if producer.type == "command":
        parts = [x for x in producer.children if x.is_named]
        if parts and parts[0].type == "command_name" and _text(parts[0]) in ("echo", "printf"):
            out: list[str] = []
            for x in parts[1:]:
                t = _text(x)
                if x.type == "raw_string":
                    out.append(t[1:-1])
                elif x.type in ("word", "string") and not _NOT_PLAIN.search(t) and "%" not in t:
                    out.append(t.strip('"') if x.type == "string" else t)
                else:
                    return ("unknown", "")
            if _text(parts[0]) == "printf" and len(out) > 1 and out[0] in _PRINTF_EACH:
                return ("text", "\n".join(out[1:]))  # printf '%s\n' a b: one word a line
            if (out and out[0].startswith("-")) or (_text(parts[0]) == "printf" and len(out) != 1):
                return ("unknown", "")  # echo options; printf prints only its format when it has no %
            return ("text", " ".join(out))
    return ("unknown", "")


_BACKTICK_BODY = re.compile(r"`((?:[^`\\]|\\.)*)`")


def _descendants(node: Node) -> Iterator[Node]:
    for c in node.children:
        yield c
        yield from _descendants(c)


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


_REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
# what tree-sitter-bash may put in a here-document's node after its delimiter: the rest of a list or pipeline
_STATEMENTS = frozenset(
    {
        "command",
        "pipeline",
        "list",
        "redirected_statement",
        "subshell",
        "compound_statement",
        "if_statement",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "case_statement",
        "function_definition",
        "negated_command",
        "test_command",
        "declaration_command",
        "unset_command",
        "variable_assignment",
        "variable_assignments",
    }
)


def _in_run_order(nodes: list[Node]) -> list[Node]:
    """Here-document bodies (their substitutions run with the command) before what follows the delimiter."""
    return sorted(nodes, key=lambda n: n.type != "heredoc_body")


_PLAIN_GAP = re.compile(rb"[A-Za-z0-9_./:=,@%+-]+")


def _gap_words(node: Node) -> dict[int, list[_Word]] | None:
    """Text between a node's children that no child holds, as words keyed by the start of the child they
    precede; None when any of it is more than plain words (quotes, expansions, operators: unknown)."""
    src = node.text or b""
    base = node.start_byte
    covered = base
    found: dict[int, list[_Word]] = {}
    for c in node.children:
        if c.start_byte > covered:
            gap = src[covered - base : c.start_byte - base].replace(b"\\\n", b" ")
            for tok in gap.split():
                if not _PLAIN_GAP.fullmatch(tok):
                    return None
                w = _Word()
                w.segs.append((tok.decode("utf-8", "surrogateescape"), False))
                found.setdefault(c.start_byte, []).append(w)
        covered = max(covered, c.end_byte)
    return found


def _skipped(node: Node) -> bool:
    """Text between a command's children that no child holds: anything but blanks and backslash-newlines is
    a word the parser left out of the tree (and so out of every check)."""
    src = node.text or b""
    base = node.start_byte
    covered = base
    for c in node.children:
        if c.start_byte > covered and src[covered - base : c.start_byte - base].replace(b"\\\n", b"").strip():
            return True
        covered = max(covered, c.end_byte)
        if (
            c.type == "concatenation"
            and any(  # one word: its parts touch (`''- {1..3}` lost the `-` and a blank)
                b.start_byte != a.end_byte for a, b in zip(c.children, c.children[1:], strict=False)
            )
        ):
            return True
    return False


def _shift_dyn(dyn: frozenset[int], shift: int) -> frozenset[int]:
    return frozenset(i + shift for i in dyn)


_NOT_WORDS = frozenset(
    {"variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect", "comment", ""}
)
_SPLITS_OR_GLOBS = re.compile(r"[\s*?\[]")


_ASSIGNMENT_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _tilde_unknown(w: _Word, index: int) -> bool:
    """Whether the word's tilde is not the plain ``~``/``~/`` that path checks expand to the home directory.

    ``~+`` and ``~-`` are $PWD and $OLDPWD; a quoted leading ``~`` ('~'/x) is literal in bash but would be read
    as home; in an assignment-like argument (make PREFIX=~/x) bash expands ``~`` after ``=`` and ``:``.
    """
    value = w.value()
    if "~" not in value:
        return False
    if value.startswith("~"):
        first = next((seg for seg in w.segs if seg[0] or seg[1]), ("", True))
        if first[1] or not first[0].startswith("~"):
            return True
        if first[0].startswith(("~+", "~-")) or first[0][1:2].isdigit():
            return True  # $PWD, $OLDPWD, the directory stack
        if "/" not in first[0]:
            # the tilde-prefix runs to the first unquoted /; a quoted character in it (~'' or ~"x") stops expansion
            rest = w.segs[w.segs.index(first) + 1 :]
            for text, q in rest:
                if q:
                    return True
                if "/" in text:
                    break
    return bool(index > 0 and _ASSIGNMENT_LIKE.match(value) and ("=~" in value or ":~" in value))


def _bound_name(node: Node) -> str:
    """The variable of ``$v`` or ``${v}`` (plain forms only; anything else is not a loop binding)."""
    text = _text(node)
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    elif text.startswith("$"):
        text = text[1:]
    return text if _NAME.fullmatch(text) or _ELEMENT.fullmatch(text) else ""


def _arith_inner(node: Node) -> str:
    text = _text(node)
    if text.startswith("$(("):
        return text[3:-2]
    if text.startswith("$["):
        return text[2:-1]
    return text


def _between(node: Node, open_tok: str, close_tok: str) -> str:
    """The source text between the first ``open_tok`` child and the next ``close_tok`` child."""
    start = end = None
    for c in node.children:
        if start is None and c.type == open_tok:
            start = c.end_byte
        elif start is not None and c.type == close_tok:
            end = c.start_byte
            break
    if start is None or end is None:
        return _text(node)
    src = node.text or b""
    return src[start - node.start_byte : end - node.start_byte].decode("utf-8", "surrogateescape")


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

# builtins that set the variables their arguments name: options taking a value, and those naming a variable
_VAR_SETTERS: dict[str, tuple[str, str]] = {
    "read": ("adinNptu", "a"),
    "printf": ("v", "v"),
    "mapfile": ("dnOsuCc", ""),
    "readarray": ("dnOsuCc", ""),
    "getopts": ("", ""),
    "wait": ("p", "p"),
    "let": ("", ""),
    "test": ("", ""),
    "[": ("", ""),
}
# programs whose arguments can be source code (a placeholder pasted into them becomes code)
CODE_PROGRAMS = frozenset(
    {
        "python",
        "python3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "php",
        "lua",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "tclsh",
        "Rscript",
        "osascript",
        "pwsh",
        "deno",
        "bun",
        "busybox",
        "env",
        "xargs",
        "sed",
    }
)


def base_name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _xargs_placeholder(opts: list[str]) -> str | None:
    """The replace string of ``xargs -I STR`` / ``-i[STR]`` / ``--replace[=STR]`` (None without one)."""
    for i, a in enumerate(opts):
        if a == "-I" and i + 1 < len(opts):
            return opts[i + 1]
        if a.startswith("-I") and len(a) > 2:
            return a[2:]
        if a == "-i" or a == "--replace":
            return "{}"
        if a.startswith("-i"):
            return a[2:]
        if a.startswith("--replace="):
            return a.split("=", 1)[1] or "{}"
    return None


# ---------------------------------------------------------------------------- wrappers

# xargs options that take a separate value (the other wrappers are data in wrappers.py)
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

Peeled = tuple[str, list[str], tuple[tuple[str, str], ...], str]


def _skip_opts(args: list[str], with_value: set[str]) -> list[str] | None:
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
        # short option with an attached value (-n5, -k10) or a cluster of flags whose last letter may take
        # the next word as its value (getopt: xargs -0a FILE, -tn 1)
        i += 1
        if not a.startswith("--"):
            for j in range(1, len(a)):
                if "-" + a[j] in with_value:
                    if j == len(a) - 1:
                        i += 1
                    break
    rest = args[i:]
    return rest or None


def _peel(base: str, argv: list[str], env: tuple[tuple[str, str], ...]) -> Peeled | None:
    """If ``argv`` is a wrapper, return (kind, inner argv, env it sets, note); else None."""
    if base not in _PEELABLE:
        return None
    args = argv[1:]
    if base == "builtin":
        return ("wrap", args, (), "") if args else None
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
    if base in SHELLS:
        return _peel_shell(base, args)
    if (
        base == "npm"
        and args[:1] in (["exec"], ["x"])
        and any(a in ("-c", "--call") or a.startswith("--call=") for a in args)
    ):
        return _peel_table(WRAPPERS["npx"], args[1:])  # npm exec -c 'cmd': same options as npx
    w = WRAPPERS.get(base)
    if w is None and args and not args[0].startswith("-"):
        w = WRAPPERS.get(f"{base} {args[0]}")  # a subcommand that runs a command (uv run, bundle exec)
        if w is not None:
            args = args[1:]
    if w is not None:
        return _peel_table(w, args)
    return None


# every name _peel may unwrap (the rest of the commands are not wrappers: no need to look further)
_PEELABLE = frozenset(
    {"builtin", "command", "exec", "env", "xargs", "npm"} | SHELLS | {k.split(" ", 1)[0] for k in WRAPPERS}
)


def _peel_table(w: Wrapper, args: list[str]) -> Peeled | None:
    """Peel a wrapper described in wrappers.WRAPPERS; None when no wrapped command is found for sure."""
    i, n = 0, len(args)
    operands: list[str] = []
    source: str | None = None
    while i < n:
        a = args[i]
        if a == "--":
            i += 1
            break
        if a == "-" and a in w.flag_opts:
            i += 1
            continue
        if a.startswith("-") and a != "-":
            if a.startswith("--"):
                key, eq, val = a.partition("=")
                if key in w.no_command_opts:
                    return None
                if key in w.source_opts or key in w.value_opts:
                    if not eq:
                        if i + 1 >= n:
                            return None
                        val = args[i + 1]
                        i += 1
                    if key in w.source_opts:
                        source = val
                    i += 1
                    continue
                if key in w.flag_opts or w.any_flags:
                    i += 1
                    continue
                return None  # an option we do not know: fail closed (the wrapper stays an unknown program)
            j, used_next = 1, False
            while j < len(a):
                o = "-" + a[j]
                if o in w.no_command_opts:
                    return None
                if o in w.source_opts or o in w.value_opts:
                    val = a[j + 1 :]
                    if not val:
                        if i + 1 >= n:
                            return None
                        val, used_next = args[i + 1], True
                    if o in w.source_opts:
                        source = val
                    break
                if o not in w.flag_opts and not w.any_flags:
                    return None
                j += 1
            i += 2 if used_next else 1
            continue
        if w.permute:
            operands.append(a)
            i += 1
            continue
        break
    rest = args[i:]
    if source is None and not w.permute and len(rest) > w.skip and rest[w.skip] in w.source_opts:
        if len(rest) <= w.skip + 1:
            return None
        source = rest[w.skip + 1]  # flock FILE -c 'script'
    kind_src = "keep-source" if w.keep else "source"
    if source is not None:
        return (kind_src, [source], (), "")
    if w.permute or w.name == "npx":
        return None  # su / script without -c start an interactive shell; plain npx is the knowledge's
    rest = rest[w.skip :]
    if w.skip and rest and rest[0] == "--":
        rest = rest[1:]
    elif w.skip and rest and rest[0].startswith("-"):
        return None  # an option after the operands (setarch ARCH -R cmd): not a layout we know, fail closed
    if not rest:
        return None
    if w.joins and not any(o in args for o in w.joins_unless):
        return (kind_src, [" ".join(rest)], (), "")
    return ("keep" if w.keep else "wrap", rest, (), "")


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
            if a in ("-S", "--split-string"):
                value = args[i + 1] if i + 1 < len(args) else ""
                after = args[i + 2 :]
            else:
                value = a.split("=", 1)[1] if a.startswith("--") else a[2:]
                after = args[i + 1 :]
            if not _PLAIN_SCRIPT.fullmatch(value):
                return ("unparseable", [], (), "env -S splits a string into a command we do not parse")
            inner = _peel_env([*value.split(), *after])
            if inner is None:
                return None
            kind, rest, env2, note2 = inner
            return (kind, rest, tuple(assigns) + env2, note or note2)
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


_BASH_LONG = frozenset(
    {
        "--norc",
        "--noprofile",
        "--login",
        "--posix",
        "--restricted",
        "--verbose",
        "--version",
        "--help",
        "--debugger",
        "--dump-strings",
        "--dump-po-strings",
        "--pretty-print",
        "--noediting",
        "--protected",
        "--wordexp",
    }
)


def _peel_shell(base: str, args: list[str]) -> Peeled | None:
    """``bash [-opts] [+opts] [-o x] [-O x] [--rcfile f] -c SCRIPT [name args...]`` -> ("shell", [SCRIPT, ...]).

    Bash's own rules: option letters combine (``-xc``, ``-lc``), ``+`` turns an option off, ``-o``/``-O``
    take the next word, ``--`` or ``-`` ends the options, the script is the first word after them.
    Without -c the shell runs a script file (left to the knowledge: unknown, danger-full-access) or reads
    its script from standard input (dynamic).
    """
    i, n = 0, len(args)
    command_mode = False
    notes: list[tuple[str, str]] = []
    while i < n:
        a = args[i]
        if a in ("--", "-"):
            i += 1
            break
        if a.startswith("--"):
            if a in ("--rcfile", "--init-file"):
                return ("unparseable", [], (), f"{base} {a} runs another file's shell code")
            if a in _BASH_LONG:
                i += 1
                continue
            return ("unparseable", [], (), f"{base} option we do not know: {a}")
        if a[:1] in ("-", "+") and len(a) > 1:
            extra = 0
            for ch in a[1:]:
                if ch == "c":  # bash takes +c as -c too (checked against bash 5.2)
                    command_mode = True
                elif ch in "oO":
                    extra += 1
                    opt = args[i + extra] if i + extra < n else ""
                    if ch == "O" or opt == "noglob":
                        notes.append(("glob_changed", opt))
                elif ch == "f":
                    notes.append(("glob_changed", "f"))
            i += 1 + extra
            continue
        break
    rest = args[i:]
    if command_mode:
        return ("shell", rest, tuple(notes), "") if rest else None
    return None  # a script file, or the script on standard input: the shell stays an unknown program


# ---------------------------------------------------------------------------- brace expansion


def _brace_expand(segs: list[tuple[str, bool]]) -> list[list[tuple[str, bool]]] | None:
    """Bash brace expansion over unquoted text: ``{a,b}`` and ``{1..3}``; None when the result is too big."""
    # an empty quoted segment ('' or "") is kept as a zero-width quoted char: it keeps an empty word alive
    chars: list[tuple[str, bool]] = [(ch, q) for s, q in segs for ch in (s if s or not q else [""])]
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
        if not merged or all(not t for t, _ in merged):
            if any(q for _, q in r):
                out.append([("", True)])
            continue  # an unquoted empty result is removed, as bash does ({,a} is just a)
        out.append(merged)
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
            m = re.fullmatch(r"([-+]?\d+|[A-Za-z])\.\.([-+]?\d+|[A-Za-z])(?:\.\.([-+]?\d+))?", body)
            if not m or m.group(1).isalpha() != m.group(2).isalpha():
                continue
            inc = abs(int(m.group(3) or 1)) or 1
            if m.group(1).isalpha():
                a, b = ord(m.group(1)), ord(m.group(2))
                if any(not chr(x).isalpha() for x in range(min(a, b), max(a, b) + 1)):
                    return None  # {a..C} spans [ \ ] ^ _ `: bash's quote removal differs; refuse
                step = inc if b >= a else -inc
                items = [chr(x) for x in range(a, b + (1 if step > 0 else -1), step)]
            else:
                a, b = int(m.group(1)), int(m.group(2))
                if abs(b - a) // inc + 1 > MAX_BRACE_WORDS:
                    return None
                step = inc if b >= a else -inc
                lhs, rhs = m.group(1).lstrip("+-"), m.group(2).lstrip("+-")
                pad = (len(lhs) > 1 and lhs[0] == "0") or (len(rhs) > 1 and rhs[0] == "0")
                width = max(len(m.group(1)), len(m.group(2))) if pad else 0
                items = [f"{x:0{width}d}" if pad else str(x) for x in range(a, b + (1 if step > 0 else -1), step)]
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


PROCESS_SUBSTITUTION = "/dev/fd/63"  # what bash puts in place of <(cmd): a pipe, not a file
_ECHO_WORD = re.compile(r"\$\(\s*echo\s+([A-Za-z0-9_./@%+,:=~-]+)\s*\)")
_READ_SUBSTITUTION = re.compile(r"\$\(\s*<\s*([A-Za-z0-9_./~@%+,:=-]+)\s*\)")


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
