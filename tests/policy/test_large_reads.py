"""Seed 000's 10 MB limit on reads, and the slice a Read may take of a larger file (offset/limit, in lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexusd.decision.offline import check_offline
from nexusd.protocol import CallInfo
from tests.conftest import short_tmpdir


@pytest.fixture(scope="module")
def world() -> tuple[Path, Path]:
    root = short_tmpdir()
    ws = root / "ws"
    ws.mkdir()
    with open(ws / "big.log", "wb") as f:  # sparse: 11 MiB of size, no disk
        f.truncate(11 * 1024 * 1024)
        f.seek(0)
        f.write(b"line 1\n")
    (ws / "small.txt").write_text("s\n")
    return ws, root


def read(world, name: str, **extra) -> tuple[str, str]:
    ws, root = world
    call = CallInfo(provider="claude", session="s", tool="Read", input={"file_path": str(ws / name), **extra},
                    cwd=str(ws), mode="default", workspace=str(ws))  # fmt: skip
    v = check_offline(call, config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "managed")
    return v.decision, v.reason


def test_a_whole_read_of_a_file_over_10_mb_is_refused_with_how_to_read_it(world):
    decision, reason = read(world, "big.log")
    assert decision == "deny" and "large file" in reason and "offset/limit" in reason


@pytest.mark.parametrize("extra", [{"offset": 1000, "limit": 200}, {"limit": 1}, {"offset": 0, "limit": 5000}])
def test_a_slice_of_a_large_file_is_read(world, extra):
    assert read(world, "big.log", **extra)[0] == "allow"


@pytest.mark.parametrize(
    "extra",
    [{"limit": 0}, {"limit": -5}, {"limit": 10**9}, {"limit": "200"}, {"limit": 200.0}, {"limit": True}, {"offset": 5}],
)
def test_a_slice_that_is_no_slice_is_still_a_large_read(world, extra):
    assert read(world, "big.log", **extra)[0] == "deny"


def test_small_files_are_unaffected(world):
    assert read(world, "small.txt")[0] == "allow"
    assert read(world, "small.txt", limit=10)[0] == "allow"
