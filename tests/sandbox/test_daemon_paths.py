"""One set of real paths: a daemon started with every path non-default *and relative* is the only source
of the sandbox's paths. The environment names other (decoy) directories; what the agent runs must use
the daemon's own socket, config, state and managed directories, from any cwd (real daemon, real
bubblewrap, the command text the daemon really hands out).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nexusd.client import Client
from nexusd.protocol import CallInfo
from nexusd.sandbox.runner import EXIT_REFUSED
from nexusd.sandbox.wrapper import wrapper_words
from tests.sandbox.conftest import wrapper_script

PY = getattr(sys, "_base_executable", sys.executable)


@dataclass
class Daemon:
    root: Path
    ws: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.root / "d" / "run" / "s.sock"

    def wrapped(self, command: str) -> str:
        call = CallInfo(
            provider="claude",
            session="s",
            tool="Bash",
            cwd=str(self.ws),
            workspace=str(self.ws),
            input={"command": command},
        )
        with Client(socket_path=str(self.socket), role="agent", name="t") as c:
            d = c.request(call)
        assert d.decision == "allow" and d.updated_input is not None, d
        return str(d.updated_input["command"])

    def agent_runs(self, text: str, cwd: Path | str = "/") -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEXUS_")}
        return subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.fixture
def daemon(real_probe) -> Iterator[Daemon]:
    root = Path(tempfile.mkdtemp(prefix="nxdp", dir="/var/tmp"))  # /tmp is replaced inside the sandbox
    d, ws, decoy = root / "d", root / "ws", root / "decoy"
    for p in (d / "cfg", d / "managed", d / "run", ws, decoy / "cfg", decoy / "state", decoy / "managed"):
        p.mkdir(parents=True)
    os.chmod(d / "run", 0o700)
    (d / "cfg" / "policy.toml").write_text(
        '# own-policy-marker\n[permissions]\nallow = ["Bash"]\n'
        f'[sandbox]\nenabled = true\n[sandbox.filesystem]\ndeny_read = ["{root}/outside/secret"]\n'
    )
    (root / "outside").mkdir()
    (root / "outside" / "secret").write_text("TOPSECRET")
    (d / "managed" / "policy.toml").write_text("# managed-marker\n")
    (decoy / "cfg" / "policy.toml").write_text('[permissions]\nallow = ["Bash"]\n')  # another policy: unused
    env = {
        **os.environ,
        "NEXUS_CONFIG_DIR": str(decoy / "cfg"),
        "NEXUS_STATE_DIR": str(decoy / "state"),
        "NEXUS_SOCKET": str(decoy / "s.sock"),
        "NEXUS_MANAGED_DIR": "managed",
    }  # relative, from cwd d/
    env.pop("NOTIFY_SOCKET", None)
    with open(root / "log", "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nexusd.cli.daemon_main",
                "--socket",
                "run/s.sock",
                "--config-dir",
                "cfg",
                "--state-dir",
                "state",
                "--log-level",
                "debug",
            ],
            cwd=d,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    h = Daemon(root, ws, proc)
    deadline = time.monotonic() + 20
    while True:
        try:
            with Client(socket_path=str(h.socket), role="ui", name="t") as c:
                if c.status().sandbox is not None:
                    break
        except Exception:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, (root / "log").read_text()
        time.sleep(0.05)
    yield h
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
    shutil.rmtree(root, ignore_errors=True)


def test_relative_paths_are_the_daemons_own(daemon: Daemon) -> None:
    root = daemon.root
    text = daemon.wrapped("echo hi")
    script = wrapper_script(text)
    assert script.startswith(str(root / "d" / "state" / "sandbox") + "/")  # absolute, the daemon's state
    body = Path(script).read_text()
    for own in ("cfg", "state", "managed", "run"):
        assert f"--tmpfs {root}/d/{own} " in body, own  # the daemon's own dirs are masked
    assert str(root / "decoy") not in body  # and nothing from the environment's defaults
    assert "--setenv HOME " + str(root / "d" / "state" / "sandbox") in body


def test_wrapped_call_from_another_cwd_is_confined_by_that_daemons_policy(daemon: Daemon) -> None:
    root = daemon.root
    reach = (
        f"{PY} -c \"import socket; print('RAN', flush=True); s=socket.socket(socket.AF_UNIX); "
        f"s.connect('{daemon.socket}'); print('CONNECTED')\""
    )
    # in a script: the gate would rightly ask about a command line naming the daemon's files
    (daemon.ws / "attack.sh").write_text(
        f"cat {root}/outside/secret; cat {root}/d/cfg/policy.toml {root}/d/managed/policy.toml; "
        f"echo x > {root}/outside/pwned; echo ok > made; echo $HOME; {reach}\n"
    )
    text = daemon.wrapped("sh attack.sh")
    for cwd in ("/", root, root / "decoy"):
        r = daemon.agent_runs(text, cwd)
        assert "RAN" in r.stdout, r.stderr
        assert "TOPSECRET" not in r.stdout  # deny_read of the daemon's own config
        assert "own-policy-marker" not in r.stdout and "managed-marker" not in r.stdout
        assert "CONNECTED" not in r.stdout
        assert not (root / "outside" / "pwned").exists()  # writes outside the workspace refused
        assert "Read-only file system" in r.stderr
        assert (daemon.ws / "made").read_text() == "ok\n"
        assert str(root / "d" / "state" / "sandbox") in r.stdout  # HOME from the daemon's state dir


def test_nexusctl_run_refuses_when_the_named_daemon_is_gone(daemon: Daemon) -> None:
    """Never a fallback to another policy: ``--socket S`` unreachable is one line and exit 126."""
    sock = daemon.root / "gone.sock"
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "nexusctl"),
            "--socket",
            str(sock),
            "run",
            "--cwd",
            str(daemon.ws),
            "--",
            "sh",
            "-c",
            "echo ran > ran",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == EXIT_REFUSED and not (daemon.ws / "ran").exists()
    assert r.stderr.count("\n") == 1 and "cannot be reached" in r.stderr and "Traceback" not in r.stderr


_SLOW_PROBE = """
import os, sys, time
import nexusd.sandbox.probe as pr
real = pr.probe
gate = sys.argv[1]
def slow(**kw):
    while not os.path.exists(gate):
        time.sleep(0.01)
    return real(**kw)
