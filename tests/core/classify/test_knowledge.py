"""Every example of every entry of the command knowledge, run through the real classifier.

Adding a program to ``nexusd/core/classify/knowledge.py`` is one entry plus its examples; this one
parametrized test checks them all (issue 14: command knowledge as tested data).
"""

from __future__ import annotations

import pytest

from nexusd.core.classify import bash, commands
from nexusd.core.classify.knowledge import EXTRA_EXAMPLES, TABLE, Ex
from nexusd.core.model import Context, Flag, Requirement

_REQ = {"ro": Requirement.READ_ONLY, "ww": Requirement.WORKSPACE_WRITE, "dfa": Requirement.DANGER_FULL_ACCESS}
EXAMPLES: list[tuple[str, Ex]] = [(name, ex) for name, p in TABLE.items() for ex in p.examples]
EXAMPLES += [("(no entry)", ex) for ex in EXTRA_EXAMPLES]


@pytest.mark.parametrize(("name", "ex"), EXAMPLES, ids=[f"{n}: {e.cmd}"[:80] for n, e in EXAMPLES])
def test_example(world, name: str, ex: Ex) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(ex.cmd)
    assert cls.requirement == _REQ[ex.req], (ex.cmd, cls.notes)
    for f in ex.flags.split():
        if f.startswith("-"):
            assert Flag(f[1:]) not in cls.flags, (ex.cmd, cls.notes)
        else:
            assert Flag(f) in cls.flags, (ex.cmd, cls.flags, cls.notes)
    for r in ex.reads.split():
        assert any(p.endswith("/" + r.lstrip("/")) or p == r for p in cls.reads), (ex.cmd, cls.reads)
    for w in ex.writes.split():
        assert any(p.endswith("/" + w.lstrip("/")) or p == w for p in cls.writes), (ex.cmd, cls.writes)


def test_every_entry_kind_is_known() -> None:
    kinds = {"pure", "reader", "searcher", "writer", "modewriter", "copier", "parser"}
    assert {p.kind for p in TABLE.values()} <= kinds
    for name, p in TABLE.items():
        if p.kind == "parser":
            assert name in commands._PARSERS or name in ("sed", "sort", "uniq", "xxd", "find", "git", "dd"), name


@pytest.mark.parametrize(
    "word",
    ["./rg", "/tmp/x/rg", "rg/", "../bin/cat", "//usr/bin/cat", "/usr/bin/../../tmp/cat", "~/bin/cat", "bin/cat"],
)
def test_program_by_path_is_unknown(word: str) -> None:
    assert commands.program_name(word) is None
    eff = commands.effect(bash.ParsedCommand((word, "foo")))
    assert not eff.known and eff.requirement is Requirement.DANGER_FULL_ACCESS


@pytest.mark.parametrize("word", ["rg", "/usr/bin/rg", "/bin/cat", "/usr/local/bin/rg", "/opt/homebrew/bin/rg"])
def test_program_by_system_path_is_known(word: str) -> None:
    assert commands.program_name(word) == word.rsplit("/", 1)[-1]


# ---- issue 28.1: globs that expand into options (ParsedCommands built by hand: glob_args from the bash helper)


class _Fs:
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def realpath(self, path: str) -> str:
        return path

    def lexists(self, path: str) -> bool:
        return path in ("/ws", "/ws/.git")

    def size(self, path: str) -> int | None:
        return None

    def head(self, path: str, n: int) -> bytes | None:
        return None

    def glob(self, pattern: str, limit: int) -> list[str]:
        import fnmatch

        return [f"/ws/{n}" for n in self.names if fnmatch.fnmatchcase(f"/ws/{n}", pattern)]


def _classify_parsed(cmds: list[bash.ParsedCommand], names: list[str]):  # type: ignore[no-untyped-def]
    from nexusd.core.classify import _Acc, _command_effect

    acc = _Acc(Context(cwd="/ws", workspace_roots=("/ws",), home="/home/u"), _Fs(names))
    for c in cmds:
        _command_effect(c, commands.effect(c), ["/ws"], acc)
    return acc


