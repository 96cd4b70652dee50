"""Rule syntax: Claude Code's documented examples, path anchors, errors, and rule examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexusd.core.policy.rules import RuleError, check_examples, example_matches, parse_rule

HOME = "/home/u"
CWD = "/ws/proj"
ROOT = "/ws/proj"  # the policy file's root (for '/' anchors)

# (rule, command argv as text, matches?)
BASH_ROWS = [
    # Claude Code's documented examples
    ("Bash(npm run build)", "npm run build", True),
    ("Bash(npm run build)", "npm run build --prod", False),
    ("Bash(npm run test *)", "npm run test", True),
    ("Bash(npm run test *)", "npm run test -- --watch", True),
    ("Bash(npm run test:*)", "npm run test -- --watch", True),
    ("Bash(npm run test:*)", "npm run testing", False),
    ("Bash(ls *)", "ls -la", True),
    ("Bash(ls *)", "lsof", False),
    ("Bash(ls*)", "lsof", True),
    ("Bash(ls*)", "ls -la", True),
    ("Bash(git * main)", "git checkout main", True),
    ("Bash(git * main)", "git push origin main", True),
    ("Bash(git * main)", "git push origin develop", False),
    ("Bash(* --version)", "node --version", True),
    ("Bash(* --version)", "node --help", False),
    ("Bash(* install)", "npm install", True),
    ("Bash(git commit *)", "git commit -m fix", True),
    ("Bash(git commit *)", "git commitx", False),
    ("Bash(*)", "anything at all", True),
    ("Bash", "anything", True),
    # an argument containing a space is one argument: it cannot forge word boundaries
    ("Bash(echo hello world)", "echo 'hello world'", False),
    ("Bash(echo hello world)", "echo hello world", True),
    ("Bash(git status)", "'git status'", False),
]


@pytest.mark.parametrize(("rule", "cmd", "expected"), BASH_ROWS)
def test_bash(rule, cmd, expected):
    assert example_matches(parse_rule(rule, "allow"), cmd) is expected


# (rule, path, matches?)
PATH_ROWS = [
    ("Read(./.env)", f"{CWD}/.env", True),
    ("Read(./.env)", f"{CWD}/sub/.env", False),
    ("Read(.env)", f"{CWD}/sub/.env", True),  # bare: gitignore's any-depth
    ("Read(.env)", "/elsewhere/.env", False),
    ("Read(**/.env)", f"{CWD}/a/b/.env", True),
    ("Read(~/.zshrc)", f"{HOME}/.zshrc", True),
    ("Read(~/.zshrc)", f"{CWD}/.zshrc", False),
    ("Read(~/.ssh/**)", f"{HOME}/.ssh/id_rsa", True),
    ("Read(//etc/passwd)", "/etc/passwd", True),
    ("Read(//etc/passwd)", f"{CWD}/etc/passwd", False),
    ("Read(//tmp/*.log)", "/tmp/a.log", True),
    ("Read(//tmp/*.log)", "/tmp/sub/a.log", False),
    ("Edit(/src/**/*.ts)", f"{ROOT}/src/a/b.ts", True),
    ("Edit(/src/**/*.ts)", f"{ROOT}/lib/a.ts", False),
    ("Edit(/src/**)", f"{ROOT}/src/x.py", True),
    ("Edit(src/**)", f"{CWD}/src/x.py", True),
    ("Edit(*.ts)", f"{CWD}/deep/x.ts", True),
    ("Edit(docs/)", f"{CWD}/docs/x.md", True),
    ("Read(//)", "/anything", True),
    ("Read(~)", f"{HOME}/x", True),
]


@pytest.mark.parametrize(("rule", "path", "expected"), PATH_ROWS)
def test_paths(rule, path, expected):
    r = parse_rule(rule, "deny", policy_root=ROOT)
    assert r.matches_path(path, CWD, HOME) is expected


def test_slash_anchor_follows_the_policy_file():
    r = parse_rule("Edit(/src/**)", "allow", policy_root="/other")
    assert r.matches_path("/other/src/a", CWD, HOME)
    assert not r.matches_path(f"{CWD}/src/a", CWD, HOME)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Bash(",
        "Bash()",
        "Bash(ls",
        "Bash)x",
        "(ls)",
        "Bash(a:*b:*)",
        "Bash(a:* b)",
        "WebFetch(example.com)",
        "WebFetch(domain:)",
        "WebFetch(domain:a.*.com)",
        "WebFetch(domain:x/y)",
        "WebSearch(foo)",
        "mcp__s__t(x)",
        "mcp__s__a*",
        "Read(!x)",
        "Read([abc)",
        "Read(***)",
        "Read(~bob/x)",
        "Edit(a\\b)",
        "Bad Tool",
        "Bash(\x00)",
    ],
)
def test_bad_rules(bad):
    with pytest.raises(RuleError):
        parse_rule(bad, "allow", policy_root=ROOT)


def test_slash_anchor_needs_a_file():
    with pytest.raises(RuleError):
        parse_rule("Read(/src/**)", "allow")


@pytest.mark.parametrize(
    ("rule", "tool", "expected"),
    [
        ("mcp__gh", "mcp__gh__x", True),
        ("mcp__gh__*", "mcp__gh__x", True),
        ("mcp__gh__x", "mcp__gh__y", False),
        ("mcp__gh", "mcp__ghx__y", False),
        ("mcp__my_srv__t", "mcp__my_srv__t", True),
    ],
)
def test_mcp(rule, tool, expected):
    assert parse_rule(rule, "allow").matches_mcp(tool) is expected


@pytest.mark.parametrize(
    ("rule", "domain", "expected"),
    [
        ("WebFetch(domain:example.com)", "example.com", True),
        ("WebFetch(domain:example.com)", "a.example.com", False),
        ("WebFetch(domain:*.example.com)", "a.example.com", True),
        ("WebFetch(domain:*.example.com)", "example.com", False),
        ("WebFetch(domain:*.example.com)", "example.com.evil.io", False),
        ("WebFetch(domain:*.example.com)", "evilexample.com", False),
    ],
)
def test_domains(rule, domain, expected):
    assert parse_rule(rule, "allow").matches_domain(domain) is expected


def test_examples_checked_at_parse():
    parse_rule("Bash(npm run test *)", "allow", match=["npm run test -- -x"], not_match=["npm run build"])
    with pytest.raises(RuleError, match="should not match"):
        parse_rule("Bash(npm *)", "allow", not_match=["npm run build"])
    with pytest.raises(RuleError, match="should match"):
        parse_rule("Read(./.env)", "deny", policy_root=ROOT, match=["sub/.env"])
    parse_rule("WebFetch(domain:*.x.org)", "allow", match=["https://a.x.org/p"], not_match=["x.org"])


def test_gemini_and_codex_spellings():
    assert parse_rule("run_shell_command(git status)", "allow").tool == "Bash"
    assert parse_rule("write_file", "allow").tool == "Write"
    assert parse_rule("apply_patch", "allow").tool == "ApplyPatch"
    assert parse_rule("mcp_gh_list", "allow").family == "mcp"


_word = st.text(alphabet="abcdefgh-_.", min_size=1, max_size=6)


@given(
    words=st.lists(_word, min_size=1, max_size=4),
    extra=st.lists(_word, max_size=3),
    star=st.booleans(),
    other=st.lists(_word, min_size=1, max_size=4),
)
def test_examples_always_agree_with_the_matcher(words, extra, star, other):
    """Whatever a rule's matcher says about a command, check_examples agrees (property)."""
    rule_text = "Bash(" + " ".join(words) + (" *" if star else "") + ")"
    r = parse_rule(rule_text, "allow")
    for cmd in (words + extra, other):
        text = " ".join(cmd)
        if r.matches_argv(cmd):
            assert not check_examples(
                parse_rule(rule_text, "allow").__class__(
                    **{**{s: getattr(r, s) for s in r.__slots__}, "match": (text,)}
                )
            )
        else:
            with pytest.raises(RuleError):
                parse_rule(rule_text, "allow", match=[text])


