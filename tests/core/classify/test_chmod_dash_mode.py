"""``chmod -x FILE``: a symbolic mode that looks like an option. The file is written (its mode changes), so
the classification must name it, or a write outside the workspace passes unchecked (found while building
undo: ``chmod -w /etc/passwd`` was classified as writing nothing). Real chmod decides what is a mode."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nexusd.core.classify import classify
from nexusd.core.model import Context, Flag
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo

SPELLINGS = ["-x", "-w", "-r", "-rwx", "-x,o-r", "-w,u+x", "-X", "-s", "-t"]


def _writes(command: str, ws: Path) -> tuple[tuple[str, ...], frozenset[Flag]]:
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home="/nonexistent-home")
    call = CallInfo(provider="claude", session="s", tool="Bash", input={"command": command}, cwd=str(ws))
    cls = classify(call, ctx, DecisionFileSystem())
    return cls.writes, cls.flags


@pytest.mark.parametrize("mode", SPELLINGS)
def test_dash_mode_is_a_mode_for_real_chmod_and_the_file_is_written(tmp_path: Path, mode: str) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    target = outside / "f"
    target.write_text("x")
    target.chmod(0o777)
    done = subprocess.run(["bash", "-c", f"chmod {mode} {target}"], capture_output=True, text=True, check=False)
    # real chmod took it as a mode (it may warn that the umask kept some bits: exit 1, the mode changed)
    assert "invalid option" not in done.stderr, done.stderr
    bogus = subprocess.run(["bash", "-c", f"chmod -Q {target}"], capture_output=True, text=True, check=False)
    assert "invalid option" in bogus.stderr  # what an option it lacks looks like
    writes, flags = _writes(f"chmod {mode} {target}", ws)
    assert str(target) in writes
    assert Flag.OUTSIDE_WORKSPACE in flags


@pytest.mark.parametrize("command", ["chmod -R -x {d}", "chmod -v -x {d}/f", "chmod -x -- {d}/f"])
def test_dash_mode_with_options(tmp_path: Path, command: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    writes, flags = _writes(command.format(d="/etc"), ws)
    assert any(w.startswith("/etc") for w in writes) and Flag.OUTSIDE_WORKSPACE in flags


def test_real_options_stay_options(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert _writes("chmod -v 644 f", ws)[0] == (str(ws / "f"),)
    assert _writes("chmod --reference=r f", ws)[0] == (str(ws / "f"),)
    assert _writes("chmod -R u+x d", ws)[0] == (str(ws / "d"),)
