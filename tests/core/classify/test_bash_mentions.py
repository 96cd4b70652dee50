"""A loop variable is bound to its values only when its name stands alone nowhere else in the command.

The walker counted that with one regex scan of the whole command per loop, which made 1,500 loops in one
command cost 1.5 s of the daemon's thread; it now counts every name in one pass. The two counts are held
equal here, over generated commands.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nexusd.core.classify import bash
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
    # ~45 KB, under the parse limit
    loops = "; ".join(f"for v{i} in /etc/passwd; do cat $v{i}; done" for i in range(1000))
    analysis = bash._analyse(loops, 0)
    reads = {w for c in analysis.commands for w in c.argv[1:]}
    assert reads == {"/etc/passwd"}, sorted(reads)[:5]
    shared = "; ".join("for v in /etc/passwd; do cat $v; done" for _ in range(3))
    assert {w for c in bash._analyse(shared, 0).commands for w in c.argv[1:]} == {"$v"}  # v is named thrice: unbound
