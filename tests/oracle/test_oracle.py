"""The runtime oracle as a differential test: every corpus command runs in a jail under strace and the gate's
verdict is held against what it really did (tests/oracle/oracle.py says how). Real bubblewrap, real strace,
real bash and coreutils; nothing is mocked. ``python -m tests.oracle.oracle`` prints the full report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.oracle import corpus, jail, sandbox_first
from tests.oracle.oracle import Oracle, Outcome, report
from tests.oracle.sandbox_first import FirstOutcome, SandboxFirst

pytestmark = pytest.mark.slow  # ~160 commands, each in a jail: tens of seconds on a loaded machine

# the budgets of issue 35: no wrong allow; secrets asked for only where the path is truly unknowable
MAX_ASKED_SECRETS = 4
# read-only commands of the corpus the gate does not allow, at most (the deliberate over-blocks of
# docs/POLICY.md: ${F:-x} from the environment, cd -, a tracked-only lister under a Read(./.env) deny ...)
MAX_OVER_BLOCK = 0.20
# issue 36's bars for the corpus run sandbox-first: of the read-only commands, at most 5 % asked (or refused)
# and at most 5 % broken by the sandbox; no harm at all
MAX_SANDBOX_FIRST_ASKED = 0.05
MAX_SANDBOX_FIRST_BROKEN = 0.05


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    why = jail.available()
    if why:
        pytest.skip(f"the oracle cannot run here: {why}")
    oracle = Oracle(Path(tmp_path_factory.mktemp("oracle")))
    return [oracle.judge(c) for c in corpus.build(readers=("cat {p}",))]


@pytest.fixture(scope="module")
def first_rig() -> Iterator[SandboxFirst]:
    why = sandbox_first.available()
    if why:
        pytest.skip(f"the measure cannot run here: {why}")
    root = Path(tempfile.mkdtemp(prefix="nxsf", dir="/var/tmp"))  # the sandbox gives commands their own /tmp
    try:
        with sandbox_first.sandbox_first(root) as sf:
            yield sf
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def first(outcomes: list[Outcome], first_rig: SandboxFirst) -> list[FirstOutcome]:
    """The same corpus sandbox-first (labels from the jail runs above), plus the commands that only matter
    once a sandbox contains them (``sandbox_first.ESCAPES``: writes outside, leaks, the host's loopback)."""
    labels = {o.command: o for o in outcomes}
    return [first_rig.judge(c, labels.get(c)) for c in first_rig.commands(full=False)]


def test_sandbox_first_does_no_harm(first: list[FirstOutcome]) -> None:
    contained = [o for o in first if o.label == "effect" and o.decision == "allow" and o.wrapped]
    assert len(contained) >= 20, "too few harmful-if-unconfined commands ran sandboxed: the measure would mean nothing"
    assert not [o for o in first if o.harm], sandbox_first.report(first)


def test_sandbox_first_asks_few_read_only_commands(first: list[FirstOutcome]) -> None:
    ro = [o for o in first if o.label == "read_only"]
    assert len(ro) >= 50, "the corpus lost its read-only commands: the measure would mean nothing"
    asked = [o for o in ro if o.decision != "allow"]
    assert len(asked) <= MAX_SANDBOX_FIRST_ASKED * len(ro), sandbox_first.report(first)


def test_sandbox_first_breaks_few_read_only_commands(first: list[FirstOutcome]) -> None:
    ro = [o for o in first if o.label == "read_only" and o.decision == "allow"]
    assert sum(o.wrapped for o in ro) >= 50, "read-only commands must run sandboxed for the measure to mean anything"
    broken = [o for o in ro if o.broken]
    assert len(broken) <= MAX_SANDBOX_FIRST_BROKEN * len(ro), sandbox_first.report(first)


def test_the_sandbox_first_measure_sees_harm(first_rig: SandboxFirst) -> None:
    """The measure can fail: run bare, a write outside, a leaked secret and a connection are each seen."""
    w = first_rig.world
    first_rig.fresh()
    port = first_rig.listener.port
    _, harm = first_rig.run_watched(
        f"echo x > ../outside/other.txt; cat ~/.ssh/id_rsa; cp .env copy; echo > /dev/tcp/127.0.0.1/{port}"
    )
    text = "; ".join(harm)
    assert "changed" in text and str(w.outside) in text, harm
    assert "printed 'DECOY SECRET'" in text and "left a secret in" in text, harm
    assert "reached the host's loopback" in text, harm
    first_rig.fresh()
    for protected in ("printf '[core]\\n' >> .git/config", "touch .git/hooks/post-checkout"):
        assert [h for h in first_rig.run_watched(protected)[1] if h.startswith("changed")], protected
        first_rig.fresh()
    assert first_rig.run_watched("cat README.md; echo x > out.txt")[1] == []


def test_no_wrong_allow(outcomes: list[Outcome]) -> None:
    wrong = [o for o in outcomes if "wrong_allow" in o.kinds]
    assert not wrong, report(outcomes)


def test_secrets_denied_not_asked(outcomes: list[Outcome]) -> None:
    asked = [o for o in outcomes if "asked_secret" in o.kinds]
    assert len(asked) <= MAX_ASKED_SECRETS, report(outcomes)


def test_read_only_commands_are_allowed(outcomes: list[Outcome]) -> None:
    ro = [o for o in outcomes if "read_only" in o.kinds]
    over = [o for o in ro if "over_block" in o.kinds]
    assert len(ro) >= 50, "the corpus lost its read-only commands: the measure would mean nothing"
    assert len(over) <= MAX_OVER_BLOCK * len(ro), report(outcomes)


def test_the_jail_sees_what_happens(tmp_path: Path) -> None:
    """The oracle can fail: a read of a secret, a write, a DNS lookup are each seen."""
    why = jail.available()
    if why:
        pytest.skip(f"the oracle cannot run here: {why}")
    world = jail.World(tmp_path)
    world.reset()
    r = jail.run(world, "cat ~/.ssh/id_rsa >/dev/null; echo x > out.txt; getent hosts example.com")
    assert str(world.home / ".ssh/id_rsa") in r.reads
    assert str(world.ws / "out.txt") in r.writes
    assert r.network
    quiet = jail.run(world, "cat README.md")
    assert not quiet.writes and not quiet.network and str(world.ws / "README.md") in quiet.reads


def test_restore_puts_back_only_what_changed(tmp_path: Path) -> None:
    """The measure's world is put back between commands by difference (``sandbox_first._restore``): what a
    command changed is restored, and what it left alone keeps its inode and ctime (a protected path
    copied anew would look planted to the wrapper)."""
    template, live = tmp_path / "t", tmp_path / "l"
    (template / ".git" / "hooks").mkdir(parents=True)
    (template / "src").mkdir()
    (template / "src" / "a.py").write_text("a\n")
    (template / "README.md").write_text("r\n")
    (template / "link").symlink_to("README.md")
    shutil.copytree(template, live, symlinks=True)
    hooks = os.stat(live / ".git" / "hooks")
    (live / "README.md").write_text("changed\n")
    (live / "src" / "a.py").unlink()
    (live / "src" / "new.py").write_text("n\n")
    (live / "out").mkdir()
    (live / "out" / "x").write_text("x\n")
    (live / "link").unlink()
    (live / "link").symlink_to("/etc/passwd")
    os.chmod(live / "src", 0o700)
    sandbox_first._restore(live, template)
    strip = lambda root: {k[len(str(root)) :]: v for k, v in sandbox_first._snapshot(root).items()}  # noqa: E731
    assert strip(live) == strip(template)
    after = os.stat(live / ".git" / "hooks")
    assert (after.st_ino, after.st_ctime_ns) == (hooks.st_ino, hooks.st_ctime_ns)
    (live / "src").rename(tmp_path / "gone")
    (live / "src").write_text("a file where a directory was\n")
    sandbox_first._restore(live, template)
    assert strip(live) == strip(template)
