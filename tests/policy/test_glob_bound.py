"""Globs in commands are expanded to check what they match, within a budget of directory entries.

``ls /*/*/*/*/*/*/zzz*`` matches nothing while Python's glob walks six levels of the machine: minutes on the
daemon's one thread, with every agent's gate waiting behind it. ``bounded_iglob`` gives the standard
function's answers (a property over generated trees) and stops at its budget; the classifier then knows it
cannot tell what the word matches, and the call is not allowed by a mode.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexusd.core.model import Flag, Session
from nexusd.policy.filesystem import GLOB_SCAN_BUDGET, GlobTooLarge, RealFileSystem, bounded_iglob
from nexusd.policy.gate import begin
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo
from tests.conftest import examples

NAMES = ["a", "b", "ab", ".h", ".hid", "x.py", "y.txt", "dir", ".git", "a[b", "q?"]
PARTS = ["*", "?", ".*", "a*", "[ab]*", "[!a]*", "*.py", "**", "dir", "a", ".h", "x.py", "*[b", "", "..", "."]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # four levels below a directory of its own: a pattern climbs at most four ".." and must only ever see
    # directories no other test is changing meanwhile (pytest's base directory is busy under xdist)
    root = tmp_path_factory.mktemp("globtree") / "l1" / "l2" / "l3" / "tree"
    root.mkdir(parents=True)
    for a in NAMES:
        top = root / a
        if a.endswith((".py", ".txt")):
            top.write_text("x")
            continue
        top.mkdir()
        for b in NAMES[:6]:
            (top / b).mkdir()
            (top / b / "x.py").write_text("x")
            (top / b / ".h").write_text("x")
        (top / "y.txt").write_text("x")
    os.symlink(root / "a", root / "link")
    os.symlink(root / "nowhere", root / "dangling")
    return root


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PARTS), min_size=1, max_size=4), st.booleans())
def test_bounded_iglob_answers_as_the_standard_glob(tree: Path, parts: list[str], absolute: bool) -> None:
    pattern = "/".join(parts).lstrip("/")  # (a leading "" would make "/*/*/*": the whole machine, /proc moving)
    if absolute:
        pattern = f"{tree}/{pattern}"
        assert list(bounded_iglob(pattern, 10**9)) == list(glob.iglob(pattern))
    else:
        cwd = os.getcwd()
        os.chdir(tree)
        try:
            assert list(bounded_iglob(pattern, 10**9)) == list(glob.iglob(pattern))
        finally:
            os.chdir(cwd)


def test_the_budget_counts_listed_entries(tree: Path) -> None:
    everything = list(bounded_iglob(f"{tree}/*/*/*", 10**9))
    assert everything
    with pytest.raises(GlobTooLarge):
        list(bounded_iglob(f"{tree}/*/*/nothing*", 20))  # matches nothing, lists far more than 20
    assert list(bounded_iglob(f"{tree}/a", 0)) == [f"{tree}/a"]  # no wildcard: nothing listed


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More entries below one level than a glob may list."""
    root = tmp_path_factory.mktemp("wide")
    (root / ".git").mkdir()  # a repository: it is the workspace of the calls below
    per = 200
    for i in range(GLOB_SCAN_BUDGET // per + 2):
        d = root / f"d{i}"
        d.mkdir()
        for j in range(per):
            (d / f"f{j}").touch()
    return root


def test_real_file_system_says_it_cannot_tell(wide: Path) -> None:
    assert RealFileSystem().glob(f"{wide}/*/zzz*", 256) is None
    small = RealFileSystem().glob(f"{wide}/d1/f1*", 256)  # a small one is still expanded, as bash would
    assert small is not None and sorted(small) == sorted(glob.glob(f"{wide}/d1/f1*")) and len(small) == 111


@pytest.mark.parametrize(
    "command",
    [
        "ls */zzz*",
        "cat ./*/zzz*",
        "cat {w}/*/.*",
        "head -n 1 d*/[z]*",
        "wc -l */nothing?",
        "grep x */q*",
        "ls /*/*/*/*/*/*/zzz*",
        "cat /*/*/*/*/*/*/*/.zzz*",
    ],
)
def test_a_glob_too_large_to_expand_is_not_allowed_by_a_mode(tmp_path: Path, wide: Path, command: str) -> None:
    """acceptEdits allows reads inside the workspace; a word whose matches are unknown may reach anything, so
    the call goes to a person (never a silent allow), and the daemon's thread is back soon."""
    ws = wide
    for d in ("config", "state", "managed"):
        (tmp_path / d).mkdir()
    store = PolicyStore(config_dir=tmp_path / "config", state_dir=tmp_path / "state", managed_dir=tmp_path / "managed")
    store.load()
    call = CallInfo(
        provider="claude",
        session="s",
        tool="Bash",
        input={"command": command.format(w=wide)},
        cwd=str(ws),
        mode="acceptEdits",
    )
    b = begin(call, store, Session(id="s", provider="claude", agent_mode="acceptEdits"))
    assert b.cls is not None and Flag.DYNAMIC in b.cls.flags, b.cls
    assert b.verdict is not None and b.verdict.decision != "allow", b.verdict


def test_the_same_reads_with_a_small_glob_are_allowed(tmp_path: Path, wide: Path) -> None:
    """The control: the budget is what asks above, not the commands."""
    for d in ("config", "state", "managed"):
        (tmp_path / d).mkdir()
    store = PolicyStore(config_dir=tmp_path / "config", state_dir=tmp_path / "state", managed_dir=tmp_path / "managed")
    store.load()
    call = CallInfo(
        provider="claude", session="s", tool="Bash", input={"command": "ls d1/zzz*"}, cwd=str(wide), mode="acceptEdits"
    )
    b = begin(call, store, Session(id="s", provider="claude", agent_mode="acceptEdits"))
    assert b.cls is not None and Flag.DYNAMIC not in b.cls.flags
    assert b.verdict is not None and b.verdict.decision == "allow", b.verdict


@pytest.mark.parametrize(
    "words",
    [
        " ".join(f"/*/*/*/x{i}*" for i in range(200)),  # each one alone within the budget, together not
        " ".join(f"d*/q{i}*" for i in range(400)),  # many small listings add up too
    ],
)
def test_one_decision_has_one_glob_budget(tmp_path: Path, wide: Path, words: str) -> None:
    """The budget is the decision's, not each word's: hundreds of globs in one command cost one budget."""
    from nexusd.policy.filesystem import DecisionFileSystem

    fs = DecisionFileSystem()
    answers = [fs.glob(os.path.join(str(wide), w), 256) for w in words.split()]
    assert answers[-1] is None and answers.count(None) > len(answers) // 2
    assert fs._glob_left[0] <= 0
