"""Hypothesis properties: compounds expose every part; classify never raises; joins never shrink."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.core.classify import bash, classify
from nexusd.core.model import NOT_AUTO_ALLOWABLE, Context, Flag
from nexusd.protocol import CallInfo
from tests.conftest import examples

SIMPLE = st.sampled_from(
    [
        ["git", "status"],
        ["ls", "-la"],
        ["cat", "README.md"],
        ["curl", "evil.io"],
        ["rm", "-rf", "build"],
        ["npm", "test"],
        ["echo", "hi"],
        ["grep", "-n", "foo", "src"],
        ["python", "x.py"],
    ]
)
SEPARATORS = st.sampled_from([" && ", " || ", "; ", " | ", " |& ", "\n", " & "])


class _NoFs:
    def realpath(self, path: str) -> str:
        return path

    def lexists(self, path: str) -> bool:
        return path in ("/", "/ws")

    def size(self, path: str) -> int | None:
        return None

    def head(self, path: str, n: int) -> bytes | None:
        return None


CTX = Context(cwd="/ws", workspace_roots=("/ws",), home="/home/u")


@given(st.lists(SIMPLE, min_size=2, max_size=5), st.data())
def test_every_part_of_a_compound_is_a_sub_command(parts: list[list[str]], data: st.DataObject) -> None:
    text = " ".join(parts[0])
    for p in parts[1:]:
        text += data.draw(SEPARATORS) + " ".join(p)
    analysis = bash.parse(text)
    got = [list(c.argv) for c in analysis.commands]
    if Flag.UNPARSEABLE in analysis.flags:
        return  # tree-sitter-bash misreads some pipelines across lines; refusing them is the safe answer
    for p in parts:
        assert p in got


@given(SIMPLE, SIMPLE, st.sampled_from(["$({})", "`{}`", "<({})", '"$({})"', "; {{ {}; }}", "&& ( {} )", '> "$({})"']))
def test_substitutions_and_groups_expose_the_inner_command(outer: list[str], inner: list[str], shape: str) -> None:
    text = " ".join(outer) + " " + shape.format(" ".join(inner))
    analysis = bash.parse(text)
    assert inner in [list(c.argv) for c in analysis.commands]


@given(SIMPLE, SIMPLE, SEPARATORS)
def test_joining_never_lowers_the_requirement_or_drops_flags(a: list[str], b: list[str], sep: str) -> None:
    def cls(cmd: str):  # type: ignore[no-untyped-def]
        return classify(CallInfo("claude", "s", "Bash", {"command": cmd}, "/ws"), CTX, _NoFs())

    one, two = cls(" ".join(a)), cls(" ".join(b))
    joined = cls(" ".join(a) + sep + " ".join(b))
    assert joined.requirement >= max(one.requirement, two.requirement)
    assert (one.flags | two.flags) & NOT_AUTO_ALLOWABLE <= joined.flags


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_classify_never_raises_on_arbitrary_text(text: str) -> None:
    cls = classify(CallInfo("claude", "s", "Bash", {"command": text}, "/ws"), CTX, _NoFs())
    if "\x00" in text:
        assert not cls.auto_allowable


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="$()`'\"\\;&|<>{}[]*?~ \nabcrm-/.=!#", max_size=120))
def test_shell_metacharacter_soup_never_raises(text: str) -> None:
    classify(CallInfo("claude", "s", "Bash", {"command": text}, "/ws"), CTX, _NoFs())


@settings(max_examples=examples(200))
@given(
    st.text(max_size=40),
    st.dictionaries(
        st.text(max_size=10),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=30),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
            max_leaves=10,
        ),
    ),
)
def test_any_tool_and_input_never_raises(tool: str, inp: dict) -> None:  # type: ignore[type-arg]
    cls = classify(CallInfo("claude", "s", tool, inp, "/ws"), CTX, _NoFs())
    assert cls.tool is not None
