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


@pytest.mark.parametrize("word", ["./rg", "/tmp/x/rg", "rg/", "../bin/cat", "//usr/bin/cat", "/usr/bin/../../tmp/cat",
                                  "~/bin/cat", "bin/cat"])
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
    ("argv", "globs", "names", "hidden"),
    [
        (("sed", "-n", "1p", "*"), {3}, ["-i", "a.txt"], True),
        (("sort", "*"), {1}, ["--output=README.md", "a"], True),
        (("git", "diff", "*"), {2}, ["--output=x"], True),
        (("rg", "foo", "*"), {2}, ["--pre=sh"], True),
        (("rg", "foo", "*.py"), {2}, ["-x.py"], True),
        (("cat", "?x"), {1}, ["-x"], True),
        (("rg", "foo", "[-]*"), {2}, ["-z"], True),
        (("sort", "*"), {1}, ["a", "b"], False),  # nothing planted: an ordinary glob
        (("rg", "foo", "--", "*"), {3}, ["--pre=sh"], False),  # after --: a file name
        (("rg", "foo", "src/*"), {2}, ["--pre=sh"], False),  # cannot start with -
        (("echo", "*"), {1}, ["-e"], False),  # prints only
    ],
)
def test_glob_expanding_into_options(argv, globs, names, hidden) -> None:  # type: ignore[no-untyped-def]
    acc = _classify_parsed([bash.ParsedCommand(argv, glob_args=frozenset(globs))], names)
    assert (Flag.HIDDEN_EFFECT in acc.flags) is hidden, acc.notes
    if hidden:
        assert acc.requirement is Requirement.DANGER_FULL_ACCESS


def test_glob_option_planted_earlier_in_the_same_command() -> None:
    # touch ./--output=x; sort *   (the file does not exist yet when the gate looks)
    acc = _classify_parsed(
        [bash.ParsedCommand(("touch", "./--output=x")), bash.ParsedCommand(("sort", "*"), glob_args=frozenset({1}))],
        [],
    )
    assert Flag.HIDDEN_EFFECT in acc.flags


def _cls(world, cmd: str):  # type: ignore[no-untyped-def]
    return world.bash(cmd)


@pytest.mark.parametrize(
    "cmd",
    ["rm -rf /data", "rm -rf /tmp", "rm -rf /workspace", "rm -rf /srv", "rm -r -f /mnt/backup",
     "rm --recursive --force /opt/x", "find /data -delete", "rsync -a --delete src/ /srv/www",
     "git -C /srv/repo clean -fdx", "chmod -R 777 /data", "chown -R x /home", "rm -rf {out}", "rm -rf ../",
     "rm -rf escape/"],
)
def test_recursive_delete_outside_workspace_is_catastrophic(world, cmd: str) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(world.sub(cmd))
    assert Flag.CATASTROPHIC in cls.flags, cls.notes


@pytest.mark.parametrize("cmd", ["rm -rf build", "rm -rf src/gen", "find src -name '*.pyc' -delete",
                                 "git clean -fdx", "chmod -R u+w src", "rsync -a --delete src/ out/"])
def test_recursive_delete_inside_workspace_is_a_workspace_write(world, cmd: str) -> None:  # type: ignore[no-untyped-def]
    cls = world.bash(cmd)
    assert Flag.CATASTROPHIC not in cls.flags, cls.notes
