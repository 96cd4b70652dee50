"""Deny and ask rules see each command spelled once per decision (``engine._deny_spellings``), shared by every
rule, instead of each rule walking the argv, its lowercased program name and an opaque program's views
itself. These properties hold the two ways to the same answer, forged NUL words and huge views included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "policy"))

from policy_factories import CTX, DFA, WS, call, edit, fetch, policy, read, session, shell, tool

from nexusd.core import engine
from nexusd.core.classify.commands import meaning_spellings
from nexusd.core.model import Command, Requirement, ToolKind
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
    # what the command does in other spellings (rm -fr as rm -rf, git push +main as --force; issue 35)
    if any(rule.matches_argv(v) for v in (*c.respelled, *meaning_spellings(c.argv))):
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


# ---------------------------------------------------------------- rules that cannot concern a call


RULE_TEXTS = [
    "Bash",
    "Bash(curl *)",
    "Read",
    "Read(./.env)",
    "Read(~/.ssh/**)",
    "Grep",
    "Glob(//etc/**)",
    "Edit",
    "Edit(//etc/**)",
    "Write",
    "Write(./x)",
    "MultiEdit(./y)",
    "WebFetch",
    "WebFetch(domain:evil.com)",
    "WebSearch",
    "mcp__gh",
    "mcp__gh__push",
    "mcp__gh__*",
    "Task",
    "Agent",
    "Frobnicate",
    "NotebookEdit",
]


def _classifications():
    return [
        shell("curl x", req=DFA, reads=[f"{WS}/.env"], writes=["/etc/hosts"]),
        read(f"{WS}/.env"),
        read("/etc/hosts", tool="Grep"),
        read("/home/u/.ssh/id", tool="Glob"),
        edit("/etc/passwd"),
        edit(f"{WS}/x", tool="Write"),
        edit(f"{WS}/y", tool="MultiEdit"),
        edit(f"{WS}/n.ipynb", tool="NotebookEdit"),
        fetch("evil.com"),
        tool("WebSearch", ToolKind.SEARCH),
        tool("mcp__gh__push", ToolKind.MCP),
        tool("mcp__other__x", ToolKind.MCP),
        tool("Task", ToolKind.AGENT),
        tool("Agent", ToolKind.AGENT),
        tool("Frobnicate", ToolKind.OTHER, Requirement.DANGER_FULL_ACCESS),
    ]


@pytest.mark.parametrize("kind", ["deny", "ask"])
def test_rules_set_aside_for_a_call_would_not_have_matched_it(kind):
    """``_relevant`` keeps per policy, by the call's kind and tool, the deny/ask rules that may match it: every
    rule it sets aside answers None for every such call (so skipping it changes no decision)."""
    pol = policy(**{kind: RULE_TEXTS})
    seen_skipped = 0
    for cls in _classifications():
        denies, asks = engine._relevant(pol, cls)
        kept = denies if kind == "deny" else asks
        assert [r.text for r in kept] == [r.text for r in pol.of_kind(kind) if r in kept]  # order kept
        run = engine._Run(call(), cls, CTX, pol, engine.effective_mode(session(), pol)[0])
        reads, writes = engine._file_paths(run.call, cls, CTX)
        for rule in pol.of_kind(kind):
            if rule not in kept:
                seen_skipped += 1
                assert engine._deny_hit(rule, run, reads, writes) is None, (rule.text, cls.tool)
    assert seen_skipped > 50  # the check can fail: many rules are set aside
