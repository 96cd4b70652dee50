"""Agent resolution through transient shells and wrappers, on real processes."""

from __future__ import annotations

import contextlib
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


def test_direct_proc_reads_agree_with_psutil_on_every_process_here():
    """The guard reads /proc itself (issue 21: psutil was most of an ask's CPU); it must see what psutil sees."""
    import psutil

    from nexusd.daemon import peer

    shell = subprocess.Popen(["/bin/sh", "-c", "exec -a a-very-long-process-name-indeed sleep 30"])
    try:
        time.sleep(0.2)
        seen = 0
        for pid in psutil.pids():
            try:
                proc = psutil.Process(pid)
                expected = {proc.name()}
                with contextlib.suppress(psutil.Error):
                    expected.add(os.path.basename(proc.exe()))
                names, parent = peer._names_and_parent(pid)
                assert names - {""} == expected - {""} and parent == proc.ppid(), pid
                assert peer._cmdline(pid) == proc.cmdline(), pid
                assert peer.ancestors(pid) == peer._ancestors_psutil(pid), pid
                seen += 1
            except psutil.NoSuchProcess:
                continue
        assert seen > 3
        assert peer.ancestors(shell.pid)[:2] == [shell.pid, os.getpid()]
    finally:
        shell.kill()
        shell.wait()
    assert peer.ancestors(shell.pid) is None  # gone (reaped): fail closed
