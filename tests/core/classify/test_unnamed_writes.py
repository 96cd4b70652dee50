"""Archives and patches write the files their members name, not their words: any path below where they
write, .git/hooks, agent settings and shell rc files included. Such a write is a protected write, so a
person decides in every mode (bypass too), as for ``echo x > .git/hooks/pre-commit``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "policy"))

from policy_factories import policy, session

from nexusd.core.classify import classify
from nexusd.core.engine import evaluate
from nexusd.core.model import Classification, Context, Flag
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / ".git" / "hooks").mkdir(parents=True)
    (w / "src").mkdir()
    for f in ("a.tar", "a.tgz", "a.zip", "p.diff"):
        (w / f).write_text("x")
    return w


def run(ws: Path, command: str) -> tuple[Classification, CallInfo, Context]:
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(ws.parent / "home"))
    c = CallInfo("claude", "s1", "Bash", {"command": command}, str(ws))
    return classify(c, ctx, DecisionFileSystem()), c, ctx


@pytest.mark.parametrize(
    "command",
    [
        "tar xf a.tar",
        "tar -xf a.tar",
        "tar -xzf a.tgz -C src",
        "tar --extract --file a.tar",
        "tar -x -f a.tar",
        "tar xvf a.tar --directory=src",
        "unzip a.zip",
        "unzip -o a.zip -d src",
        "unzip -qq a.zip",
        "cd src && unzip ../a.zip",
        "git apply p.diff",
        "git am p.diff",
        "patch -p1 < p.diff",
        "patch -d src -p1 -i ../p.diff",
        "sudo tar xf a.tar",
    ],
)
@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
def test_extracting_or_patching_is_a_protected_write(ws, command, mode):
    cls, c, ctx = run(ws, command)
    assert Flag.PROTECTED_PATH in cls.flags, (command, cls.notes)
    pol = policy(allow=["Bash(tar *)", "Bash(unzip *)", "Bash(git apply *)", "Bash(patch *)", "Bash(*)"], root=str(ws))
    assert evaluate(c, pol, session(mode), cls, ctx).verdict.decision != "allow", (command, mode)


@pytest.mark.parametrize(
    "command",
    [
        "tar tf a.tar",
        "tar -tzf a.tgz",
        "unzip -l a.zip",
        "unzip -p a.zip x",
        "tar -xOf a.tar",
        "tar -x --to-stdout -f a.tar",
        "git apply --check p.diff",
        "git apply --stat p.diff",
        "tar cf out.tar src",
    ],
)
def test_listing_checking_or_creating_is_not(ws, command):
    cls, _c, _ctx = run(ws, command)
    assert Flag.PROTECTED_PATH not in cls.flags, (command, cls.notes)
