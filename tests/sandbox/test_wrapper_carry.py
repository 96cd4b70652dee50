"""The agent's wrapped shell call carries its final directory out of the sandbox (real bubblewrap, real
bash and dash as the agent's shell), and leaves a terminal the command's own.

The oracle is the same command run bare through ``eval`` in the same kind of persistent shell (what
Claude Code's Bash tool does): after each call the shell's ``pwd -P`` and ``$?`` must match. The
final directory comes back through a file the command can write junk into, so the attacks try to make
the agent's shell run something or land somewhere the command did not end in.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.protocol import SandboxProbe
from tests.sandbox.conftest import agent_text


@pytest.fixture
def world(real_probe: SandboxProbe) -> Iterator[tuple[Path, Path, PolicyStore]]:
    root = Path(tempfile.mkdtemp(prefix="nxcd", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    ws = root / "ws"
    for d in ("sub/deep", "other"):
        (ws / d).mkdir(parents=True)
    (root / "cfg").mkdir()
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    time.sleep(0.1)
    yield root, ws, store
    shutil.rmtree(root, ignore_errors=True)


MARK = "@@nexus-test@@"


def session(
    steps: list[str], shell: str = "/bin/bash", *, cwd: Path, stderr_tty: bool = False
) -> list[tuple[int, str]]:
    """Run ``steps`` (shell texts) one after another through ``eval`` in ONE shell process, as an agent's
    persistent shell does; after each: its exit status and ``pwd -P``."""
    body = "".join(f'eval {shlex.quote(s)}\nprintf \'\\n{MARK} %s %s\\n\' "$?" "$(pwd -P)"\n' for s in steps)
    argv = [shell, "-c", body]
    if stderr_tty:  # the command's stderr is a terminal (script(1) gives the shell one)
        argv = ["script", "-qec", shlex.join(argv), "/dev/null"]
    out = subprocess.run(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    ).stdout.replace("\r", "")
    got = []
    for line in out.splitlines():
        if line.startswith(MARK + " "):
            rc, _, pwd = line[len(MARK) + 1 :].partition(" ")
            got.append((int(rc), pwd))
    return got


def wrapped(store: PolicyStore, probe: SandboxProbe, command: str, cwd: Path, ws: Path) -> str:
    text = agent_text(store, probe, command, cwd, ws)
    assert text is not None and "__nexus_cd" in text
    if "$(" not in command and "`" not in command:  # Gemini CLI refuses a shell command with either
        assert "$(" not in text and "`" not in text
    return text


def both(
    store: PolicyStore, probe: SandboxProbe, ws: Path, command: str, shell: str = "/bin/bash"
) -> tuple[tuple[int, str], tuple[int, str]]:
    """(sandboxed, bare) (exit status, final directory) of one call made from the workspace."""
    (sandboxed,) = session([wrapped(store, probe, command, ws, ws)], shell, cwd=ws)
    (bare,) = session([command], shell, cwd=ws)
    return sandboxed, bare


@pytest.mark.parametrize("shell", ["/bin/bash", "/usr/bin/dash"])
@pytest.mark.parametrize(
    "command",
    [
        "cd sub",
        "cd sub && pwd",
        "cd sub/deep; true",
        "cd sub; false",  # the command failed, after it moved
        "cd sub; (exit 42)",
        "cd sub && false && cd deep",  # fails midway: stays where it was when it failed
        "cd sub; cat no-such-file; cd deep",  # a failure in the middle, then on
        "cd ..",  # outside the workspace: read-only there, but the same directory outside
        "cd /usr/lib",
        "pushd sub >/dev/null 2>&1 || cd sub",
        "true",
        "exit 3",  # the inner shell exits: nothing recorded, the agent's shell stays
        "(cd sub; exit 7)",  # a subshell's cd is not the shell's
        "cd sub; set -e; false; cd deep",
    ],
)
def test_the_final_directory_and_exit_status_are_the_bare_commands(world, real_probe, command, shell) -> None:  # type: ignore[no-untyped-def]
    _, ws, store = world
    if command in ("exit 3", "cd sub; set -e; false; cd deep"):
        # bare, these end the agent's own shell (its marker never prints); sandboxed, the inner shell ended
        # before it could say where it was: the agent's shell stays, with the status
        ((rc, pwd),) = session([wrapped(store, real_probe, command, ws, ws)], shell, cwd=ws)
        assert (rc, pwd) == (3 if command == "exit 3" else 1, str(ws))
        return
    sandboxed, bare = both(store, real_probe, ws, command, shell)
    assert sandboxed == bare, (command, sandboxed, bare)


@pytest.mark.parametrize("shell", ["/bin/bash", "/usr/bin/dash"])
def test_a_persistent_shell_follows_the_commands_across_calls(world, real_probe, shell) -> None:  # type: ignore[no-untyped-def]
    _, ws, store = world
    steps = [
        wrapped(store, real_probe, "cd sub", ws, ws),
        wrapped(store, real_probe, "cd deep && touch made", ws / "sub", ws),  # relative to where the last left
        wrapped(store, real_probe, "exit 42", ws / "sub" / "deep", ws),
        wrapped(store, real_probe, "cd ../.. && false", ws / "sub" / "deep", ws),
        wrapped(store, real_probe, "cd other", ws, ws),
    ]
    got = session(steps, shell, cwd=ws)
    assert got == [
        (0, str(ws / "sub")),
        (0, str(ws / "sub" / "deep")),
        (42, str(ws / "sub" / "deep")),
        (1, str(ws)),
        (0, str(ws / "other")),
    ]
    assert (ws / "sub" / "deep" / "made").exists()


def test_a_directory_only_inside_or_on_a_private_mount_is_not_carried(world, real_probe) -> None:  # type: ignore[no-untyped-def]
    root, ws, store = world
    decoy = Path(tempfile.mkdtemp(prefix="nxcd-decoy"))  # the host's /tmp: another user's directory, say
    try:
        for command in (
            f"mkdir -p {decoy} && cd {decoy}",  # the sandbox's /tmp is its own: the host's is not where it was
            "cd /tmp",
            "cd /proc/self",
            "cd /dev",
            f"cd {root / 'state'}",  # masked (a tmpfs inside)
            "cd",  # the sandbox's own HOME (under the masked state directory), not the user's
            'cd "$TMPDIR"',
        ):
            (sandboxed,) = session([wrapped(store, real_probe, command, ws, ws)], cwd=ws)
            assert sandboxed == (0, str(ws)), command
    finally:
        shutil.rmtree(decoy, ignore_errors=True)


@pytest.mark.parametrize(
    "name",
    [
        "$(touch PWNED)",
        "`touch PWNED`",
        "x'; touch PWNED; '",
        'x"; touch PWNED; "',
        "-P",
        "--",
        " lead and trail ",
        "a\\b*?[c]",
        "dir\nwith newline",  # `pwd -P` prints two lines: not carried at all (not a truncated prefix)
    ],
)
def test_hostile_directory_names_are_one_word_or_nothing(world, real_probe, name) -> None:  # type: ignore[no-untyped-def]
    _, ws, store = world
    (ws / name).mkdir()
    (ws / "dir").mkdir(exist_ok=True)  # the prefix of the newline name: a truncated read would land here
    (sandboxed,) = session([wrapped(store, real_probe, f"cd ./{shlex.quote(name)}", ws, ws)], cwd=ws)
    expected = str(ws) if "\n" in name else str(ws / name)
    assert sandboxed == (0, expected)
    assert not list(ws.rglob("PWNED")) and not Path("PWNED").exists()


def test_junk_on_every_descriptor_does_not_steer_the_agents_shell(world, real_probe) -> None:  # type: ignore[no-untyped-def]
    """The command cannot reach the record's descriptor directly (closed around it), but a copy the inner
    shell saved may be reachable: whatever it writes there, the agent's shell goes nowhere but a
    validated, existing, same-outside directory, and runs nothing."""
    _, ws, store = world
    (ws / "target").mkdir()
    junk = (
        "for fd in 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 63 255; do "
        "{ printf '%s\\n' '/etc' \"$PWD/target\" '$(touch PWNED)' >&$fd; } 2>/dev/null; done; true"
    )
    (ws / "junk.sh").write_text(junk)
    (sandboxed,) = session([wrapped(store, real_probe, ". ./junk.sh", ws, ws)], cwd=ws)
    assert sandboxed[0] == 0 and sandboxed[1] in (str(ws), str(ws / "target"), "/etc")
    assert sandboxed[1] == str(ws), "junk before the record makes it garbage: no cd"
    assert not list(ws.rglob("PWNED"))
    # a symlink to elsewhere is followed as a bare `cd link` would be: pwd -P names the target
    (ws / "link").symlink_to(ws / "other")
    sandboxed, bare = both(store, real_probe, ws, "cd link")
    assert sandboxed == bare == (0, str(ws / "other"))


def test_a_terminal_stays_the_commands_own(world, real_probe) -> None:  # type: ignore[no-untyped-def]
    """With a terminal as its error output the command sees that terminal (no tap), and the cd still
    carries; with a pipe it is tapped."""
    _, ws, store = world
    probe_cmd = "cd sub; if [ -t 2 ]; then touch stderr-is-a-tty; else touch stderr-is-not; fi"
    ((rc, pwd),) = session([wrapped(store, real_probe, probe_cmd, ws, ws)], cwd=ws, stderr_tty=True)
    assert (rc, pwd) == (0, str(ws / "sub")) and (ws / "sub" / "stderr-is-a-tty").exists()
    ((rc, pwd),) = session([wrapped(store, real_probe, probe_cmd, ws, ws)], cwd=ws)
    assert (rc, pwd) == (0, str(ws / "sub")) and (ws / "sub" / "stderr-is-not").exists()


def test_the_per_call_files_are_removed(world, real_probe) -> None:  # type: ignore[no-untyped-def]
    root, ws, store = world
    for command in ("cd sub", "echo x > /usr/nope", "exit 5"):
        session([wrapped(store, real_probe, command, ws, ws)], cwd=ws)
    # a refusal (the plan went stale: a protected path appeared after the decision) removes them too
    stale = wrapped(store, real_probe, "cd sub", ws, ws)
    (ws / ".envrc").write_text("")
    ((rc, pwd),) = session([stale], cwd=ws)
    assert (rc, pwd) == (126, str(ws))
    run_dir = next((root / "state" / "sandbox").glob("*/run"))

    def left() -> list[str]:
        return [p.name for p in run_dir.iterdir() if not p.name.endswith((".sh", ".json", ".dirs"))]

    deadline = time.monotonic() + 30  # removed in the background, once the agent has its answer
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left()
