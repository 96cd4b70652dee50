"""The runtime oracle as a differential test: every corpus command runs in a jail under strace and the gate's
verdict is held against what it really did (tests/oracle/oracle.py says how). Real bubblewrap, real strace,
real bash and coreutils; nothing is mocked. ``python -m tests.oracle.oracle`` prints the full report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oracle import corpus, jail
from tests.oracle.oracle import Oracle, Outcome, report

pytestmark = pytest.mark.slow  # ~160 commands, each in a jail: tens of seconds on a loaded machine

# the budgets of issue 35: no wrong allow; secrets asked for only where the path is truly unknowable
MAX_ASKED_SECRETS = 4
# read-only commands of the corpus the gate does not allow, at most (the deliberate over-blocks of
# docs/POLICY.md: ${F:-x} from the environment, cd -, a tracked-only lister under a Read(./.env) deny ...)
MAX_OVER_BLOCK = 0.20


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    why = jail.available()
    if why:
        pytest.skip(f"the oracle cannot run here: {why}")
    oracle = Oracle(Path(tmp_path_factory.mktemp("oracle")))
    return [oracle.judge(c) for c in corpus.build(readers=("cat {p}",))]


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
