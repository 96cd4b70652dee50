"""Issue 14 classes 3-7 and the loop-variable over-block: what bash really runs, in several spellings."""

from __future__ import annotations

import pytest

from nexusd.core.classify import bash
from nexusd.core.classify.wrappers import WRAPPERS
from nexusd.core.model import Flag

DYN, ENV, HID, UNP = Flag.DYNAMIC, Flag.DANGEROUS_ENV, Flag.HIDDEN_EFFECT, Flag.UNPARSEABLE

EXAMPLES = [(w.name, cmd, want) for w in WRAPPERS.values() for cmd, want in w.examples]


@pytest.mark.parametrize(("name", "command", "want"), EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_wrapper_examples(name: str, command: str, want: tuple[str, ...] | None) -> None:
    sa = bash.parse(command)
    argvs = [c.argv for c in sa.commands]
    if want is None:
        assert all(a[0] == name for a in argvs), argvs
    else:
        assert argvs[-1] == want, argvs


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ("bash -c -- 'rm x'", ("rm", "x")),
        ("bash +x -c 'rm x'", ("rm", "x")),
        ("bash +c 'rm x'", ("rm", "x")),
        ("bash -oc posix 'rm x'", ("rm", "x")),
        ("bash -cO extglob 'rm x'", ("rm", "x")),
        ("bash -ec 'rm x' -x", ("rm", "x")),
        ("bash -o pipefail -c 'rm x'", ("rm", "x")),
        ("bash +o errexit -c 'rm x'", ("rm", "x")),
        ("bash -O extglob -c 'rm x'", ("rm", "x")),
        ("bash -xc 'rm x'", ("rm", "x")),
        ("bash -lc 'rm x'", ("rm", "x")),
        ("bash --norc --noprofile -c 'rm x'", ("rm", "x")),
        ("busybox sh -c 'rm x'", ("rm", "x")),
        ("dash -c 'rm x'", ("rm", "x")),
    ],
)
def test_shell_options(command: str, inner: tuple[str, ...]) -> None:
    assert bash.parse(command).commands[-1].argv == inner


@pytest.mark.parametrize(
    "command", ["fish -c 'rm (ls)'", "csh -c 'rm `ls`'", "tcsh -c 'echo $x'", "zsh -c 'ls *(e:rm:)'"]
)
def test_foreign_shells_are_not_bash(command: str) -> None:
    assert UNP in bash.parse(command).flags


@pytest.mark.parametrize("command", ["bash --rcfile evil -i -c ls", "bash --init-file x -c ls"])
def test_rcfile_runs_code(command: str) -> None:
    assert UNP in bash.parse(command).flags


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("$'git\\0status' push", ("git", "push")),
        ("$'git\\x00status' push", ("git", "push")),
        ("$'git\\u0000x' push", ("git", "push")),
        ("$'git\\c@x' push", ("git", "push")),
        ("g$'i\\0x't push", ("git", "push")),
        ("echo a\\\nb", ("echo", "ab")),
        ('echo "a\\\nb"', ("echo", "ab")),
    ],
)
def test_word_evaluation(command: str, argv: tuple[str, ...]) -> None:
    assert bash.parse(command).commands[0].argv == argv


@pytest.mark.parametrize("command", ["/usr/bin/ca? x", "/bin/r[m] -rf x", "c*t x"])
def test_glob_command_name_is_dynamic(command: str) -> None:
    assert DYN in bash.parse(command).flags


@pytest.mark.parametrize(
    "command",
    [
        "shopt -s dotglob; rm *",
        "shopt -s globstar && cat **/*.pem",
        "set -f; rm *",
        "GLOBIGNORE=x; ls *",
        "shopt -s nocaseglob; cat *.PEM",
        "for i in 1 2; do ls *; shopt -s dotglob; done",
    ],
)
def test_glob_options_make_globs_dynamic(command: str) -> None:
    sa = bash.parse(command)
    assert any(c.glob_args & c.dynamic_args for c in sa.commands) or ENV in sa.flags


def test_glob_args() -> None:
    assert bash.parse("sed -n 1p *").commands[0].glob_args == frozenset({3})
    assert bash.parse("timeout 5 sort *.txt").commands[0].glob_args == frozenset({1})
    assert bash.parse("cat '*' \\? \"[a]\"").commands[0].glob_args == frozenset()
    assert bash.parse("ls src/[ab].py").commands[0].glob_args == frozenset({1})


