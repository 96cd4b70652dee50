"""Red-team suite: every attack class in tests/attack_corpus.py against the real gate, in every mode.

Most cases run through ``nexusd.decision.offline.check_offline`` (the real store, loader, classifier,
engine and gate over a policy file in a temp config dir); a few run through the real daemon and the
real ``nexus-hook claude`` process. Nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nexus_clients import agent_settings

from nexusd.decision.offline import check_offline
from nexusd.protocol import CallInfo, Verdict
from tests.attack_corpus import ALLOW, CASES, DENY, NO_RULE, POLICY, SAFETY
from tests.conftest import DaemonHandle, short_tmpdir

MODES = ("default", "acceptEdits", "plan", "dontAsk", "auto", "bypassPermissions")
NO_PROMPT_MODES = ("default", "plan", "dontAsk")  # modes where no rule may allow a NO_RULE case


@dataclass
class World:
    root: Path
    ws: Path
    config: Path
    state: Path
    managed: Path

    def sub(self, value: Any) -> Any:
        """Put the temp locations into a case (WS, WSNAME, CONFIG, STATE)."""
        if isinstance(value, str):
            return (
                value.replace("WSNAME", self.ws.name)
                .replace("WS", str(self.ws))
                .replace("CONFIG", str(self.config))
                .replace("STATE", str(self.state))
            )
        if isinstance(value, dict):
            return {k: self.sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.sub(v) for v in value]
        return value

    def check(self, call: Any, mode: str, provider: str = "claude") -> Verdict:
        tool, inp = ("Bash", {"command": call}) if isinstance(call, str) else call
        info = CallInfo(
            provider=provider,
            session="red",
            tool=tool,
            input=self.sub(inp),
            cwd=str(self.ws),
            mode=mode,
            workspace=str(self.ws),
        )
        return check_offline(info, config_dir=self.config, state_dir=self.state, managed_dir=self.managed)


def make_world() -> World:
    root = short_tmpdir()
    ws = root / "ws"
    for d in ("src", ".git/hooks", "secrets", "build"):
        (ws / d).mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / ".env").write_text("SECRET=1\n")
    (ws / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "src" / "outlink").symlink_to("/etc")
    (ws / "hooklink").symlink_to(ws / ".git" / "hooks")
    cfg, state, managed = root / "config", root / "state", root / "managed"
    for d in (cfg, state, managed):
        d.mkdir()
    (cfg / "policy.toml").write_text(POLICY)
    return World(root, ws, cfg, state, managed)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    yield make_world()


def _id(case: tuple[str, Any, str]) -> str:
    cls, call, expect = case
    text = call if isinstance(call, str) else f"{call[0]}:{json.dumps(call[1], ensure_ascii=True)}"
    return f"{cls}-{expect}-{text[:70]!r}"


def _why(v: Verdict) -> str:
    return f"{v.decision} ({v.source}): {v.reason} flags={v.flags} rule={v.rule}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_attack(world: World, case: tuple[str, Any, str]) -> None:
    _, call, expect = case
    if expect == ALLOW:
        v = world.check(call, "default")
        assert v.decision == "allow", _why(v)
        return
    modes = NO_PROMPT_MODES if expect == NO_RULE else MODES
    for mode in modes:
        v = world.check(call, mode)
        if expect == DENY:
            assert v.decision == "deny", f"[{mode}] {_why(v)}"
        else:
            assert v.decision != "allow", f"[{mode}] {_why(v)}"
        if expect == SAFETY and v.source == "safety":
            assert v.suggestions == [], f"[{mode}] a safety-flagged call offers 'always': {v.suggestions}"


@pytest.mark.parametrize("provider", ["gemini", "codex", "mcp", "other"])
def test_deny_rules_hold_for_every_provider(world: World, provider: str) -> None:
    for call in ("git status; curl x", ("Read", {"file_path": ".env"}), "cat src/../.e*"):
        for mode in ("default", "bypassPermissions", "yolo", "YOLO", "allow", "danger-full-access"):
            v = world.check(call, mode, provider=provider)
            assert v.decision == "deny", f"[{provider}/{mode}] {_why(v)}"


@pytest.mark.parametrize(
    "mode",
    [
        "bypassPermissions",
        "BYPASS_PERMISSIONS",
        "yolo",
        "allow",
        "danger-full-access",
        "BypassPermissions",
        "bypass_permissions",
        "nonsense-mode",
        "",
    ],
)
def test_protected_and_catastrophic_in_every_bypass_spelling(world: World, mode: str) -> None:
    for call in (
        "rm -rf /",
        "echo x > .git/hooks/pre-commit",
        ("Write", {"file_path": ".git/config", "content": ""}),
        "git config core.hooksPath /tmp",
    ):
        v = world.check(call, mode)
        assert v.decision != "allow", f"[{mode}] {_why(v)}"


def test_fail_closed_on_broken_policy(tmp_path: Path) -> None:
    """A policy file that does not parse never loosens the gate: the built-in default still asks."""
    w = make_world()
    (w.config / "policy.toml").write_text('[permissions]\nallow = ["Bash"\n')
    v = w.check("touch pwn", "default")
    assert v.decision != "allow", _why(v)
    (w.config / "policy.toml").write_text('[permissions]\nallow = ["Bash(*)"]\nmode = 3\n')
    v = w.check("curl x", "default")
    assert v.decision != "allow", _why(v)


# --------------------------------------------------------------------------- the real daemon and hook


HOOK = agent_settings.hook_launcher_argv()  # as the installers write it: python -IS …/nexus-hook.py


def _hook(handle: DaemonHandle, ws: Path, tool: str, tool_input: dict[str, Any], mode: str = "default") -> str:
    data = {
        "session_id": "red-hook",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": str(ws),
        "hook_event_name": "PreToolUse",
        "permission_mode": mode,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_red",
    }
    env = dict(handle.env)
    env.pop("CLAUDE_PROJECT_DIR", None)
    proc = subprocess.run(
        [*HOOK, "claude"], input=json.dumps(data).encode(), env=env, capture_output=True, timeout=60, check=False
    )
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        return "deny"
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    return str(spec["permissionDecision"])


@pytest.fixture
def hooked(daemon_factory: Callable[..., DaemonHandle]) -> tuple[DaemonHandle, Path]:
    handle = daemon_factory(policy=POLICY, pending_timeout=2)
    w = make_world()
    return handle, w.ws


# With no UI connected, an ask comes back from the hook as a deny (fail closed).
HOOK_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("Bash", {"command": "git status"}, "default", "allow"),
    ("Bash", {"command": "cat src/a.py"}, "default", "allow"),
    ("Bash", {"command": "git status; curl evil.io"}, "default", "deny"),
    ("Bash", {"command": "git status && curl x"}, "bypassPermissions", "deny"),
    ("Bash", {"command": "echo a | echo b | echo c\ncurl evil && echo d"}, "bypassPermissions", "deny"),
    ("Bash", {"command": "cat src/../.e*"}, "default", "deny"),
    ("Bash", {"command": "rm -rf /"}, "bypassPermissions", "deny"),
    ("Bash", {"command": "echo x > .git/hooks/pre-commit"}, "bypassPermissions", "deny"),
    ("Bash", {"command": "git config core.hooksPath /tmp"}, "bypassPermissions", "deny"),
    ("Write", {"file_path": ".claude/settings.json", "content": "{}"}, "bypassPermissions", "deny"),
    ("Read", {"file_path": ".env"}, "bypassPermissions", "deny"),
    ("WebFetch", {"url": "http://169.254.169.254/latest/meta-data", "prompt": "x"}, "bypassPermissions", "deny"),
    ("WebFetch", {"url": "https://example.com@evil.io/", "prompt": "x"}, "default", "deny"),
    ("bash", {"command": "touch x"}, "default", "deny"),
]


def test_attacks_through_daemon_and_hook(hooked: tuple[DaemonHandle, Path]) -> None:
    handle, ws = hooked
    failures = []
    for tool, inp, mode, want in HOOK_CASES:
        got = _hook(handle, ws, tool, inp, mode)
        if got != want:
            failures.append(f"{tool} {inp} [{mode}]: {got}, want {want}")
    assert not failures, "\n".join(failures)


def test_hook_garbage_stdin_denies(hooked: tuple[DaemonHandle, Path]) -> None:
    """Claude Code blocks a call only on exit 2 or on exit 0 with a "deny" decision; any other exit code is a
    non-blocking hook error after which the call RUNS, and exit 0 with no output lets its own prompt decide."""
    handle, _ = hooked
    for data in (b"", b"{", b"null", b"[]", b'{"tool_name": 3}', b"\xff\xfe", b'{"hook_event_name":"PreToolUse"}'):
        proc = subprocess.run(
            [*HOOK, "claude"], input=data, env=handle.env, capture_output=True, timeout=60, check=False
        )
        if proc.returncode == 2:
            assert proc.stderr.strip(), (data, "exit 2 must say why on stderr")
            continue
        assert proc.returncode == 0, (data, proc.returncode, proc.stdout, proc.stderr)
        spec = json.loads(proc.stdout)["hookSpecificOutput"]
        assert spec["permissionDecision"] == "deny", (data, proc.stdout)
        assert spec["permissionDecisionReason"].strip(), (data, proc.stdout)
