"""Last good policy at start, and the locked state (issue "Fail closed when the daemon's own state is bad").

A policy file that cannot be read or parsed at start used to lose its deny rules: ``rm -rf x`` under
``deny = ["Bash(rm:*)"]`` became allowed in bypass mode after a restart over garbage. Now a start uses the
layer's last good copy, and with none the policy is locked: nothing is allowed by a rule or a mode.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nexusd.decision.offline import check_offline
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo

DENY_RM = '[permissions]\ndeny = ["Bash(rm:*)"]\nallow = ["Bash(ls *)"]\n'
GARBAGE = '[permissions\ndeny = ["Bash(rm'


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    d = {k: tmp_path / k for k in ("cfg", "state", "managed", "ws", "home")}
    for p in d.values():
        p.mkdir()
    os.chmod(d["managed"], 0o755)
    return d


def store(d: dict[str, Path]) -> PolicyStore:
    return PolicyStore(config_dir=d["cfg"], state_dir=d["state"], managed_dir=d["managed"], home=str(d["home"]))


def check(d: dict[str, Path], command: str, mode: str, tool: str = "Bash") -> str:
    inp = {"command": command} if tool == "Bash" else {"file_path": command}
    call = CallInfo("claude", "s", tool, inp, str(d["ws"]), mode=mode, workspace=str(d["ws"]))
    return check_offline(call, config_dir=d["cfg"], state_dir=d["state"], managed_dir=d["managed"]).decision


def test_a_start_over_a_broken_file_uses_its_last_good_copy(dirs):
    policy = dirs["cfg"] / "policy.toml"
    policy.write_text(DENY_RM)
    assert store(dirs).load() == []
    copies = list((dirs["state"] / "lastgood").iterdir())
    assert len(copies) == 1 and stat.S_IMODE(copies[0].stat().st_mode) == 0o600
    policy.write_text(GARBAGE)  # an editor crash, a bad sync
    s = store(dirs)  # a restart
    errors = s.load()
    assert errors and "USING THE LAST GOOD COPY" in errors[0]
    assert "Bash(rm:*)" in {r.text for r in s.policy.rules} and s.policy.locked is None
    assert check(dirs, "rm -rf x", "bypassPermissions") == "deny"
    assert check(dirs, "ls src", "default") == "allow"


def _break(policy: Path, breakage: str) -> None:
    if breakage == "garbage":
        policy.write_text(GARBAGE)
    elif breakage == "unreadable":
        policy.mkdir()  # read_text raises (root can read any file, not a directory)
    elif breakage == "fifo":
        os.mkfifo(policy)  # opening it to read would block the daemon's thread
    elif breakage == "endless":
        os.symlink("/dev/zero", policy)  # reading it would fill memory
    elif breakage == "device":
        os.symlink("/dev/null", policy)
    elif breakage == "huge":
        policy.write_text("# padding\n" * 110_000 + DENY_RM)  # over a MiB
    else:
        policy.write_bytes(b"[permissions]\ndeny = ['\xff\xfe']\n")


BREAKAGES = ["garbage", "unreadable", "not-utf8", "fifo", "endless", "device", "huge"]


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_no_last_good_copy_locks_the_policy(dirs, breakage):
    policy = dirs["cfg"] / "policy.toml"
    _break(policy, breakage)
    s = store(dirs)
    s.load()
    assert s.policy.locked and "no last good copy" in s.policy.locked
    for mode in ("bypassPermissions", "danger-full-access", "acceptEdits", "default", "auto"):
        assert check(dirs, "rm -rf x", mode) == "ask", mode  # never allowed; a person decides
        assert check(dirs, "ls", mode) == "ask", mode  # the broken layer might have denied even reads
    assert check(dirs, str(dirs["ws"] / "a.txt"), "default", tool="Read") == "ask"
    assert check(dirs, "ls", "dontAsk") == "deny"  # a mode that never asks denies


def test_the_lock_lifts_when_the_file_is_fixed_and_a_deleted_file_forgets_its_copy(dirs):
    policy = dirs["cfg"] / "policy.toml"
    policy.write_text(GARBAGE)
    s = store(dirs)
    s.load()
    assert s.policy.locked
    policy.write_text(DENY_RM)
    assert s.load() == [] and s.policy.locked is None
    policy.unlink()
    assert s.load() == []
    assert not list((dirs["state"] / "lastgood").iterdir())  # gone on purpose: not resurrected at a start


def test_a_reload_keeps_the_last_good_parse_without_locking(dirs):
    policy = dirs["cfg"] / "policy.toml"
    policy.write_text(DENY_RM)
    s = store(dirs)
    s.load()
    policy.write_text(GARBAGE)
    os.utime(policy, ns=(1, 1))
    errors = s.load()
    assert errors and "stays in force" in errors[0] and s.policy.locked is None
    assert "Bash(rm:*)" in {r.text for r in s.policy.rules}


def test_a_refused_managed_file_uses_its_copy_or_locks(dirs):
    managed = dirs["managed"] / "policy.toml"
    managed.write_text('[permissions]\ndeny = ["Bash(curl *)"]\n')
    assert store(dirs).load() == []
    os.chmod(managed, 0o666)  # writable by others: its content cannot be trusted any more
    s = store(dirs)
    s.load()
    assert "Bash(curl *)" in {r.text for r in s.policy.rules} and s.policy.locked is None
    for f in (dirs["state"] / "lastgood").iterdir():
        f.unlink()
    s = store(dirs)
    s.load()
    assert s.policy.locked and "writable" in s.policy.locked


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_project_file_locks_only_its_workspace(dirs, breakage):
    """A workspace's policy file is the agent's (or a cloned repository's) to shape: a FIFO, a link to an
    endless device or a huge file costs that workspace its rule and mode allows, never the daemon."""
    ws2 = dirs["ws"].parent / "ws2"
    (dirs["ws"] / ".nexus").mkdir()
    ws2.mkdir()
    _break(dirs["ws"] / ".nexus" / "policy.toml", breakage)
    s = store(dirs)
    s.load()
    assert s.policy.locked is None
    assert s.policy_for(str(dirs["ws"])).locked and s.policy_for(str(ws2)).locked is None
    assert check(dirs, "ls", "bypassPermissions") == "ask"
    fixed = dirs["ws"] / ".nexus" / "policy.toml"
    if fixed.is_dir() and not fixed.is_symlink():
        fixed.rmdir()
    else:
        fixed.unlink()
    fixed.write_text('[permissions]\nask = ["Bash(git push *)"]\n')
    assert s.policy_for(str(dirs["ws"])).locked is None


def test_a_last_good_copy_that_cannot_be_kept_is_a_warning_after_the_load(dirs):
    """The layer still applies; what is lost is a later start's fallback, and the daemon's start log says so
    (the warning was once added during the load and then dropped by the load's own reset)."""
    (dirs["cfg"] / "policy.toml").write_text(DENY_RM)
    (dirs["state"] / "lastgood").write_text("not a directory")  # so no copy can be written
    s = store(dirs)
    assert s.load() == []
    assert "Bash(rm:*)" in {r.text for r in s.policy.rules}
    assert any("cannot keep a last good copy" in w for w in s.warnings), s.warnings
    (dirs["state"] / "lastgood").unlink()
    s.load()  # a reload that can keep it again clears the warning
    assert not any("cannot keep a last good copy" in w for w in s.warnings), s.warnings
