"""URLs, text hygiene, and file/fetch tools through classify (real temporary workspace)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexusd.core.classify import details, domain_matches, escape_for_display
from nexusd.core.classify.urls import parse_url
from nexusd.core.model import Flag, Requirement
from nexusd.protocol import CallInfo


@pytest.mark.parametrize(
    ("url", "domain", "private"),
    [
        ("https://GitHub.com./x", "github.com", False),
        ("https://github.com@evil.io/", "evil.io", False),
        ("https://github.com:443/", "github.com", False),
        ("http://127.0.0.1/", "127.0.0.1", True),
        ("http://2130706433/", "127.0.0.1", True),
        ("http://0x7f000001/", "127.0.0.1", True),
        ("http://0177.0.0.1/", "127.0.0.1", True),
        ("http://127.1/", "127.0.0.1", True),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254", True),
        ("http://[::1]/", "::1", True),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1", True),
        ("http://[fd00::1]/", "fd00::1", True),
        ("http://[fe80::1]/", "fe80::1", True),
        ("http://10.0.0.1/", "10.0.0.1", True),
        ("http://192.168.1.1:8080/", "192.168.1.1", True),
        ("http://localhost:3000/", "localhost", True),
        ("http://metadata.google.internal/", "metadata.google.internal", True),
        ("http://bücher.de/", "xn--bcher-kva.de", False),
        ("https://8.8.8.8/", "8.8.8.8", False),
    ],
)
def test_url_normalisation(url: str, domain: str, private: bool) -> None:
    u = parse_url(url)
    assert (u.domain, u.private) == (domain, private)


@pytest.mark.parametrize(
    ("pattern", "domain", "ok"),
    [
        ("example.com", "example.com", True),
        ("example.com", "EXAMPLE.com.", True),
        ("example.com", "api.example.com", False),
        ("*.example.com", "api.example.com", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "example.com.evil.io", False),
        ("*.example.com", "evilexample.com", False),
        ("example.com", "example.com.evil.io", False),
        ("bücher.de", "xn--bcher-kva.de", True),
        ("*", "anything.io", False),
    ],
)
def test_domain_matches(pattern: str, domain: str, ok: bool) -> None:
    assert domain_matches(pattern, domain) is ok


def test_escape_for_display() -> None:
    assert escape_for_display("ls\u202e -la") == "ls\\u{202e} -la"
    assert escape_for_display("a\u200bb\x1b[2Jc\rd") == "a\\u{200b}b\\e[2Jc\\rd"
    assert escape_for_display("x" * 1000).endswith("[+600 chars]")
    assert escape_for_display("line1\n\tline2") == "line1\n\tline2"


def test_webfetch(world) -> None:  # type: ignore[no-untyped-def]
    c = world.call("WebFetch", url="https://github.com@evil.io/x", prompt="p")
    assert (c.domain, c.kind.value, c.requirement) == ("evil.io", "fetch", Requirement.DANGER_FULL_ACCESS)
    c = world.call("WebFetch", url="http://169.254.169.254/")
    assert Flag.PRIVATE_ADDRESS in c.flags and not c.auto_allowable
    c = world.call("web_fetch", provider="gemini", prompt="read https://a.io and https://b.io")
    assert c.domain is None and c.tool == "WebFetch"  # two domains: no single domain a rule could allow
    c = world.call("WebFetch", url="file:///etc/passwd")
    assert not c.auto_allowable


def test_file_tools(world) -> None:  # type: ignore[no-untyped-def]
    ws = world.ws
    c = world.call("Read", file_path=f"{ws}/README.md")
    assert (c.requirement, c.reads, c.flags) == (Requirement.READ_ONLY, (f"{ws}/README.md",), frozenset())
    c = world.call("Read", file_path=f"{ws}/secret_link")
    assert {Flag.SYMLINK_ESCAPE, Flag.OUTSIDE_WORKSPACE} <= c.flags
    c = world.call("Write", file_path=f"{ws}/new.py", content="x")
    assert (c.requirement, c.writes) == (Requirement.WORKSPACE_WRITE, (f"{ws}/new.py",))
    c = world.call("Edit", file_path=f"{ws}/.git/config", old_string="a", new_string="b")
    assert Flag.PROTECTED_PATH in c.flags and c.requirement is Requirement.DANGER_FULL_ACCESS
    c = world.call("write_file", provider="gemini", file_path=f"{ws}/src/../../outside/x", content="x")
    assert Flag.OUTSIDE_WORKSPACE in c.flags and c.requirement is Requirement.DANGER_FULL_ACCESS
    c = world.call("Write", file_path=f"{ws}/big.bin", content="x" * (10 * 1024 * 1024 + 1))
    assert Flag.LARGE_WRITE in c.flags and not c.auto_allowable
    c = world.call("Grep", pattern="x", path="../outside")
    assert Flag.OUTSIDE_WORKSPACE in c.flags
    c = world.call("frob", x=1)
    assert Flag.UNKNOWN_TOOL in c.flags and c.requirement is Requirement.DANGER_FULL_ACCESS
    c = world.call("mcp__srv__tool", x=1)
    assert c.kind.value == "mcp" and c.requirement is Requirement.DANGER_FULL_ACCESS
    c = world.call("apply_patch", provider="codex", input="*** Begin Patch\n*** Add File: .git/hooks/x\n+x\n")
    assert Flag.PROTECTED_PATH in c.flags


def test_read_size_and_binary(world) -> None:  # type: ignore[no-untyped-def]
    big = Path(world.ws, "big.dat")
    with big.open("wb") as f:
        f.truncate(10 * 1024 * 1024 + 1)
    c = world.call("Read", file_path=str(big))
    assert {Flag.LARGE_READ, Flag.BINARY_READ} <= c.flags


def test_hostile_git_config_makes_git_status_not_read_only(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    from nexusd.core.classify import classify
    from nexusd.core.model import Context
    from nexusd.protocol import CallInfo

    ctx = Context(cwd=str(repo), workspace_roots=(str(repo),), home=world.home)
    c = classify(CallInfo("claude", "s", "Bash", {"command": "git status"}, str(repo)), ctx, world.fs)
    assert c.requirement is Requirement.DANGER_FULL_ACCESS
    assert any("fsmonitor" in n for n in c.notes)


def test_nul_and_hidden_chars(world) -> None:  # type: ignore[no-untyped-def]
    assert Flag.UNPARSEABLE in world.bash("ls\x00rm").flags
    assert Flag.HIDDEN_CHARS in world.call("Read", file_path=f"{world.ws}/a\u2066b").flags
    d = details(world.bash("echo \u202eevil"))
    assert "\u202e" not in "".join(d.commands[0]) and d.notes


@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.text(alphabet="ab \t\n\r\x00\x1b\x7f\x85\u200b\u202e\u2066\ufeffé", max_size=20)
)
def test_hidden_chars_fast_path_agrees_with_the_full_scan(s: str) -> None:
    """The early exit (one regex search, or printable ASCII) never hides a character the full scan finds."""
    from nexusd.core.classify import text

    slow: list[str] = []
    for ch in text.HIDDEN_RE.findall(s) + text._CONTROL_RE.findall(s):
        label = f"U+{ord(ch):04X}"
        if label not in slow:
            slow.append(label)
    assert text.hidden_chars(s) == slow


@pytest.mark.parametrize(("levels", "too_deep"), [(32, False), (33, True)])
@pytest.mark.parametrize("leaf", ["plain", "a\u2066b"])
def test_input_nesting_bound_holds_for_plain_and_hidden_strings(world, levels: int, too_deep: bool, leaf: str) -> None:  # type: ignore[no-untyped-def]
    """The input scan's shortcut for plain strings keeps the nesting bound exact, and hidden characters in
    keys or values at any depth are still found."""
    value: object = leaf
    for _ in range(levels - 1):  # the input itself is the outermost level
        value = {"k": value}
    c = world.call("Read", file_path=f"{world.ws}/a", extra=value)
    assert ("input nests too deeply" in c.notes) is too_deep
    assert (Flag.HIDDEN_CHARS in c.flags) is (leaf != "plain" and not too_deep)
    keyed = world.call("Read", file_path=f"{world.ws}/a", extra={"a": {"b\u200bc": "plain"}})
    assert Flag.HIDDEN_CHARS in keyed.flags


_DISPLAY_TEXT = (
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.text(alphabet="ab \t\n\r\x00\x1b\x7f\x85\u200b\u202e\u2066\ufeffé", max_size=20)
    | st.text(alphabet="ab/.", min_size=395, max_size=405)
)


@given(st.lists(_DISPLAY_TEXT, min_size=1, max_size=4))
def test_all_displayable_only_when_no_escape_or_cut_changes_a_text(texts: list[str]) -> None:
    """details() skips escaping when ``all_displayable`` says so: that must mean escaping changes nothing."""
    from nexusd.core.classify import text

    if text.all_displayable(*texts):
        assert all(escape_for_display(t) == t for t in texts)


def test_details_escape_every_field_when_one_needs_it(world) -> None:  # type: ignore[no-untyped-def]
    """One hidden character anywhere sends every string of the call through the escaping, long lines are cut."""
    d = details(world.bash(f"cat {'x' * 500} \u2066b"))
    assert d.commands[0][1].endswith("[+100 chars]") and d.commands[0][2] == "\\u{2066}b"
    plain = details(world.bash("cat a.txt"))
    assert plain.commands == [["cat", "a.txt"]] and plain.tool == "Bash"


def test_large_reads_are_refused_and_binary_reads_said(world) -> None:  # type: ignore[no-untyped-def]
    """The read size limit: a read over 10 MB is refused in every mode, bypass included; a binary read
    that a mode allows says so in its reason (the model and the audit trail see it)."""
    from nexusd.core.engine import evaluate
    from nexusd.core.model import Session
    from nexusd.core.policy.policy import Policy

    big = Path(world.ws, "big.log")
    with big.open("wb") as f:
        f.truncate(10 * 1024 * 1024 + 1)
    small = Path(world.ws, "small.bin")
    small.write_bytes(b"\x7fELF\x00\x01")
    for mode in ("default", "acceptEdits", "bypassPermissions", "yolo"):
        call = CallInfo("claude", "s", "Read", {"file_path": str(big)}, world.ws, mode=mode)
        cls = world.call("Read", file_path=str(big))
        v = evaluate(call, Policy(), Session("s", "claude", agent_mode=mode), cls, world.ctx).verdict
        assert v is not None and (v.decision, v.source) == ("deny", "safety"), (mode, v)
        assert "large file" in v.reason
    call = CallInfo("claude", "s", "Read", {"file_path": str(small)}, world.ws)
    v = evaluate(call, Policy(), Session("s", "claude"), world.call("Read", file_path=str(small)), world.ctx).verdict
    assert v is not None and v.decision == "allow" and "binary file" in v.reason


class _ProtocolOnly:
    """The real file system through the protocol's questions only (as the decision memo's recorder asks
    them): the classifier's one-call shortcuts (size_and_head, realpath_if_lexists) are not offered."""

    def __init__(self) -> None:
        from nexusd.policy.filesystem import RealFileSystem

        self._fs = RealFileSystem()

    def realpath(self, path: str) -> str:
        return self._fs.realpath(path)

    def lexists(self, path: str) -> bool:
        return self._fs.lexists(path)

    def size(self, path: str) -> int | None:
        return self._fs.size(path)

    def head(self, path: str, n: int) -> bytes | None:
        return self._fs.head(path, n)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("[core]\n\tbare = false\n", None),
        ("[core]\n\tfsmonitor = touch /tmp/pwned\n", "run programs"),
        ("[core]\n" + "\t# pad\n" * 12000, "too large to check"),
        ("dir", "cannot read"),
        ("fifo", "cannot read"),
        ("missing", None),
    ],
)
def test_git_config_checks_agree_with_and_without_the_one_call_questions(
    tmp_path: Path, config: str, says: str
) -> None:
    """git's config check (too large, unreadable, a directory or FIFO in its place, hostile, inert) and a
    Read's size and binary probe decide the same through the shortcuts and through the plain questions."""
    from nexusd.core.classify import classify
    from nexusd.core.model import Context
    from nexusd.policy.filesystem import DecisionFileSystem, RealFileSystem

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cfg = repo / ".git" / "config"
    if config == "dir":
        cfg.mkdir()
    elif config == "fifo":
        os.mkfifo(cfg)
    elif config != "missing":
        cfg.write_text(config)
    (repo / "big.bin").write_bytes(b"\x00" * (11 * 1024 * 1024))
    ctx = Context(cwd=str(repo), workspace_roots=(str(repo),), home=str(tmp_path / "home"))
    calls = [
        CallInfo("claude", "s", "Bash", {"command": "git status"}, str(repo)),
        CallInfo("claude", "s", "Read", {"file_path": str(repo / "big.bin")}, str(repo)),
        CallInfo("claude", "s", "Read", {"file_path": str(cfg)}, str(repo)),
    ]
    for call in calls:
        answers = {classify(call, ctx, fs) for fs in (RealFileSystem(), DecisionFileSystem(), _ProtocolOnly())}
        assert len(answers) == 1, answers
    git = classify(calls[0], ctx, DecisionFileSystem())
    assert (git.requirement is Requirement.READ_ONLY) is (says is None)
    assert says is None or any(says in n for n in git.notes), git.notes
    assert {Flag.LARGE_READ, Flag.BINARY_READ} <= classify(calls[1], ctx, DecisionFileSystem()).flags
