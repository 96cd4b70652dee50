"""The escape corpus and the must-work set, with real bubblewrap (and the unshare fallback).

These run as root in CI. Root inside bwrap keeps no capabilities (--cap-drop ALL) and sits in its own
user namespace, so every failure below comes from the mount layout (read-only binds, masks), not from
file permissions; a subset also runs as ``nobody`` to show the same holds unprivileged.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.sandbox.conftest import World

MAC = sys.platform == "darwin"  # scripts/sandbox-corpus on a Mac: the same corpus against Seatbelt
BACKENDS = ["seatbelt"] if MAC else ["bwrap", "unshare"]
READ_ONLY = "Operation not permitted" if MAC else "Read-only file system"  # EPERM from Seatbelt, EROFS here
linux_only = pytest.mark.skipif(MAC, reason="Seatbelt has no pid namespace or capabilities to check")
# The base interpreter, not the venv's symlink: the sandbox's /tmp is fresh, so a checkout (and its
# .venv) under /tmp is invisible inside it. Escape probes print RAN first, so a probe that could not
# even start can never pass for a blocked escape.
PY = getattr(sys, "_base_executable", sys.executable)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --------------------------------------------------------------------------- must fail


def test_write_outside_the_workspace_fails(world: World, backend: str) -> None:
    target = world.outside / "pwned"
    r = world.run(f"echo x > {target}; touch /etc/nexus-pwned; echo rc=$?", backend=backend)
    assert not target.exists()
    assert not Path("/etc/nexus-pwned").exists()
    assert READ_ONLY in r.err  # refused by the mount (the profile), not by permissions


def test_write_through_a_symlink_pointing_outside_fails(world: World, backend: str) -> None:
    (world.ws / "planted-link").symlink_to(world.outside / "via-old-link")
    r = world.run("ln -s ../outside/via-new-link new-link; echo a > new-link; echo b > planted-link", backend=backend)
    assert not (world.outside / "via-new-link").exists()
    assert not (world.outside / "via-old-link").exists()
    assert r.rc != 0


def test_git_hooks_and_config_are_read_only(world: World, backend: str) -> None:
    hooks = world.ws / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (world.ws / ".git" / "config").write_text("[core]\n")
    r = world.run(
        "echo evil > .git/hooks/pre-commit; echo '[core] fsmonitor=evil' >> .git/config; "
        "rm -rf .git/hooks; mv .git/config .git/c2",
        backend=backend,
    )
    assert not (hooks / "pre-commit").exists()
    assert (world.ws / ".git" / "config").read_text() == "[core]\n"
    assert hooks.is_dir()
    assert r.rc != 0


def test_missing_git_hooks_planted_are_scrubbed(world: World) -> None:
    (world.ws / ".git").mkdir()
    r = world.run("mkdir -p .git/hooks && echo evil > .git/hooks/post-checkout && echo '[core]' > .git/config")
    assert r.rc == 0
    assert not (world.ws / ".git" / "hooks").exists()
    assert not (world.ws / ".git" / "config").exists()
    assert "planted by the sandboxed command" in r.err


def test_shell_rc_is_protected_even_inside_allow_write(world: World, backend: str) -> None:
    world.sandbox = {"filesystem": {"allow_write": ["~/"]}}
    r = world.run(
        f"echo evil >> {world.home}/.bashrc; echo ok > {world.home}/notes.txt; "
        f"echo evil > {world.home}/.zshrc; mkdir -p {world.home}/.claude && echo x > {world.home}/.claude/s",
        backend=backend,
    )
    assert (world.home / ".bashrc").read_text() == "# real rc\n"
    assert (world.home / "notes.txt").read_text() == "ok\n"  # allow_write itself works
    assert not (world.home / ".zshrc").exists()  # planted, then scrubbed
    assert not (world.home / ".claude").exists()
    assert r.rc == 0 or "Read-only" in r.err


def test_deny_read_file_and_directory_are_masked(world: World, backend: str) -> None:
    (world.outside / "secret.txt").write_text("TOPSECRET")
    (world.outside / "keys").mkdir()
    (world.outside / "keys" / "id").write_text("TOPSECRET")
    (world.ws / ".env").write_text("TOPSECRET")
    world.sandbox = {"filesystem": {"deny_read": [f"{world.outside}/secret.txt", f"{world.outside}/keys"]}}
    world.deny_read = [str(world.ws / ".env")]  # a Read deny rule of the permission policy joins in
    r = world.run(
        f"cat {world.outside}/secret.txt; cat {world.outside}/keys/id; ls -a {world.outside}/keys; cat .env",
        backend=backend,
    )
    assert "TOPSECRET" not in r.out
    assert (world.ws / ".env").read_text() == "TOPSECRET"


def test_allow_read_reopens_inside_a_masked_directory(world: World) -> None:
    (world.outside / "keys").mkdir()
    (world.outside / "keys" / "id").write_text("TOPSECRET")
    (world.outside / "keys" / "pub").write_text("PUBLIC")
    fs = {"deny_read": [f"{world.outside}/keys"], "allow_read": [f"{world.outside}/keys/pub"]}
    world.sandbox = {"filesystem": fs}
    r = world.run(f"cat {world.outside}/keys/id; cat {world.outside}/keys/pub")
    assert "TOPSECRET" not in r.out and "PUBLIC" in r.out


def test_deny_write_inside_the_workspace(world: World, backend: str) -> None:
    (world.ws / "vendor").mkdir()
    (world.ws / "vendor" / "lib.py").write_text("orig")
    world.sandbox = {"filesystem": {"deny_write": [f"{world.ws}/vendor"]}}
    world.deny_write = [str(world.ws / "Makefile")]
    (world.ws / "Makefile").write_text("orig")
    world.run("echo x > vendor/lib.py; echo x > Makefile; echo ok > src.txt", backend=backend)
    assert (world.ws / "vendor" / "lib.py").read_text() == "orig"
    assert (world.ws / "Makefile").read_text() == "orig"
    assert (world.ws / "src.txt").read_text() == "ok\n"


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


def _connect_cmd(port: int) -> str:
    return (
        f"{PY} -c \"import socket; print('RAN', flush=True); "
        f"s=socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\""
    )


def test_network_isolation_blocks_loopback(world: World, backend: str) -> None:
    lst = _Listener()
    try:
        r = world.run(_connect_cmd(lst.port), backend=backend)
        assert "RAN" in r.out, r.err
        assert "CONNECTED" not in r.out and r.rc != 0 and lst.hits == 0
        world.sandbox = {"network_isolation": False}  # the same test can fail: with the network shared it connects
        r = world.run(_connect_cmd(lst.port), backend=backend)
        assert "CONNECTED" in r.out
    finally:
        lst.sock.close()


def test_daemon_dirs_are_hidden(world: World, backend: str) -> None:
    srv = socket.socket(socket.AF_UNIX)
    sock_path = world.root / "run" / "nexusd.sock"
    srv.bind(str(sock_path))
    srv.listen(1)
    try:
        cmd = (
            f"cat {world.root}/cfg/policy.toml; ls -a {world.root}/state; "
            f"{PY} -c \"import socket; print('RAN', flush=True); s=socket.socket(socket.AF_UNIX); "
            f"s.connect('{sock_path}'); print('CONNECTED')\""
        )
        r = world.run(cmd, backend=backend)
        assert "RAN" in r.out, r.err
        assert "secret-policy-marker" not in r.out
        assert "CONNECTED" not in r.out
    finally:
        srv.close()


def test_bare_repo_planting_does_not_survive(world: World, backend: str) -> None:
    (world.ws / "config").write_text("legit")
    r = world.run(
        "mkdir -p objects refs/heads hooks && echo 'ref: refs/heads/main' > HEAD && "
        "echo '[core] fsmonitor = touch /tmp/x' >> config; echo done",
        backend=backend,
    )
    assert "done" in r.out
    for name in ("HEAD", "objects", "refs", "hooks"):
        assert not (world.ws / name).exists(), name
    assert (world.ws / "config").read_text() == "legit"  # existing: bound read-only


@linux_only
def test_host_processes_are_invisible(world: World, backend: str) -> None:
    host = subprocess.Popen(["sleep", "60"])  # a host process
    try:
        r = world.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'", backend=backend)
        assert "sleep 60" not in r.out
        count = int(r.out.strip().splitlines()[-1])
        assert count < 10  # only the sandbox's own few processes
        assert str(host.pid) not in r.out.split()
    finally:
        host.kill()
        host.wait()


@linux_only
def test_root_in_the_sandbox_cannot_undo_the_mounts(world: World, backend: str) -> None:
    (world.outside / "keys").mkdir()
    (world.outside / "keys" / "id").write_text("TOPSECRET")
    world.sandbox = {"filesystem": {"deny_read": [f"{world.outside}/keys"]}}
    r = world.run(
        f"umount {world.outside}/keys; mount -o remount,rw /; unshare -Urm umount {world.outside}/keys; "
        f"cat {world.outside}/keys/id; touch /etc/nexus-pwned; grep CapEff /proc/self/status",
        backend=backend,
    )
    assert "TOPSECRET" not in r.out
    assert not Path("/etc/nexus-pwned").exists()
    assert "CapEff:\t0000000000000000" in r.out


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to switch to nobody")
def test_corpus_as_nobody(world: World) -> None:
    os.chmod(world.root, 0o755)
    for d in ("ws", "outside", "state"):
        os.chown(world.root / d, 65534, 65534)
    os.chmod(world.root / "outside", 0o777)  # permissions would allow it: only the sandbox refuses
    world.run("true")  # creates the per-workspace sandbox dirs and wrapper (as root): hand them to nobody too
    subprocess.run(["chown", "-R", "65534:65534", str(world.root / "state")], check=True)
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    r = world.run(f"id -u; echo x > {world.outside}/pwned; echo ok > made.txt", prefix=nobody)
    assert r.out.splitlines()[:1] == ["65534"], r.err
    assert not (world.outside / "pwned").exists()
    assert (world.ws / "made.txt").read_text() == "ok\n"


# --------------------------------------------------------------------------- must work


def test_build_and_test_commands_work(world: World, backend: str) -> None:
    (world.ws / "test_x.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    r = world.run(
        f"{PY} -c \"open('built.txt','w').write('ok')\" && "
        f"{PY} -c 'import json, sqlite3, ssl; print(\"toolchain\")' && "
        "mkdir -p build/out && cp built.txt build/out/",
        backend=backend,
    )
    assert r.rc == 0, r.err
    assert (world.ws / "built.txt").read_text() == "ok"
    assert (world.ws / "build" / "out" / "built.txt").exists()
    assert "toolchain" in r.out


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_works(world: World) -> None:
    (world.ws / "Makefile").write_text("all:\n\techo built > artefact\n")
    r = world.run("make")
    assert r.rc == 0, r.err
    assert (world.ws / "artefact").read_text() == "built\n"


def test_tmpdir_and_home_are_per_workspace_and_writable(world: World, backend: str) -> None:
    # a name no other process on the host uses: the check is that the sandbox's /tmp is private, not that
    # nobody else on a shared machine ever wrote /tmp/scratch
    scratch = f"/tmp/nexus-scratch-{uuid.uuid4().hex}"
    r = world.run(
        'f=$(mktemp) && echo t > "$f" && cat "$f" && echo h > "$HOME/h" && echo $HOME && echo $TMPDIR '
        f"&& echo x > {scratch} && cat {scratch}",
        backend=backend,
    )
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "t" and lines[-1] == "x"
    assert str(world.root / "state" / "sandbox") in lines[1]
    assert Path(lines[1], "h").read_text() == "h\n"  # persisted for the workspace
    assert not Path(scratch).exists()


def test_exit_code_and_output_pass_through(world: World, backend: str) -> None:
    r = world.run("echo out; echo err >&2; exit 7", backend=backend)
    first, *rest = r.err.strip().split("\n")
    assert (r.rc, r.out, first) == (7, "out\n", "err")
    if world.via == "wrapper":  # the agent is told the sandbox may be why, and how to ask to run it outside
        assert len(rest) == 1 and "exited with status 7" in rest[0] and '"dangerouslyDisableSandbox": true' in rest[0]
    else:
        assert rest == []
    ok = world.run("echo out; echo err >&2", backend=backend)
    assert (ok.rc, ok.err) == (0, "err\n")  # nothing is added to a success
    assert world.run("kill -TERM $$", backend=backend).rc == 143


def test_control_the_same_escape_succeeds_unsandboxed(world: World) -> None:
    """The corpus can fail: with no sandbox (and a policy that allows running without one) it escapes."""
    world.sandbox = {"fail_if_unavailable": False}
    world.probe = world.probe.__class__(platform="linux", available=False, reason="forced off")
    r = world.run(f"echo x > {world.outside}/pwned")
    assert r.rc == 0 and (world.outside / "pwned").exists()
    # nexusctl run warns; an agent's call is simply not rewritten (the policy allows running it as is)
    assert "UNSANDBOXED" in r.err or world.via == "wrapper"


def test_unavailable_sandbox_refuses_by_default(world: World) -> None:
    world.probe = world.probe.__class__(platform="linux", available=False, reason="bwrap not found")
    r = world.run(f"echo x > {world.outside}/pwned")
    assert r.rc == 126 and not (world.outside / "pwned").exists()
    assert "no sandbox is available (bwrap not found)" in r.err


@pytest.mark.parametrize("kind", ["none", "missing", "regular", "symlink", "one"])
def test_a_plans_proxy_fifos_that_are_not_fifos_mean_no_network(tmp_path: Path, kind: str) -> None:
    """``proxy_info``/``proxy_go`` as a runner receives them: absent, gone, a regular file, a symlink to a
    FIFO, or only one of the two. Each gives bubblewrap /dev/null twice (it starts at once, with no
    network), says so, and never hands over what it names; real FIFOs are passed above descriptor 9."""
    import io
    import stat

    from nexusd.protocol import SandboxPlanReply
    from nexusd.sandbox.runner import port_fds

    info, go = tmp_path / "net.t.info", tmp_path / "net.t.go"
    os.mkfifo(tmp_path / "real.go")
    if kind == "regular":
        info.write_text("")
        go.write_text("")
    elif kind == "symlink":
        os.mkfifo(tmp_path / "real.info")
        info.symlink_to(tmp_path / "real.info")
        go.symlink_to(tmp_path / "real.go")
    elif kind == "one":
        os.mkfifo(info)
    plan = SandboxPlanReply(allowed=True, proxy_info=None if kind == "none" else str(info))
    if kind != "none" and kind != "one":
        plan = SandboxPlanReply(allowed=True, proxy_info=str(info), proxy_go=str(go))
    err = io.StringIO()
    fds = port_fds(plan, err)
    try:
        assert "no network" in err.getvalue()
        assert all(fd > 9 and stat.S_ISCHR(os.fstat(fd).st_mode) for fd in fds)  # /dev/null, twice
    finally:
        for fd in fds:
            os.close(fd)
    # and the real thing: two FIFOs, the go one held by a writer (as the daemon holds it)
    os.mkfifo(tmp_path / "ok.info")
    os.mkfifo(tmp_path / "ok.go")
    holder = os.open(tmp_path / "ok.go", os.O_RDWR)
    err = io.StringIO()
    fds = port_fds(
        SandboxPlanReply(allowed=True, proxy_info=str(tmp_path / "ok.info"), proxy_go=str(tmp_path / "ok.go")), err
    )
    try:
        assert err.getvalue() == "" and all(fd > 9 and stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in fds)
    finally:
        for fd in (*fds, holder):
            os.close(fd)
