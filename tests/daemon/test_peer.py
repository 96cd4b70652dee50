"""Agent resolution through transient shells and wrappers, on real processes."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from nexusd.daemon.peer import _runs_a_command, parent_pid, resolve_agent


@pytest.mark.parametrize(
    "argv,transient",
    [
        (["bash"], False),
        (["-bash"], False),  # login shell
        (["zsh", "-l", "-i"], False),
        (["sh", "-c", "nexus-hook claude"], True),
        (["bash", "-lc", "nexus-hook"], True),
        (["sh", "/usr/local/bin/hook.sh"], True),
        (["bash", "--norc", "-c", "x"], True),
    ],
)
def test_a_shell_running_a_command_is_transient_an_interactive_one_is_not(argv, transient):
    assert _runs_a_command(argv) is transient


def _child_of(shell: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and parent_pid(int(entry)) == shell.pid:
                return int(entry)
        time.sleep(0.02)
    raise AssertionError("the shell started no child")


def test_resolution_walks_up_through_sh_c_and_env_to_the_agent():
    shell = subprocess.Popen(["/bin/sh", "-c", "env sleep 30; exit $?"])
    try:
        sleeper = _child_of(shell)
        assert resolve_agent(parent_pid(sleeper)) == os.getpid()  # sh -c is skipped, pytest is "the agent"
        assert resolve_agent(os.getpid()) == os.getpid()  # a non-shell is itself
    finally:
        shell.kill()
        shell.wait()


def test_resolution_stops_at_an_interactive_shell():
    shell = subprocess.Popen(["/bin/sh"], stdin=subprocess.PIPE)
    try:
        assert resolve_agent(shell.pid) == shell.pid
    finally:
        shell.kill()
        shell.wait()


def test_resolution_of_nothing_or_init_is_itself():
    assert resolve_agent(None) is None
    assert resolve_agent(1) == 1