@pytest.mark.parametrize(
    "command",
    [
        "x='a[$(id)]'; (( x ))",
        "x='a[$(id)]'; [[ $x -eq 1 ]]",
        "x='a[$(id)]'; [[ x -lt 1 ]]",
        "[[ 'a[$(id)]' -eq 1 ]]",
        "x='a[$(id)]'; echo $((x + 1))",
        "x='a[$(id)]'; echo $[x]",
        "x='a[$(id)]'; let y=x",
        "x='a[$(id)]'; declare -i y; y=x",
        "declare -i y='a[$(id)]'",
        "x='a[$(id)]'; b=(1); echo ${b[x]}",
        "x='a[$(id)]'; a[$x]=1",
        "x='a[$(id)]'; y=(a); echo ${y[@]:x}",
        "x='a[$(id)]'; for ((i=x;i<0;i++)); do :; done",
        "echo ${!x}",
        "x='$(id)'; echo ${x@P}",
        "[[ -v 'a[$(id)]' ]]",
        "test -v 'a[$(id)]'",
        "read 'b[$(id)]' <<< x",
        "printf -v 'b[$(id)]' x",
        "bash -c '(( $1 ))' _ 'a[$(id)]'",
    ],
)
def test_arithmetic_contexts_are_dynamic(command: str) -> None:
    assert DYN in bash.parse(command).flags, bash.parse(command).notes


@pytest.mark.parametrize(
    "command",
    [
        "i=0; (( i++ ))",
        "echo $((1+2))",
        "[[ -f x ]] && cat x",
        "for ((i=0;i<3;i++)); do echo $i; done",
        "[[ $# -eq 0 ]]",
        "n=5; [[ $n -gt 1 ]]",
        "for i in 1 2 3; do (( i > 1 )); done",
        "echo ${!a[@]}",
    ],
)
def test_arithmetic_not_over_blocked(command: str) -> None:
    assert DYN not in bash.parse(command).flags, bash.parse(command).notes


def test_test_and_arith_commands_are_visible() -> None:
    assert bash.parse("[[ -f x ]]").commands[0].argv == ("[[", "-f", "x", "]]")
    assert bash.parse("(( i++ ))").commands[0].argv == ("((", "i++", "))")
    assert DYN in bash.parse("[[ -f $(id) ]]").flags
    assert DYN in bash.parse("(( $(id) ))").flags


@pytest.mark.parametrize(
    "command",
    [
        "printf -v PATH /tmp",
        "read PATH <<< /tmp",
        "read -r -a PATH <<< /tmp",
        "read -aPATH <<< /tmp",
        "mapfile -t PATH < f",
        "readarray LD_PRELOAD < f",
        "declare -n r=PATH; r=/tmp",
        "local -n r=LD_PRELOAD",
        "echo ${PATH:=/tmp}",
        "echo ${BASH_ENV=/tmp/x}",
        "getopts a PATH",
        "let PATH=1",
        "(( PATH=1 ))",
        "for PATH in /tmp; do ls; done",
        "select PATH in /tmp; do ls; done",
        "wait -p GIT_DIR",
        "coproc PATH { ls; }",
        "f() { id; }; export -f f",
        "declare -fx f",
        "export PATH",
    ],
)
def test_dangerous_variables_without_assignment_syntax(command: str) -> None:
    assert ENV in bash.parse(command).flags, bash.parse(command).notes


@pytest.mark.parametrize("command", ['read -a "$n" <<< x', 'printf -v "$n" x', "declare -n r; r=$x; r=1"])
def test_variable_names_computed(command: str) -> None:
    assert DYN in bash.parse(command).flags


@pytest.mark.parametrize(
    "command",
    [
        "find . -exec sh -c 'cat {}' \\;",
        "find . -name '*.py' -exec bash -c \"echo {}\" +",
        "ls | xargs -I{} sh -c 'cat {}'",
        "ls | xargs -I % bash -c 'echo %'",
        "ls | xargs -i sh -c 'echo {}'",
        "ls | xargs --replace sh -c 'echo {}'",
        "find . -exec python3 -c 'print(\"{}\")' \\;",
        "parallel 'echo {}' ::: a b",
    ],
)
def test_placeholders_pasted_into_source(command: str) -> None:
    assert HID in bash.parse(command).flags, bash.parse(command).notes


@pytest.mark.parametrize(
    "command",
    ["find . -exec sh -c 'cat \"$1\"' sh {} \\;", "find . -exec sh -c 'cat \"$@\"' sh {} +", "ls | xargs -I{} cat {}"],
)
def test_placeholder_as_argument_is_fine(command: str) -> None:
    assert HID not in bash.parse(command).flags