pr.probe = slow
from nexusd.cli.daemon_main import main
sys.argv = ["nexusd", "--socket", sys.argv[2], "--config-dir", sys.argv[3], "--state-dir", sys.argv[4]]
main()
"""


def test_a_shell_call_before_the_probe_has_answered_waits_for_it(real_probe) -> None:
    """Socket activation starts the daemon on the first hook: that first call must not be planned without
    a probe (it would be refused). The probe is held back by a file the test creates (a stand-in for a
    slow probe; the probe itself is the real one)."""
    import threading

    root = Path(tempfile.mkdtemp(prefix="nxpw", dir="/var/tmp"))
    try:
        for d in ("cfg", "run", "ws"):
            (root / d).mkdir(mode=0o700)
        (root / "cfg" / "policy.toml").write_text('[permissions]\nallow = ["Bash(ls)"]\n[sandbox]\nenabled = true\n')
        gate, sock = root / "probe-may-answer", root / "run" / "s.sock"
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        with open(root / "log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", _SLOW_PROBE, str(gate), str(sock), str(root / "cfg"), str(root / "state")],
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        try:
            while not sock.exists():
                assert proc.poll() is None, (root / "log").read_text()
                time.sleep(0.02)
            got: list[object] = []
            call = CallInfo(
                provider="claude",
                session="s",
                tool="Bash",
                cwd=str(root / "ws"),
                workspace=str(root / "ws"),
                input={"command": "ls"},
            )

            def ask() -> None:
                with Client(socket_path=str(sock), role="agent", name="t") as c:
                    got.append(c.request(call))

            t = threading.Thread(target=ask)
            t.start()
            t.join(0.5)
            assert t.is_alive() and not got  # waiting for the probe, not refused without one
            gate.touch()
            t.join(30)
            assert got, (root / "log").read_text()
            d = got[0]
            assert d.decision == "allow" and d.updated_input is not None, d  # type: ignore[attr-defined]
            text = str(d.updated_input["command"])  # type: ignore[attr-defined]
            assert wrapper_words(text) is not None and "refused" not in text
        finally:
            gate.touch()  # a probe still held back would keep the daemon from exiting
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_wrapper_refuses_once_the_deciding_daemon_is_gone(daemon: Daemon) -> None:
    text = daemon.wrapped("sh ./made.sh")
    (daemon.ws / "made.sh").write_text("echo ran > ran\n")
    assert daemon.agent_runs(text).returncode == 0 and (daemon.ws / "ran").exists()  # the control
    (daemon.ws / "ran").unlink()
    daemon.proc.send_signal(signal.SIGTERM)
    daemon.proc.wait(10)
    r = daemon.agent_runs(text)
    assert r.returncode == EXIT_REFUSED and not (daemon.ws / "ran").exists()
    assert r.stderr.count("\n") == 1 and "is not running" in r.stderr and "Traceback" not in r.stderr


# --------------------------------------------------------------------------- violations are reported


def _violations(daemon: Daemon) -> list[str]:
    from nexusd.protocol import Audit

    for _ in range(50):
        with Client(socket_path=str(daemon.socket), role="admin", name="t") as c:
            reply = c.call(Audit(limit=50))
        found = [r.reason for r in reply.records if r.event == "sandbox_violation"]
        if found:
            return found
        time.sleep(0.1)
    return []


def test_a_planted_hook_is_scrubbed_and_reported_to_the_deciding_daemon(daemon: Daemon) -> None:
    (daemon.ws / ".git").mkdir()
    (daemon.ws / "build.sh").write_text("mkdir -p .git/hooks\necho evil > .git/hooks/pre-commit\n")
    text = daemon.wrapped("sh build.sh")  # what a script does is not seen before it runs
    r = daemon.agent_runs(text, cwd=daemon.ws)
    assert not (daemon.ws / ".git" / "hooks" / "pre-commit").exists(), r.stderr
    found = _violations(daemon)
    assert found and "planted" in found[0] and ".git/hooks" in found[0], found


@pytest.mark.parametrize(
    "command",
    [
        "touch {target}",  # EROFS from coreutils
        "echo x > {target}",  # EROFS from the shell's own redirection
        'python3 -c \'open("{target}", "w")\'',  # Python's OSError spelling
        "mkdir {target}; exit 3",  # another tool, another exit status
    ],
)
def test_a_wrapped_agent_call_reports_a_refused_write(daemon: Daemon, command: str) -> None:
    """The agent's fast path taps its error output too: what the agent reads is unchanged (the same
    bytes, the same exit status), and the deciding daemon records the refusal under the agent's session."""
    target = daemon.root / "outside" / "x"
    text = daemon.wrapped(command.format(target=shlex.quote(str(target))))
    r = daemon.agent_runs(text, cwd=daemon.ws)
    assert r.returncode == (3 if "exit 3" in command else 1) and not target.exists()
    assert "Read-only file system" in r.stderr, r.stderr
    found = _violations(daemon)
    assert found and "write refused (read-only)" in found[0] and str(target) in found[0], found
    assert f"(exit {r.returncode})" in found[0]
    from nexusd.protocol import Audit

    with Client(socket_path=str(daemon.socket), role="admin", name="t") as c:
        reply = c.call(Audit(limit=50, session="s"))
    assert [x for x in reply.records if x.event == "sandbox_violation"], "recorded under the agent's session"