@pytest.mark.parametrize(
    ("argv", "globs", "hidden"),
    [
        (("sed", "-n", "1p", "*"), {3}, True),  # a file named -i rewrites every file
        (("sort", "*"), {1}, True),  # --output=README.md
        (("git", "diff", "*"), {2}, True),  # --output=x
        (("rg", "foo", "*"), {2}, True),  # --pre=sh
        (("rg", "foo", "*.py"), {2}, True),
        (("rg", "foo", "?x"), {2}, True),
        (("rg", "foo", "[-]*"), {2}, True),
        (("rg", "foo", "-*"), {2}, True),
        (("tar", "czf", "x.tgz", "*"), {3}, True),  # --to-command=sh, --checkpoint-action=exec=sh
        (("find", ".", "-name", "*"), {3}, True),  # -delete, -exec
        (("tree", "*"), {1}, True),  # -o
        (("./tool", "*"), {1}, True),  # unknown program
        (("npm", "test", "*"), {2}, True),
        (("rg", "foo", "--", "*"), {3}, False),  # after --: a file name
        (("rg", "foo", "src/*"), {2}, False),  # cannot start with -
        (("rg", "foo", ".*"), {2}, False),
        (("echo", "*"), {1}, False),  # prints only
        (("cat", "*"), {1}, False),  # its options only read (and a file name holds no /)
        (("ls", "-la", "*"), {2}, False),
        (("grep", "foo", "*"), {2}, False),
        (("wc", "-l", "*"), {2}, False),
        (("head", "*"), {1}, False),
    ],
)
def test_glob_expanding_into_options(argv, globs, hidden) -> None:  # type: ignore[no-untyped-def]
    acc = _classify_parsed([bash.ParsedCommand(argv, glob_args=frozenset(globs))], [])
    assert (Flag.HIDDEN_EFFECT in acc.flags) is hidden, acc.notes
    if hidden:
        assert acc.requirement is Requirement.DANGER_FULL_ACCESS


@pytest.mark.parametrize(
    ("names", "earlier", "hidden"),
    [
        ([], [], False),
        (["a.txt", "b"], [], False),
        (["-f.env", "a"], [], True),
        ([], [("touch", "./-f.env")], True),
    ],
)
def test_glob_options_of_a_reader(names, earlier, hidden) -> None:  # type: ignore[no-untyped-def]
    cmds = [bash.ParsedCommand(a) for a in earlier] + [bash.ParsedCommand(("grep", "x", "*"), glob_args=frozenset({2}))]
    acc = _classify_parsed(cmds, names)
    assert (Flag.HIDDEN_EFFECT in acc.flags) is hidden, acc.notes


def test_recursive_delete_of_a_mount_point_inside_the_workspace() -> None:
    class _MountFs(_Fs):
        def is_mount(self, path: str) -> bool:
            return path == "/ws/data"

    from nexusd.core.classify import _Acc, _command_effect

    for argv in (
        ("rm", "-rf", "data"),
        ("rm", "-r", "data/"),
        ("chmod", "-R", "777", "data"),
        ("find", "data", "-delete"),
    ):
        acc = _Acc(Context(cwd="/ws", workspace_roots=("/ws",), home="/home/u"), _MountFs([]))
        c = bash.ParsedCommand(argv)
        _command_effect(c, commands.effect(c), ["/ws"], acc)
        assert Flag.CATASTROPHIC in acc.flags, argv
    acc = _Acc(Context(cwd="/ws", workspace_roots=("/ws",), home="/home/u"), _MountFs([]))
    c = bash.ParsedCommand(("rm", "-rf", "build"))
    _command_effect(c, commands.effect(c), ["/ws"], acc)
    assert Flag.CATASTROPHIC not in acc.flags


def _cls(world, cmd: str):  # type: ignore[no-untyped-def]
    return world.bash(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf /data",
        "rm -rf /tmp",
        "rm -rf /workspace",
        "rm -rf /srv",
        "rm -r -f /mnt/backup",
        "rm --recursive --force /opt/x",
        "find /data -delete",
        "rsync -a --delete src/ /srv/www",
        "git -C /srv/repo clean -fdx",
        "chmod -R 777 /data",
        "chown -R x /home",
        "rm -rf {out}",
        "rm -rf ../",
        "rm -rf escape/",
    ],
)
def test_recursive_delete_outside_workspace_is_catastrophic(world, cmd: str) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(world.sub(cmd))
    assert Flag.CATASTROPHIC in cls.flags, cls.notes


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf build",
        "rm -rf src/gen",
        "find src -name '*.pyc' -delete",
        "git clean -fdx",
        "chmod -R u+w src",
        "rsync -a --delete src/ out/",
    ],
)
def test_recursive_delete_inside_workspace_is_a_workspace_write(world, cmd: str) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(cmd)
    assert Flag.CATASTROPHIC not in cls.flags, cls.notes


# ---- classifier and engine together: what a suggested or broad allow rule must not cover


def _decide(world, command: str, allow: list[str], mode: str = "default"):  # type: ignore[no-untyped-def]
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "policy"))
    from policy_factories import call, policy, session

    from nexusd.core.engine import evaluate

    cls = world.bash(command)
    ctx = Context(cwd=world.ws, workspace_roots=(world.ws,), home=world.home)
    return evaluate(call(command=command), policy(allow=allow), session(mode), cls, ctx).verdict


