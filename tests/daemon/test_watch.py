"""The daemon reloads by itself when a policy file changes (issue "first hour": creating or editing the user
policy changed nothing until `nexusctl reload`). A real daemon, real files, real inotify."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nexusd.client import Client
from nexusd.daemon.watch import watch_targets
from nexusd.protocol import CallInfo, Reload
from tests.conftest import DaemonHandle, gate_only_policy

CALL = CallInfo("claude", "s", "Bash", {"command": "npm install left-pad"}, "/tmp")


def decision(h: DaemonHandle) -> str:
    with Client(socket_path=str(h.socket), role="ui", name="t") as c:
        return c.check(CALL).decision


def until(h: DaemonHandle, want: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while (got := decision(h)) != want:
        assert time.monotonic() < deadline, f"still {got}, never {want}"
        time.sleep(0.1)


def write(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    tmp.rename(path)


def test_creating_editing_breaking_and_fixing_the_user_policy(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory()
    policy = h.config_dir / "policy.toml"
    assert decision(h) == "ask"
    write(policy, gate_only_policy('[permissions]\ndeny = ["Bash(npm install *)"]\n'))
    until(h, "deny")
    write(policy, gate_only_policy('[permissions]\nallow = ["Bash(npm install left-pad)"]\n'))
    until(h, "allow")
    policy.write_text('[permissions]\nallow = ["Bash(npm inst')  # a half-written save
    time.sleep(1.0)
    assert decision(h) == "allow"  # the last good parse stays
    with Client(socket_path=str(h.socket), role="ui", name="t") as c:
        assert c.status().policy_errors
    write(policy, gate_only_policy(""))
    until(h, "ask")  # the gate's default for it
    policy.unlink()
    until(h, "allow")  # nexusd's own default, the sandbox working here: sandbox-first, runs sandboxed


def test_a_config_directory_created_later_is_picked_up(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory(autostart=False)
    shutil.rmtree(h.config_dir)
    h.start()
    # nexusd's own default: ask before the sandbox probe has answered, then sandbox-first (allow)
    assert decision(h) in ("ask", "allow")
    h.config_dir.mkdir()
    write(h.config_dir / "policy.toml", '[permissions]\ndeny = ["Bash(npm *)"]\n')
    until(h, "deny")


def test_no_watch_policy_leaves_reload_to_a_person(daemon_factory: Callable[..., DaemonHandle]) -> None:
    h = daemon_factory(args=("--no-watch-policy",))
    assert decision(h) == "ask"  # up and loaded (the socket is bound before the policy is read)
    write(h.config_dir / "policy.toml", '[permissions]\ndeny = ["Bash(npm install *)"]\n')
    time.sleep(1.0)
    assert decision(h) == "ask"
    with Client(socket_path=str(h.socket), role="admin", name="t") as c:
        c.call(Reload())
    assert decision(h) == "deny"


def test_watch_targets_climb_to_an_existing_directory(tmp_path: Path) -> None:
    f = tmp_path / "a" / "b" / "policy.toml"
    dirs, relevant = watch_targets([f])
    assert dirs == [tmp_path] and {f, tmp_path / "a", tmp_path / "a" / "b"} <= relevant


@pytest.mark.anyio
async def test_watch_policy_returns_once_its_stop_event_is_set(tmp_path: Path) -> None:
    """Set ``stop`` and the watcher returns at its next step. A cancellation alone waits for watchfiles'
    thread, up to its 5 s timeout (4.5 s measured): a daemon that had run a while took that long to stop."""
    import anyio

    from nexusd.daemon.watch import watch_policy

    stop = anyio.Event()
    reloads: list[int] = []

    async def reload() -> None:
        reloads.append(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_policy, lambda: [tmp_path / "policy.toml"], reload, stop)
        await anyio.sleep(0.5)  # in watchfiles' thread by now
        t = time.monotonic()
        stop.set()
    assert time.monotonic() - t < 3.0 and reloads == []