def test_a_run_that_nothing_refused_makes_no_tap_record_file(daemon: Daemon) -> None:
    """The tap's record (``tap.TAG.out``) is made by the first refusal-looking line, not for every run: a
    new file costs up to ~0.9 ms of kernel time in some directories, on every wrapped call. Watched with
    inotify while the real wrapper runs."""
    from inotify_simple import INotify
    from inotify_simple import flags as F

    target = daemon.root / "outside" / "y"
    for command, refused in (("echo fine >&2; ls >/dev/null", False), (f"touch {shlex.quote(str(target))}", True)):
        text = daemon.wrapped(command)
        words = wrapper_words(text)
        assert words is not None
        back = Path(words[4])
        ino = INotify()
        try:
            ino.add_watch(str(back.parent), F.CREATE)
            r = daemon.agent_runs(text, cwd=daemon.ws)
            made = {e.name for e in ino.read(timeout=0)}
        finally:
            ino.close()
        assert (r.returncode != 0) is refused, r.stderr
        assert (f"tap.{back.name.removeprefix('cd.')}.out" in made) is refused, (command, made)


def test_the_tap_passes_the_error_output_on_byte_for_byte(daemon: Daemon) -> None:
    """Partial lines, binary bytes, a long line and many refusal lines reach the agent unchanged; the
    record keeps at most 20 lines, each bounded."""
    script = (
        "printf 'prompt without newline: ' >&2; printf '\\377\\000bin\\n' >&2; "
        "head -c 200000 /dev/zero | tr '\\0' a >&2; echo >&2; "
        "for i in $(seq 1 60); do "
        "echo \"line $i: Permission denied $(head -c 3000 /dev/zero | tr '\\0' b)\" >&2; done; "
        "echo out"
    )
    (daemon.ws / "gen.sh").write_text(script)  # the gate asks for $(...) in a command line; a script is opaque
    bare = subprocess.run(["/bin/bash", "gen.sh"], capture_output=True, cwd=daemon.ws, timeout=60)
    text = daemon.wrapped("bash gen.sh")
    env = {k: v for k, v in os.environ.items() if k != "NEXUS_SOCKET"}
    r = subprocess.run(["/bin/bash", "-c", text], capture_output=True, cwd=daemon.ws, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == bare.stdout == b"out\n"
    assert r.stderr == bare.stderr and len(r.stderr) > 300_000
    found = _violations(daemon)
    assert found and "refused 20 operation(s)" in found[0], found[0][:300]
    assert len(found[0]) < 20 * 1100


def test_nexusctl_run_reports_a_refused_write(daemon: Daemon) -> None:
    from nexusd.sandbox.runner import run

    target = daemon.root / "outside" / "x"
    rc = run(
        f"touch {shlex.quote(str(target))}", cwd=str(daemon.ws), workspace=str(daemon.ws), socket=str(daemon.socket)
    )
    assert rc != 0 and not target.exists()
    found = _violations(daemon)
    assert found and "refused" in found[0], found


def test_an_ordinary_command_reports_nothing(daemon: Daemon) -> None:
    text = daemon.wrapped("ls -la")
    assert daemon.agent_runs(text, cwd=daemon.ws).returncode == 0
    from nexusd.sandbox.runner import run

    assert run("echo ok", cwd=str(daemon.ws), workspace=str(daemon.ws), socket=str(daemon.socket)) == 0
    from nexusd.protocol import Audit

    with Client(socket_path=str(daemon.socket), role="admin", name="t") as c:
        reply = c.call(Audit(limit=50))
    assert not [r for r in reply.records if r.event == "sandbox_violation"]