def test_home_examples_use_the_home_the_caller_gives() -> None:
    """The core never reads $HOME: a ~ example is checked against the caller's home, or reported."""
    ok = parse_rule("Read(~/.ssh/**)", "deny", match=["~/.ssh/id_rsa"], home="/home/alice")
    assert ok.tool == "Read"
    with pytest.raises(RuleError, match="home directory"):
        parse_rule("Read(~/.ssh/**)", "deny", match=["~/.ssh/id_rsa"])
    with pytest.raises(RuleError, match="should match but does not"):
        parse_rule("Read(~/.ssh/**)", "deny", match=["/home/bob/.ssh/id_rsa"], home="/home/alice")


@pytest.mark.parametrize(
    ("rule", "path", "expected"),
    [
        ("Read(~/notes/**)", "/home/u/notes", True),
        ("Read(~/notes/**)", "/home/u/notes/a.md", True),
        ("Read(~/notes/**)", "/home/u/notesbook", False),
        ("Read(./secrets/**)", "/ws/secrets", True),
        ("Read(./secrets/)", "/ws/secrets", True),
        ("Read(./src/*.py)", "/ws/src", False),
        ("Read(./.env)", "/ws/.env", True),
        ("Read(./.env)", "/ws", False),
    ],
)
def test_a_directory_rule_covers_the_directory_itself(rule, path, expected):
    """Issue "Close the gate" class 12: Read(~/notes/**) did not cover `ls ~/notes`, and a deny of dir/** did
    not cover reading the directory."""
    r = parse_rule(rule, "deny")
    assert r.matches_path(path, "/ws", "/home/u") is expected
