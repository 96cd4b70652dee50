"""The plain-command path (``bash._plain_split``) gives exactly the analysis tree-sitter's walk gives.

Most commands an agent runs are plain words and ``'...'`` strings joined by ``;``, ``&&``, ``||`` and ``|``;
they are split without the parser (the classification benchmark's target needs it). The property held
here: whenever the plain path takes a command, ``_analyse`` returns the same ``ShellAnalysis`` (commands,
argv, wrappers, stdin fed by ``echo ... |``, flags, notes) as with ``fast=False``; and everything outside its
grammar (expansions, redirects, keywords, assignments, syntax errors, ``&``) goes to tree-sitter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.bench.scenarios import DEFAULT_CORPUS
from nexusd.core.classify import bash
from nexusd.core.model import Flag
from tests.attack_corpus import CASES

REPO = Path(__file__).resolve().parents[3]


def takes_plain_path(command: str) -> bool:
    return bash._PLAIN_CHARS.fullmatch(command) is not None and bash._plain_split(command) is not None


def same_analysis(command: str) -> None:
    assert bash._analyse(command, 0) == bash._analyse(command, 0, fast=False), command


def _test_strings() -> list[str]:
    """Every string literal in the test suite and the benchmark corpus: commands written by attackers and users."""
    found: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 400:
                found.add(node.value)
    found.update(DEFAULT_CORPUS.read_text().splitlines())
    found.update(c for _cls, c, _exp in CASES if isinstance(c, str))
    return sorted(found)


def test_every_known_command_agrees() -> None:
    taken = 0
    for command in _test_strings():
        if takes_plain_path(command):
            taken += 1
            same_analysis(command)
    assert taken > 1000  # the path is really used (the corpus alone has ~940 plain commands)


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git status && ls -la | wc -l; pytest -q || true",
        "ls;",
        "git  status   -s ;  ls  ",
        "grep -rn 'TODO: x' src | head -20",
        "find . -name '*.py' -exec cat '{}' ';'",
        "sudo -u root cat x",
        "timeout 5 bash -c 'curl x | sh'",
        "env PATH=/tmp ls",
        "xargs rm < x" if False else "xargs rm -rf",
        "echo 'curl evil' | bash",
        "echo hi there | sh",
        "printf 'id' | sh -s",
        "echo -n x | sh",
        "nexusctl mode bypass",
        "python3 -m nexusd.ctl rules add x",
        "cat '~/.ssh/id_rsa'",
        "ls '*'",
        "bash -c 'x=1; (( x ))'",
        "x a'b'c 'x''y' --n='*.py' ''",
        "sh -c 'git status; rm -rf /'",
        "find . -delete",
        "rm -rf /",
        "git -c core.pager=sh log",
        "source .venv/bin/activate",
        ". x",
        'echo "x"',
        'grep -rn "sync_export" src/db',
        'grep -r "a b" --include="*.py" . | head -20',
        'echo "" x ""',
        'echo " a  " | sh',
        'echo "id" | bash',
        'echo "%s" | sh',
        'printf "a b" | sh',
        'echo "5" | sh',
        'x "a""b"\'c\'d"e"',
        'git commit -m "fix: a (b) #1; c && d | e & f"',
        'cat "~/.ssh/id_rsa" "*" "{a,b}" "[ab]" "a:~"',
        'ls x="~" y:"~"',
        'sh -c "curl x | sh"',
        'bash -c "rm -rf /"',
        'python3 -c "print(1)"',
        'rg -n "a|b" --type py',
        'find . -name "*.py" -exec cat "{}" ";"',
        "cat ~/.ssh/id_rsa",
        "git show HEAD~7 --stat",
        "ls ~ ~/x ~+ ~- ~+/x ~1 ~root ~root/x a~b",
        "make a:~/y x:~ --prefix:~/z",
        "cat ~'/x' ~\"\"/x ~'' ~x'y'",
        "echo ~ | sh",
        "sudo -u x cat ~/.aws/credentials",
        "bash -c 'cat ~/.ssh/id_rsa'",
    ],
)
def test_plain_cases_agree(command: str) -> None:
    assert takes_plain_path(command), command
    same_analysis(command)


@pytest.mark.parametrize(
    "command",
    [
        "",
        " ",
        "; ls",
        "ls && ",
        "a || ",
        "a |",
        "a ;; b",
        "a ||| b",
        "ls & ",
        "a & b",
        "a &&& b",  # syntax / &
        "x '",
        "x 'a",
        "A=1 ls",
        "PAGER=x git log",
        "export A=1",
        "declare -n r=PATH",
        "unset PATH",
        "let x=1",
        "if true",
        "for x",
        "time ls",
        "coproc ls",
        "! ls",
        "{ ls; }",
        "'ls' x",
        "l's' x",  # keywords, quoted names
        "echo 5 | sh",
        "echo -3 | sh",
        "echo a 1.5 | sh",  # tree-sitter may call these words numbers
        "echo $HOME",
        "ls *",
        "ls {a,b}",
        "make PREFIX=~/x",
        "x =~",
        'echo "$HOME"',
        'echo "`id`"',
        'echo "a\\b"',
        'echo "a!b"',
        'echo "it\'s"',
        'echo "x',
        "ls > x",
        "cat < x",
        "ls\nrm x",
        "ls\tx",
        "a\\ b",
        "echo `id`",
        "5%",
        "x a%%",
        "kill %1",
        "ls # c",
        "ls (x)",
        "cat [ab]",
        "echo x\x00",
        "echo é",
    ],
)
def test_outside_the_grammar_goes_to_tree_sitter(command: str) -> None:
    assert not takes_plain_path(command), command
    same_analysis(command)  # trivially the same path, but it must not raise either


def test_syntax_errors_stay_unparseable() -> None:
    for command in ("; ls", "ls &&", "a | | b", "a && || b"):
        assert Flag.UNPARSEABLE in bash.parse(command).flags, command


# ---- generated commands in (and around) the plain grammar
_NAMES = [
    "git",
    "ls",
    "cat",
    "echo",
    "printf",
    "sh",
    "bash",
    "zsh",
    "sudo",
    "env",
    "timeout",
    "xargs",
    "find",
    "rm",
    "cp",
    "nexusctl",
    "python3",
    "npm",
    "cd",
    "source",
    ".",
    "eval",
    "read",
    "mapfile",
    "nice",
    "nohup",
    "exec",
    "command",
    "builtin",
    "hash",
    "fd",
    "parallel",
    "watch",
    "script",
    "flock",
    "su",
    "busybox",
    "at",
    "true",
    "test",
    "[",
    "ln",
    "apply_patch",
    "x",
    "5",
    "-",
    "in",
    "do",
]
_ARGS = [
    "-c",
    "-s",
    "-e",
    "-n",
    "-p",
    "-r",
    "-rf",
    "--",
    "-",
    "status",
    "log",
    "-exec",
    "{}",
    ";",
    "+",
    "-I",
    "x",
    "1",
    "-3",
    "1.5",
    "0x1",
    "+2",
    "/etc/passwd",
    "~",
    "~/x",
    "~+",
    "x=~/y",
    "a:~",
    "HEAD~2",
    ".",
    "..",
    "a=b",
    "PATH=/tmp",
    "%s",
    "-u",
    "root",
    "5",
    "--eval",
    "-m",
    "nexusd.ctl",
    "--output=x",
    "@file",
    "a:b",
    "a,b",
    "id",
    "curl",
]
_QUOTED = [
    "'curl x | sh'",
    "'id'",
    "'*.py'",
    "''",
    "'a b'",
    "'$HOME'",
    "'~/x'",
    "'{a,b}'",
    "'x; rm -rf /'",
    "'%s'",
    "'-n'",
    "'git status'",
    "'a\"b'",
    "'5'",
    '"curl x | sh"',
    '"*.py"',
    '""',
    '" a  "',
    '"~/x"',
    '"{a,b}"',
    '"x; rm -rf /"',
    '"%s"',
    '"-n"',
    '"5"',
    '"(a) #b [c]"',
]
_SEPS = [" ; ", ";", " && ", "&&", " || ", " | ", "|", " & ", "  ;  "]


@st.composite
def plain_commands(draw: st.DrawFn) -> str:
    stages = []
    for _ in range(draw(st.integers(1, 4))):
        name = st.sampled_from(_NAMES + _QUOTED[:3]) | st.text(alphabet="aZ5_./=:,@+~-", min_size=1, max_size=4)
        words = [draw(name)]
        for _ in range(draw(st.integers(0, 5))):
            pick = draw(st.sampled_from(["arg", "arg", "quoted", "glued", "random"]))
            if pick == "random":  # any word of the plain alphabet (tree-sitter lexes some of them its own way)
                words.append(draw(st.text(alphabet="aZ5_./=:,@+~-", min_size=1, max_size=6)))
            elif pick == "arg":
                words.append(draw(st.sampled_from(_ARGS + _NAMES)))
            elif pick == "quoted":
                words.append(draw(st.sampled_from(_QUOTED)))
            else:
                words.append(draw(st.sampled_from(_ARGS)) + draw(st.sampled_from(_QUOTED)))
        stages.append(" ".join(words))
    out = stages[0]
    for stage in stages[1:]:
        out += draw(st.sampled_from(_SEPS)) + stage
    return out + draw(st.sampled_from(["", "", ";", " ;", " &&", " |"]))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_commands())
def test_generated_commands_agree(command: str) -> None:
    same_analysis(command)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="ab5_./=:,@+-'; |&%\t\\$*~{}\"#", max_size=24))
def test_arbitrary_text_agrees(command: str) -> None:
    same_analysis(command)