@pytest.mark.parametrize(
    ("rule", "cmd"),
    [
        ("Bash(git fetch *)", "git fetch --upload-pack='touch pwn' origin"),
        ("Bash(git fetch *)", "git fetch -u 'touch pwn' origin"),
        ("Bash(git fetch:*)", "git fetch --upload-pack=id origin"),
        ("Bash(git *)", "git -c alias.x='!id' x"),
        ("Bash(git *)", "git myalias"),
        ("Bash(git log *)", "git log --output=/tmp/x"),
        ("Bash(sed *)", "sed -n '1e id' README.md"),
        ("Bash(rg *)", "rg --pre=sh foo"),
        ("Bash(sort *)", "sort --compress-program=sh README.md"),
        ("Bash(tar *)", "tar -xf a.tar"),
        ("Bash(man *)", "man -P 'sh -c id' ls"),
        ("Bash(nexusctl *)", "nexusctl mode bypass"),
        ("Bash(*)", "nexusctl trust ."),
        ("Bash(cat *)", "cat --number=/etc/passwd README.md"),
        ("Bash(ls *)", "ls -o/etc/x"),
    ],
)
def test_allow_rule_does_not_cover_what_the_words_hide(world, rule: str, cmd: str) -> None:  # type: ignore[no-untyped-def]
    v = _decide(world, cmd, [rule])
    assert v.decision != "allow", (rule, cmd, v.reason)


@pytest.mark.parametrize(
    ("rule", "cmd"),
    [
        ("Bash(git fetch *)", "git fetch origin"),
        ("Bash(git fetch *)", "git fetch --prune origin"),
        ("Bash(sort *)", "sort README.md"),
        ("Bash(npm run test *)", "npm run test -- --grep=foo"),
    ],
)
def test_allow_rule_still_covers_the_plain_command(world, rule: str, cmd: str) -> None:  # type: ignore[no-untyped-def]
    assert _decide(world, cmd, [rule]).decision == "allow"


def test_nested_repository_config_is_a_hidden_effect(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    from pathlib import Path

    # by its package path: a bare "conftest" is whichever conftest.py the worker imported first
    from tests.core.classify.conftest import World

    world = World(Path(os.path.realpath(tmp_path)))  # its own: the shared one stays clean

    nested = Path(world.ws, "vendor", "evil")
    os.makedirs(nested / ".git", exist_ok=True)
    (nested / ".git" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    for cmd, cwd in (
        ("git -C vendor/evil status", None),
        ("git status", str(nested)),
        ("cd vendor/evil && git status", None),
        ("git -C vendor -C evil log", None),
        ("git -C vendor/evil fetch origin", None),
        ("cd vendor/evil && git commit -m x", None),
        ("git commit -m x", str(nested)),
    ):
        cls = world.bash(cmd, cwd=cwd) if cwd else world.bash(cmd)
        assert Flag.HIDDEN_EFFECT in cls.flags, (cmd, cls.notes)
        assert cls.requirement is Requirement.DANGER_FULL_ACCESS
        v = _decide(world, cmd, ["Bash(git *)", "Bash(cd *)"]) if not cwd else None
        assert v is None or v.decision != "allow"
    assert Flag.HIDDEN_EFFECT not in world.bash("git status").flags


@pytest.mark.parametrize(
    ("table", "prefixes"),
    [
        (commands.GIT_BAD_GLOBAL, commands._GIT_BAD_GLOBAL_PREFIXES),
        (commands.GIT_BAD_OPTS, commands._GIT_BAD_OPTS_PREFIXES),
        (("--web",), commands._GIT_WEB_PREFIXES),
    ],
)
def test_git_abbreviations_are_the_table_scanned(table: tuple[str, ...], prefixes: frozenset[str]) -> None:
    """The prefix sets computed at import answer exactly what a scan of the option table answers: every
    prefix of every entry (and one character past it), git's own full options of four letters included."""

    def scanned(key: str) -> bool:
        return (
            len(key) >= 4
            and key.startswith("--")
            and key not in commands._GIT_FULL_SHORTER
            and any(b.startswith(key) for b in table if b.startswith("--"))
        )

    keys = {b[:n] + tail for b in table for n in range(len(b) + 1) for tail in ("", "x", "=")}
    keys |= commands._GIT_FULL_SHORTER | {"--stat", "--oneline", "-c", "--"}
    for key in sorted(keys):
        assert commands._git_abbrev(key, prefixes) == scanned(key), key
    assert commands._git_abbrev("--outp", commands._GIT_BAD_OPTS_PREFIXES)  # git diff --outp=x is --output
