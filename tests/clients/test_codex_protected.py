"""Codex's own configuration is protected like ``.claude``: an agent that rewrites its hook config (or the
trust entries in it) switches the gate off. Through the Codex adapter, the real policy engine
(``check_offline``) and the sandbox's mount plan, in several spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nexus_clients import codex

from nexusd.decision.offline import check_offline
from nexusd.protocol import CallInfo
from nexusd.sandbox.plan import AGENT_DIRS

# Every write and shell call allowed by rule, so only the safety checks stand in the way.
POLICY = '[permissions]\nallow = ["Bash", "Write", "Edit", "ApplyPatch", "apply_patch"]\n'


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    home, ws, cfg = tmp_path / "home", tmp_path / "ws", tmp_path / "cfg"
    for d in (home / ".codex", ws / ".git", ws / ".codex", cfg):
        d.mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "o3"\n')
    (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": "sk-secret"}')
    (cfg / "policy.toml").write_text(POLICY)
    monkeypatch.setenv("HOME", str(home))
    return home, ws, cfg


def decide(world: tuple[Path, Path, Path], tool: str, tool_input: dict, mode: str = "bypassPermissions"):
    _home, ws, cfg = world
    hook = {
        "session_id": "s",
        "turn_id": "t",
        "transcript_path": None,
        "cwd": str(ws),
        "hook_event_name": "PreToolUse",
        "model": "m",
        "permission_mode": mode,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "c",
    }
    call = CallInfo(
        **codex.call_fields_from_hook(json.loads(json.dumps(hook)), env={}, agent_pid=None, fallback_cwd="/")
    )
    return check_offline(call, config_dir=cfg, state_dir=cfg / "state", managed_dir=cfg / "managed")


def test_an_ordinary_write_is_allowed_by_the_rule(world) -> None:
    assert decide(world, "Bash", {"command": "touch notes.txt"}).decision == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "echo '[hooks]' >> ~/.codex/config.toml",
        "printf x > $HOME/.codex/hooks.json",
        "sed -i /nexus-hook/d ~/.codex/config.toml",
        "rm ~/.codex/config.toml",
        "cp /dev/null .codex/config.toml",
        "touch .codex/hooks.json",
        "mv x.toml ./sub/../.codex/config.toml",
    ],
)
def test_shell_writes_to_codex_config_need_a_person(world, command: str) -> None:
    v = decide(world, "Bash", {"command": command})
    assert v.decision != "allow" and "protected_path" in v.flags, (command, v.reason)


@pytest.mark.parametrize(
    "patch",
    [
        "*** Begin Patch\n*** Update File: .codex/config.toml\n@@\n-a\n+b\n*** End Patch",
        "*** Begin Patch\n*** Add File: .codex/hooks.json\n+{}\n*** End Patch",
        "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: .codex/config.toml\n@@\n-a\n+b\n*** End Patch",
        "*** Begin Patch\n*** Delete File: sub/../.codex/config.toml\n*** End Patch",
    ],
)
def test_apply_patch_into_codex_config_needs_a_person(world, patch: str) -> None:
    v = decide(world, "apply_patch", {"command": patch})
    assert v.decision != "allow" and "protected_path" in v.flags, (patch, v.reason)


def test_home_codex_config_through_apply_patch_absolute(world) -> None:
    home = world[0]
    patch = f"*** Begin Patch\n*** Update File: {home}/.codex/config.toml\n@@\n-a\n+b\n*** End Patch"
    v = decide(world, "apply_patch", {"command": patch})
    assert v.decision != "allow" and "protected_path" in v.flags


def test_codex_credentials_are_never_read_by_mode_or_rule(world) -> None:
    v = decide(world, "Bash", {"command": "cat ~/.codex/auth.json"})
    assert v.decision != "allow", v.reason


def test_the_sandbox_mounts_codex_config_read_only(world) -> None:
    """In the sandbox (bubblewrap mount plan), the workspace's and the home's ``.codex`` are read-only."""
    from nexusd.policy.sandbox_settings import SandboxSettings
    from nexusd.sandbox.plan import build_layout

    home, ws, _ = world
    layout = build_layout(
        str(ws), str(ws), SandboxSettings(enabled=True), hidden_dirs=(), home=str(home),
        sandbox_home=str(ws.parent / "sbx-home"), sandbox_tmp=str(ws.parent / "sbx-tmp"),
    )  # fmt: skip
    ro = set(layout.spec.protected_ro)
    assert str((ws / ".codex").resolve()) in ro and str((home / ".codex").resolve()) in ro
    assert ".codex" in AGENT_DIRS
