"""The verified decision memo: a repeated call skips the classifier only while every file-system answer
it was decided on still holds. Each attack below changes the world between two identical calls and
checks the memo decides exactly what a fresh decision decides (and that the change mattered at all)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.bench.scenarios import load_corpus
from nexusd.core.model import Session
from nexusd.policy.gate import begin, decide
from nexusd.policy.memo import DecisionMemo
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, Verdict
from tests.conftest import examples

pytestmark = pytest.mark.anyio

POLICY = """
[permissions]
allow = ["Bash(cat *)", "Bash(ls *)", "Bash(echo *)", "Read(./**)"]
ask = ["Bash(git push *)"]
deny = ["Read(./secret.txt)", "Read(//etc/hostname)", "Bash(rm *)"]
"""


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    d = {k: tmp_path / k for k in ("cfg", "state", "managed", "ws", "home", "outside")}
    for p in d.values():
        p.mkdir()
    (d["ws"] / ".git").mkdir()
    (d["ws"] / "src").mkdir()
    (d["ws"] / "src" / "a.py").write_text("x\n")
    (d["ws"] / "safe.txt").write_text("ok\n")
    return d


def mkstore(d: dict[str, Path], policy: str = POLICY) -> PolicyStore:
    (d["cfg"] / "policy.toml").write_text(policy)
    s = PolicyStore(config_dir=d["cfg"], state_dir=d["state"], managed_dir=d["managed"], home=str(d["home"]))
    assert s.load() == []
    return s


def bash(d: dict[str, Path], cmd: str, **kw: object) -> CallInfo:
    return CallInfo(provider="claude", session="s", tool="Bash", input={"command": cmd}, cwd=str(d["ws"]), **kw)


def same(a: Verdict, b: Verdict) -> bool:
    return (a.decision, a.source, a.rule, a.reason, sorted(a.flags)) == (
        b.decision,
        b.source,
        b.rule,
        b.reason,
        sorted(b.flags),
    )


async def memo_agrees(
    store: PolicyStore, call: CallInfo, change: Callable[[], None], session: Session | None = None
) -> tuple[Verdict, Verdict]:
    """Decide twice (the second a hit), change the world, decide again: memo and fresh must agree."""
    memo = DecisionMemo()
    s = session or Session(id=call.session, provider=call.provider)
    first = await decide(call, store, s, memo=memo)
    again = await decide(call, store, s, memo=memo)
    assert memo.hits == 1 and same(first, again), (first, again)
    change()
    cached = await decide(call, store, s, memo=memo)
    fresh = await decide(call, store, s)
    assert same(cached, fresh), (cached, fresh)
    assert memo.hits == 1  # stale (same key) or a miss (the change moved the key)
    return first, cached


async def test_repeat_is_a_hit_and_identical(world):
    store, memo = mkstore(world), DecisionMemo()
    call = bash(world, "cat safe.txt src/a.py")
    first = await decide(call, store, Session(id="s"), memo=memo)
    assert first.decision == "allow"
    for _ in range(3):
        assert await decide(call, store, Session(id="s"), memo=memo) == first
    assert (memo.misses, memo.hits, len(memo)) == (1, 3, 1)


async def test_symlink_swapped_between_two_calls(world):
    link = world["ws"] / "link.txt"
    os.symlink(world["ws"] / "safe.txt", link)

    def swap() -> None:
        link.unlink()
        os.symlink("/etc/hostname", link)

    first, after = await memo_agrees(mkstore(world), bash(world, "cat link.txt"), swap)
    assert first.decision == "allow" and after.decision == "deny"


async def test_symlinked_directory_swapped_for_a_write(world):
    link = world["ws"] / "out"
    os.symlink(world["ws"] / "src", link)
    call = CallInfo(
        provider="claude",
        session="s",
        tool="Write",
        input={"file_path": str(link / "f.py"), "content": "x"},
        cwd=str(world["ws"]),
        mode="acceptEdits",
    )

    def swap() -> None:
        link.unlink()
        os.symlink(world["outside"], link)

    first, after = await memo_agrees(mkstore(world), call, swap, Session(id="s", agent_mode="acceptEdits"))
    assert first.decision == "allow" and after.decision != "allow"


async def test_glob_gains_a_denied_match(world):
    first, after = await memo_agrees(
        mkstore(world), bash(world, "cat s*"), lambda: (world["ws"] / "secret.txt").write_text("k\n")
    )
    assert first.decision == "allow" and after.decision == "deny"


async def test_file_that_appears_where_none_was(world):
    """A path that did not exist (so no realpath through a link) now is a link out of the workspace."""
    first, after = await memo_agrees(
        mkstore(world), bash(world, "cat new.txt"), lambda: os.symlink("/etc/hostname", world["ws"] / "new.txt")
    )
    assert first.decision == "allow" and after.decision == "deny"


async def test_git_config_edited_to_run_a_program(world):
    (world["ws"] / ".git" / "config").write_text("[core]\n\tbare = false\n")

    def evil() -> None:  # same length, so only the content differs
        (world["ws"] / ".git" / "config").write_text("[core]\n\tpager = false\n")

    first, after = await memo_agrees(mkstore(world), bash(world, "git log -1"), evil)
    assert first.decision == "allow" and after.decision != "allow"


async def test_new_git_dir_moves_the_workspace(world):
    sub = world["ws"] / "src"
    call = CallInfo(
        provider="claude", session="s", tool="Read", input={"file_path": str(world["ws"] / "safe.txt")}, cwd=str(sub)
    )
    first, after = await memo_agrees(mkstore(world), call, lambda: (sub / ".git").mkdir())
    assert first.decision == "allow" and after.decision != "allow"


async def test_policy_reload_and_session_changes_miss(world):
    store, memo = mkstore(world), DecisionMemo()
    call = bash(world, "echo hi")
    s = Session(id="s", provider="claude")
    assert (await decide(call, store, s, memo=memo)).decision == "allow"
    (world["cfg"] / "policy.toml").write_text(POLICY.replace('"Bash(rm *)"', '"Bash(rm *)", "Bash(echo *)"'))
    assert store.load() == []
    assert (await decide(call, store, s, memo=memo)).decision == "deny"
    s.deny_rules = ("Bash(ls *)",)
    ls = bash(world, "ls")
    s2 = Session(id="s", provider="claude")
    assert (await decide(ls, store, s2, memo=memo)).decision == "allow"
    assert (await decide(ls, store, s, memo=memo)).decision == "deny"
    s.override_mode = "plan"
    cat = CallInfo(
        provider="claude",
        session="s",
        tool="Edit",
        cwd=str(world["ws"]),
        input={"file_path": str(world["ws"] / "safe.txt"), "old_string": "ok", "new_string": "no"},
    )
    s2.override_mode = "acceptEdits"
    assert (await decide(cat, store, s2, memo=memo)).decision == "allow"
    assert (await decide(cat, store, s, memo=memo)).decision != "allow"
    assert memo.hits == 0


async def test_project_policy_file_change_misses(world):
    store, memo = mkstore(world), DecisionMemo()
    store.trust("add", str(world["ws"]))
    call = bash(world, "echo hi")
    assert (await decide(call, store, Session(id="s"), memo=memo)).decision == "allow"
    (world["ws"] / ".nexus").mkdir()
    (world["ws"] / ".nexus" / "policy.toml").write_text('[permissions]\ndeny = ["Bash(echo *)"]\n')
    assert (await decide(call, store, Session(id="s"), memo=memo)).decision == "deny"


async def test_asks_checks_and_errors_are_never_kept(world):
    store, memo = mkstore(world), DecisionMemo()
    for _ in range(2):
        assert (await decide(bash(world, "git push origin main"), store, Session(id="s"), memo=memo)).decision == "ask"
        assert (await decide(bash(world, "echo hi"), store, Session(id="s"), memo=memo, dry_run=True)).trace
    assert len(memo) == 0 and memo.hits == 0


async def test_hooks_are_asked_every_time(world, tmp_path):
    """A verdict that needed a hook program is never kept: the program may answer otherwise next time."""
    counter = tmp_path / "count"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho x >> {counter}\necho \'{{"decision": "allow"}}\'\n')
    hook.chmod(0o755)
    store, memo = mkstore(world, POLICY + f'\n[[hooks]]\ntools = ["Bash"]\ncommand = ["{hook}"]\n'), DecisionMemo()
    for _ in range(3):
        v = await decide(bash(world, "echo hi"), store, Session(id="s"), memo=memo)
        assert (v.decision, v.source) == ("allow", "rule"), v.reason
    assert counter.read_text().count("x") == 3 and len(memo) == 0


async def test_lru_is_bounded(world):
    store, memo = mkstore(world), DecisionMemo(max_entries=8)
    for i in range(20):
        await decide(bash(world, f"echo {i}"), store, Session(id="s"), memo=memo)
    assert len(memo) == 8
    await decide(bash(world, "echo 19"), store, Session(id="s"), memo=memo)
    await decide(bash(world, "echo 0"), store, Session(id="s"), memo=memo)
    assert memo.hits == 1


async def test_memory_is_bounded_by_bytes_too(world):
    """Huge commands (allowed by rule) neither grow the memo past its budget nor flush it."""
    store, memo = mkstore(world), DecisionMemo(max_bytes=256 * 1024)
    for i in range(20):
        await decide(bash(world, f"echo {i}"), store, Session(id="s"), memo=memo)
    small = memo.bytes
    for i in range(50):
        v = await decide(bash(world, f"echo {i} " + "x" * 5000), store, Session(id="s"), memo=memo)
        assert v.decision == "allow"
    assert memo.bytes == small and len(memo) == 20  # too big to keep: never stored
    for i in range(200):
        await decide(bash(world, f"echo {i} " + "y" * 2000), store, Session(id="s"), memo=memo)
    assert memo.bytes <= memo.max_bytes and 20 < len(memo) < 200
    assert memo.bytes == sum(e.cost for e in memo._entries.values())


def test_a_file_that_changes_during_the_decision_is_never_kept(tmp_path):
    """size/head/glob are asked afresh each time; two answers to one question mean no entry."""
    from nexusd.policy.filesystem import DecisionFileSystem
    from nexusd.policy.memo import RecordingFileSystem

    f = tmp_path / "f"
    f.write_text("a")
    rec = RecordingFileSystem(DecisionFileSystem())
    assert rec.head(str(f), 10) == b"a" and not rec.changed
    f.write_text("b")
    assert rec.head(str(f), 10) == b"b" and rec.changed
    memo = DecisionMemo()
    key = ("k",)
    memo.put(key, object(), rec, Verdict("allow", "r", "rule"))  # type: ignore[arg-type]
    assert len(memo) == 0


def test_begin_settles_rule_decisions_without_awaiting(world):
    b = begin(bash(world, "rm -rf build"), mkstore(world), Session(id="s"))
    assert b.verdict is not None and b.verdict.decision == "deny" and b.policy is not None


CORPUS = load_corpus()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(CORPUS), min_size=1, max_size=6))
async def test_memo_never_differs_from_a_fresh_decision(world, commands):
    store, memo = mkstore(world), DecisionMemo()
    for cmd in commands + commands:
        call = bash(world, cmd)
        assert same(await decide(call, store, Session(id="s"), memo=memo), await decide(call, store, Session(id="s")))


async def test_read_whose_file_changes_kind_is_decided_again(world):
    """A Read's size and first bytes come from one question (size_and_head) and a path's existence and
    real path from another (realpath_if_lexists): the memo records and replays them as asked."""
    target = world["ws"] / "notes.txt"
    target.write_text("plain words\n")
    call = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": str(target)}, cwd=str(world["ws"]))

    def swap() -> None:  # same name, now a link out of the workspace
        target.unlink()
        os.symlink("/etc/hostname", target)

    first, after = await memo_agrees(mkstore(world), call, swap)
    assert first.decision == "allow" and after.decision == "deny"
    memo = DecisionMemo()
    store = mkstore(world)
    target.unlink()
    target.write_text("plain words\n")
    await decide(call, store, Session(id="s"), memo=memo)
    (entry,) = memo._entries.values()
    asked = {op for op, _args, _answer in entry.log}
    assert {"realpath_if_lexists", "size_and_head"} <= asked, asked
    assert entry.cost > 0 and memo.bytes == entry.cost
    target.write_bytes(b"\x00\x01binary now" * 10)  # same name, another content: the head differs
    cached = await decide(call, store, Session(id="s"), memo=memo)
    assert same(cached, await decide(call, store, Session(id="s"))) and memo.hits == 0