def test_loop_variable_binding() -> None:
    sa = bash.parse('for f in src/*.py; do cat "$f"; done')
    assert DYN not in sa.flags
    assert sa.commands[0].argv == ("cat", "src/*.py") and sa.commands[0].glob_args == frozenset({1})
    sa = bash.parse("for f in a.txt b.txt; do cat $f; done")
    assert [c.argv for c in sa.commands] == [("cat", "a.txt"), ("cat", "b.txt")] and DYN not in sa.flags
    assert sa.commands[0].dynamic_args == frozenset()
    for dynamic in (
        'for f in $(ls); do cat "$f"; done',
        'for f in "$@"; do cat "$f"; done',
        'for f in a; do f=/etc/passwd; cat "$f"; done',
        "for f in src/*.py; do cat $f; done",
    ):
        sa = bash.parse(dynamic)
        assert DYN in sa.flags or any(c.dynamic_args for c in sa.commands), dynamic


@pytest.mark.parametrize("command", ["timeout --bogus 5 rm x", "nice -5 rm x", "setsid --weird rm x", "taskset -p 1 2"])
def test_unknown_wrapper_options_fail_closed(command: str) -> None:
    """An option the wrapper table does not know stops the peeling: the wrapper stays an (opaque) program."""
    cmds = bash.parse(command).commands
    assert len(cmds) == 1 and cmds[0].argv == tuple(command.split())


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ("npm exec -c 'rm x'", ("rm", "x")),
        ("npm exec --call='rm x'", ("rm", "x")),
        ("fd . -x rm", ("rm",)),
        ("time -p rm x", ("rm", "x")),
        ("sudo -s rm x", ("rm", "x")),
        ("env -i -S'rm x'", ("rm", "x")),
    ],
)
def test_more_wrappers(command: str, inner: tuple[str, ...]) -> None:
    assert inner in [c.argv for c in bash.parse(command).commands]


@pytest.mark.parametrize("command", ["fd -x sh -c 'cat {}'", "fd . -X bash -c 'rm {/}'"])
def test_fd_placeholders(command: str) -> None:
    assert HID in bash.parse(command).flags


def test_posix_sh_without_ansi_c() -> None:
    # dash (Debian's sh) has no $'...': there $'\x72m' is the word $\x72m, not rm
    assert UNP in bash.parse("sh -c \"$'\\x72m' x\"").flags
    assert UNP not in bash.parse("bash -c \"$'\\x72m' x\"").flags


def test_loop_binding_needs_the_name_untouched_everywhere() -> None:
    # an enclosing loop runs g (defined later) before the second cat: f is not the list value then
    sa = bash.parse('for i in 1 2; do for f in a; do g; cat "$f"; done; g() { f=/x; }; done')
    assert all(c.argv != ("cat", "a") for c in sa.commands)
    assert DYN not in bash.parse("(( ${#a[@]} > 0 ))").flags


@pytest.mark.parametrize(
    "command", ["echo $'\\xff'", "cat ~+/x", "cat ~-/x", "cat '~'/x", "cat ~''/x", "make P=~/x", "cat ~1/x"]
)
def test_words_path_checks_cannot_read(command: str) -> None:
    assert DYN in bash.parse(command).flags


def test_loop_values_with_home_tilde() -> None:
    sa = bash.parse('for d in ~/proj ~; do ls "$d"; done')
    assert [c.argv for c in sa.commands] == [("ls", "~/proj"), ("ls", "~")] and DYN not in sa.flags
    assert DYN in bash.parse("for d in '~/p'; do ls \"$d\"; done").flags  # a literal ~ is not home
    sa = bash.parse('for d in ~/p; do ls "x$d"; done')  # bash expanded it: x/home/... is not x~/p
    assert DYN in sa.flags or any(c.dynamic_args for c in sa.commands)


@pytest.mark.parametrize(
    "command",
    [
        "GCONV_PATH=. iconv -f x",
        "export LUA_INIT='os.execute(\"id\")'",
        "TAR_OPTIONS=--to-command=sh tar xf a.tar",
        "KUBECONFIG=k kubectl get pods",
        "env GOFLAGS=-toolexec=./x go build",
        "GLIBC_TUNABLES=x ls",
    ],
)
def test_more_dangerous_variables(command: str) -> None:
    assert ENV in bash.parse(command).flags


@pytest.mark.parametrize("command", ["compgen -C 'touch pwn' x", "compgen -F f x"])
def test_compgen_runs_code(command: str) -> None:
    assert DYN in bash.parse(command).flags
