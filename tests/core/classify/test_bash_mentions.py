"""A loop variable is bound to its values only when its name stands alone nowhere else in the command.

The walker counted that with one regex scan of the whole command per loop, which made 1,500 loops in one
command cost 1.5 s of the daemon's thread; it now counts every name in one pass. The two counts are held
equal here, over generated commands.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexusd.core.classify import bash
from nexusd.core.model import Flag
from tests.conftest import examples

PIECES = ["a", "ab", "a1", "_a", "é", "x", "$", "{", "}", "$a", "${a}", " ", ";", "=", "-", ".", "\n", "(", ")", "'"]
NAMES = ["a", "ab", "a1", "_a", "é", "x", "aé"]


def _old_count(name: str, source: bytes) -> int:
    whole = source.decode("utf-8", "surrogateescape")
    return len(re.findall(rf"(?<![$\w{{]){re.escape(name)}\b", whole))


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_one_pass_count_equals_the_per_name_scan(pieces: list[str]) -> None:
    walker = bash._Walker(0)
    walker.source = "".join(pieces).encode()
    for name in NAMES:
        assert walker._mentions(name) == _old_count(name, walker.source), name


def test_many_loops_bind_as_before() -> None:
    """Each loop's variable is bound (its values seen by the body) when it stands alone nowhere else."""
    loops = "; ".join(f"for v{i} in /etc/passwd; do cat $v{i}; done" for i in range(200))
    analysis = bash._analyse(loops, 0)
    reads = {w for c in analysis.commands for w in c.argv[1:]}
    assert reads == {"/etc/passwd"}, sorted(reads)[:5]
    shared = "; ".join("for v in /etc/passwd; do cat $v; done" for _ in range(3))
    assert {w for c in bash._analyse(shared, 0).commands for w in c.argv[1:]} == {"$v"}  # v is named thrice: unbound


def _commands(n: int, make: str) -> str:
    return "; ".join(make.format(i=i) for i in range(n))


@pytest.mark.parametrize(
    "command",
    [
        _commands(3000, "ln -s l{i} m{i}") + "; cat m0",  # links made earlier are checked for every later path
        _commands(300, "python3 -c 'open(\"f{i}\")'"),  # each script is analysed in turn
        "grep -r x " + " ".join(f"d{i}" for i in range(3000)),  # operands past the word budget
        "tar -cf a.tar " + " ".join(f"d{i}" for i in range(2100)),
        _commands(3, "bash -c '" + _commands(100, "cat f{i}").replace("{", "{{").replace("}", "}}") + "'"),
        "for v in " + " ".join(f"/d{i}" for i in range(16)) + "; do " + _commands(20, "cat $v/f{i}") + "; done",
    ],
    ids=["links", "python -c", "grep -r operands", "tar operands", "nested scripts share it", "loop passes"],
)
def test_more_than_one_decision_checks_is_unparseable(command: str) -> None:
    """Past MAX_SIMPLE_COMMANDS simple commands or MAX_WORDS words (nested scripts and each loop value's pass
    included) the command is not classified piecemeal: it is unparseable, never allowed by a mode or rule."""
    analysis = bash.parse(command)
    assert Flag.UNPARSEABLE in analysis.flags and not analysis.commands
    assert any("too many commands or words" in n for n in analysis.notes)


def test_a_long_but_ordinary_command_is_still_classified() -> None:
    """The control: 201 commands, 1,802 words."""
    analysis = bash.parse(_commands(200, "cat f{i}") + "; git add " + " ".join(f"f{i}" for i in range(1400)))
    assert Flag.UNPARSEABLE not in analysis.flags and len(analysis.commands) == 201
