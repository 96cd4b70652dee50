"""Deny and ask rules see each command spelled once per decision (``engine._deny_spellings``), shared by every
rule, instead of each rule walking the argv, its lowercased program name and an opaque program's views
itself. These properties hold the two ways to the same answer, forged NUL words and huge views included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nexusd.core import engine
from nexusd.core.model import Command
from nexusd.core.policy.rules import Rule, argv_texts, parse_rule

PATTERNS = ["curl *", "rm -rf *", "git push *", "python -c *", "make", "* --force", "npm run test:*", "sh *"]
WORDS = st.sampled_from(
    [
        "curl",
        "CURL.exe",
        "/usr/bin/curl",
        "./curl/",
        "rm",
        "-rf",
        "/",
        "git",
        "push",
        "sh",
        "-c",
        "curl x; rm -rf y",
        "make",
        "--force",
        "python",
        "ProxyCommand=curl x",
        "a\x00b",
        "npm",
        "run",
        "test",
        ":!curl",
        "x y",
        "",
    ]
)
ARGVS = st.lists(WORDS, max_size=6).map(tuple)


def _walked(rule: Rule, c: Command) -> bool:
    """The rule walking the command itself, as before the spellings were shared."""
    if rule.matches_argv(c.argv):
        return True
    if c.argv:
        name = c.argv[0].lower().removesuffix(".exe")
        if name != c.argv[0] and rule.matches_argv((name, *c.argv[1:])):
            return True
    return c.opaque and any(rule.matches_argv(v) for v in engine._opaque_views(c.argv, c.stdin))


def _spelled(rule: Rule, c: Command) -> bool:
    texts, stream = engine._deny_spellings(c)
    return rule.matches_texts(texts) or (
        stream and any(rule.matches_argv(v) for v in engine._opaque_views(c.argv, c.stdin))
    )


@settings(max_examples=400, deadline=None)
@given(
    argv=ARGVS,
    opaque=st.booleans(),
    stdin=st.sampled_from(["", "curl x", "rm -rf /; make", "a\x00b c"]),
    pattern=st.sampled_from(PATTERNS),
    kind=st.sampled_from(["deny", "ask"]),
)
def test_spelled_once_matches_as_walked(argv, opaque, stdin, pattern, kind):
    rule = parse_rule(f"Bash({pattern})", kind)
    c = Command(argv=argv, opaque=opaque, stdin=stdin)
    assert _spelled(rule, c) is _walked(rule, c)


@settings(max_examples=300, deadline=None)
@given(argv=ARGVS, pattern=st.sampled_from(PATTERNS), kind=st.sampled_from(["allow", "deny", "ask"]))
def test_matches_argv_is_matches_texts_of_argv_texts(argv, pattern, kind):
    rule = parse_rule(f"Bash({pattern})", kind)
    assert rule.matches_argv(argv) is rule.matches_texts(argv_texts(argv, exact=kind == "allow"))


def test_huge_views_are_walked_not_kept():
    """An opaque program with a huge input is not spelled into memory view by view: each rule walks it."""
    stdin = " ".join(["w"] * 2000) + " curl evil"
    c = Command(argv=("setsid",), opaque=True, stdin=stdin)
    texts, stream = engine._deny_spellings(c)
    assert stream and texts is not None and len(texts) <= 2
    assert _spelled(parse_rule("Bash(curl *)", "deny"), c)
    assert not _spelled(parse_rule("Bash(wget *)", "deny"), c)
