"""No agent writes the audit trail: its file, rotations, chain checkpoint or a directory holding them is refused
by a safety check in every mode, over every allow rule, in several spellings, through a symlink, and when the
state directory lies inside the workspace (home as workspace)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexusd.core.model import Session
from nexusd.policy.gate import decide
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo

pytestmark = pytest.mark.anyio

ALLOW_ALL = '[permissions]\nallow = ["Bash(*)", "Write", "Edit", "Read"]\n'


def _world(tmp_path: Path, state_in_ws: bool) -> tuple[PolicyStore, Path, Path]:
    ws = tmp_path / "ws"
    state = ws / ".local" / "state" / "nexus" if state_in_ws else tmp_path / "state"
    for d in (tmp_path / "cfg", tmp_path / "managed", ws, state, tmp_path / "home"):
        d.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cfg" / "policy.toml").write_text(ALLOW_ALL)
    (state / "audit.jsonl").write_text("{}\n")
    os.symlink(state / "audit.jsonl", ws / "log.txt")
    os.symlink(state, ws / "st")
    store = PolicyStore(
        config_dir=tmp_path / "cfg", state_dir=state, managed_dir=tmp_path / "managed", home=str(tmp_path / "home")
    )
    assert store.load() == []
    return store, ws, state


def _calls(ws: Path, state: Path) -> list[tuple[str, dict]]:
    a = str(state / "audit.jsonl")
    rel = os.path.relpath(a, ws)
    return [
        ("Write", {"file_path": a, "content": ""}),
        ("Edit", {"file_path": a, "old_string": "{", "new_string": "["}),
        ("Write", {"file_path": str(ws / "log.txt"), "content": ""}),  # a symlink to it
        ("Write", {"file_path": a + ".chain", "content": "{}"}),
        ("Write", {"file_path": a + ".2", "content": ""}),
        ("Bash", {"command": f"echo forged >> {a}"}),
        ("Bash", {"command": f"truncate -s 0 {rel}"}),
        ("Bash", {"command": "sed -i 1d st/audit.jsonl"}),  # through a symlinked directory
        ("Bash", {"command": f"rm -f {a}.1"}),
        ("Bash", {"command": f"mv {a} /tmp/x"}),
        ("Bash", {"command": f"cp /dev/null {a}"}),
        ("Bash", {"command": f"rm -rf {state}"}),  # the directory holding it
        ("Bash", {"command": f"mv {state} {state}.old"}),
        ("Bash", {"command": f'python3 -c \'open("x","w")\' > {a}'}),
    ]


@pytest.mark.parametrize("state_in_ws", [False, True], ids=["state-outside", "state-in-workspace"])
@pytest.mark.parametrize("mode", ["bypassPermissions", "acceptEdits", "default"])
async def test_writes_to_the_audit_trail_are_refused(tmp_path: Path, state_in_ws: bool, mode: str) -> None:
    store, ws, state = _world(tmp_path, state_in_ws)
    for tool, inp in _calls(ws, state):
        v = await decide(CallInfo("claude", "s", tool, inp, str(ws), mode=mode), store, Session(id="s"))
        assert v.decision == "deny", (tool, inp, v.reason)
        assert "audit trail" in v.reason, (tool, inp, v.reason)


async def test_reading_it_and_writing_next_to_it_are_not_refused(tmp_path: Path) -> None:
    store, ws, state = _world(tmp_path, True)
    for tool, inp in [
        ("Read", {"file_path": str(state / "audit.jsonl")}),
        ("Bash", {"command": f"cat {state}/audit.jsonl"}),
        ("Write", {"file_path": str(ws / "audit.jsonl"), "content": "mine"}),
        ("Write", {"file_path": str(ws / "src.py"), "content": ""}),
    ]:
        v = await decide(CallInfo("claude", "s", tool, inp, str(ws), mode="bypassPermissions"), store, Session(id="s"))
        assert "audit trail" not in v.reason, (tool, v.reason)
