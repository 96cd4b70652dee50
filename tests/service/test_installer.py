"""Installer steps: planned up front, files atomically and before the manager, failures reported."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.service import installer, systemd
from nexusd.service.installer import Command, MakeDir, Plan, RemoveFile, StepFailed, WriteFile


@pytest.fixture
def tmp() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_systemd_plan_writes_files_before_telling_the_manager(tmp: Path) -> None:
    plan = installer.plan_install("systemd", "/opt/bin/nexusd", {"XDG_CONFIG_HOME": str(tmp), "HOME": "/h"})
    kinds = [type(s).__name__ for s in plan.steps]
    assert kinds == ["WriteFile", "WriteFile", "Command", "Command", "Command"]
    writes = {s.path: s.content for s in plan.steps if isinstance(s, WriteFile)}
    assert writes == systemd.files("/opt/bin/nexusd", {"XDG_CONFIG_HOME": str(tmp)})
    cmds = [s.argv for s in plan.steps if isinstance(s, Command)]
    assert cmds == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", "nexusd.socket"),
        ("systemctl", "--user", "try-restart", "nexusd.service"),
    ]


def test_launchd_plan(tmp: Path) -> None:
    plan = installer.plan_install("launchd", "/opt/bin/nexusd", {"HOME": str(tmp)})
    dirs = [s for s in plan.steps if isinstance(s, MakeDir)]
    assert dirs[0].path == tmp / "Library/Application Support/nexus/run" and dirs[0].mode == 0o700
    cmds = [s.argv for s in plan.steps if isinstance(s, Command)]
    uid = os.getuid()
    assert cmds == [
        ("launchctl", "bootout", f"gui/{uid}/io.nexus.nexusd"),
        ("launchctl", "enable", f"gui/{uid}/io.nexus.nexusd"),
        ("launchctl", "bootstrap", f"gui/{uid}", str(tmp / "Library/LaunchAgents/io.nexus.nexusd.plist")),
    ]
    assert next(s for s in plan.steps if isinstance(s, Command)).tolerate  # unloading nothing is fine


def test_unknown_manager() -> None:
    with pytest.raises(ValueError):
        installer.plan_install("upstart", "/x")


def test_dry_run_changes_nothing_and_shows_everything(tmp: Path) -> None:
    plan = installer.plan_install("systemd", "/opt/bin/nexusd", {"XDG_CONFIG_HOME": str(tmp)})
    lines: list[str] = []
    assert installer.run_plan(plan, lines.append, dry_run=True)
    text = "\n".join(lines)
    assert list(tmp.iterdir()) == []
    assert "[1/5] write" in text and "[5/5] systemctl --user try-restart nexusd.service ... (dry run)" in text
    assert "ExecStart=/opt/bin/nexusd" in text and "SocketMode=0600" in text


def test_a_failed_command_skips_the_rest_but_files_are_written(tmp: Path) -> None:
    f = tmp / "u" / "unit"
    plan = Plan(
        "systemd",
        [
            WriteFile(f, "x\n"),
            Command(("nexus-no-such-command", "a")),
            Command(("true",)),
            RemoveFile(tmp / "gone"),
        ],
        ["finish this"],
    )
    lines: list[str] = []
    assert not installer.run_plan(plan, lines.append)
    assert f.read_text() == "x\n"
    assert "[2/4] nexus-no-such-command a ... FAILED: nexus-no-such-command not found" in lines
    assert "[3/4] true ... skipped (an earlier step failed)" in lines
    assert "[4/4] remove " + str(tmp / "gone") + " ... ok (not present)" in lines  # files still handled
    assert "    finish this" in lines


def test_a_failing_command_reports_its_exit_code_and_message(tmp: Path) -> None:
    plan = Plan("systemd", [Command((sys.executable, "-c", "import sys; sys.exit('Failed to connect to bus')"))], [])
    lines: list[str] = []
    assert not installer.run_plan(plan, lines.append)
    assert lines[0].endswith("FAILED: exit 1: Failed to connect to bus")


def test_a_tolerated_failure_is_not_a_failure(tmp: Path) -> None:
    plan = Plan("launchd", [Command(("false",), tolerate=True), Command(("true",))], [])
    lines: list[str] = []
    assert installer.run_plan(plan, lines.append)
    assert "not needed" in lines[0] and lines[1].endswith("... ok")


def test_rewriting_the_same_content_says_unchanged(tmp: Path) -> None:
    plan = Plan("systemd", [WriteFile(tmp / "f", "a")], [])
    installer.run_plan(plan, lambda s: None)
    lines: list[str] = []
    installer.run_plan(plan, lines.append)
    assert lines == [f"[1/1] write {tmp / 'f'} ... ok (unchanged)"]


def test_make_dir_tightens_an_existing_directory(tmp: Path) -> None:
    d = tmp / "run"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    assert installer.run_plan(Plan("launchd", [MakeDir(d, 0o700)], []), lambda s: None)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_make_dir_refuses_a_file_in_the_way(tmp: Path) -> None:
    (tmp / "run").write_text("")
    lines: list[str] = []
    assert not installer.run_plan(Plan("launchd", [MakeDir(tmp / "run", 0o700)], []), lines.append)
    assert "FAILED" in lines[0]


def test_find_nexusd() -> None:
    found = installer.find_nexusd()
    assert os.path.isabs(found) and os.path.basename(found) == "nexusd" and os.access(found, os.X_OK)


def test_find_nexusd_explicit_must_be_executable(tmp: Path) -> None:
    f = tmp / "nexusd"
    f.write_text("#!/bin/sh\n")
    with pytest.raises(StepFailed, match="--nexusd"):
        installer.find_nexusd(str(f))
    f.chmod(0o755)
    assert installer.find_nexusd(str(f)) == str(f)


def test_a_nexusd_others_can_replace_is_warned_about(tmp: Path) -> None:
    bindir = tmp / "bin"
    bindir.mkdir()
    exe = bindir / "nexusd"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    os.chmod(bindir, 0o755)
    assert installer.nexusd_warnings(str(exe)) == []
    os.chmod(bindir, 0o777)
    assert any("writable by other users" in w for w in installer.nexusd_warnings(str(exe)))
