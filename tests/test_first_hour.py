"""A new user's first hour (issue 38): the README's commands from a fresh copy with a throwaway HOME.

The fresh-copy test copies the tracked files of this checkout (uncommitted edits included) to tmp_path, runs
``scripts/run-daemon`` there and checks that it says what it does, installs only what the daemon needs (no test
tools, no apt-get: a stub on PATH records any call), tells the person that an ask with no UI is denied at once,
and that an agent's ask is then denied with the command that fixes it. Then ``scripts/bootstrap`` (what
``scripts/test`` runs first) adds the test tools. pip talks to the package registry; pip's own cache is shared
with the user running the tests, so a second run does not download everything again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import short_tmpdir

ROOT = Path(__file__).resolve().parent.parent
TEST_TOOLS = ("pytest", "ruff", "mypy", "playwright", "hypothesis", "xdist")


def test_readme_says_an_ask_with_no_ui_is_denied_at_once() -> None:
    text = (ROOT / "README.md").read_text()
    assert "denied at once" in text and "nexus-tui" in text


def test_the_start_banner_says_it(daemon_factory) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory()
    deadline = time.monotonic() + 30
    while "asks need a UI" not in h.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    line = next(x for x in h.log.read_text().splitlines() if "asks need a UI" in x)
    note = json.loads(line)["note"]
    assert "denied at once" in note and "nexus-tui" in note, note


def _copy_checkout(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if not src.exists():  # deleted in the working tree, not yet committed
            continue
        target = dest / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


class _Lines:
    """A process's stderr, collected by a thread so a test can wait for a line with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._t.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in x for x in self.lines):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not seen within {timeout:.0f} s:\n" + "\n".join(self.lines))
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_fresh_copy_run_daemon_then_test_bootstrap(tmp_path: Path) -> None:
    clone = tmp_path / "nexusd"
    _copy_checkout(clone)
    home = tmp_path / "home"
    home.mkdir()
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    apt_log = tmp_path / "apt-get.called"
    for name in ("apt-get", "apt"):
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "$0 $*" >> {apt_log}\nexit 1\n')
        stub.chmod(0o755)
    run = short_tmpdir() / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "XDG_", "VIRTUAL_ENV", "PYTHON", "PIP_"))}
    env.update(
        HOME=str(home),
        PATH=f"{stubs}:{env.get('PATH', '/usr/bin:/bin')}",
        NEXUS_SOCKET=str(run / "nexusd.sock"),
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    proc = subprocess.Popen(
        ["scripts/run-daemon"],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = _Lines(proc)
    try:
        out.wait_for("run-daemon: creating .venv", 120)
        out.wait_for("run-daemon: installing nexusd and its runtime dependencies", 120)
        out.wait_for("asks need a UI", 1200)  # the daemon's banner: listening
        text = "\n".join(out.lines)
        assert "run-daemon: done in" in text
        assert "denied at once" in text and "nexus-tui" in text
        assert not apt_log.exists(), apt_log.read_text()
        venv_py = str(clone / ".venv" / "bin" / "python")
        found = subprocess.run(
            [
                venv_py,
                "-c",
                "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])",
                *TEST_TOOLS,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
        assert found == "[]", f"run-daemon installed test tools: {found}"
        # an agent's ask with no UI open: denied at once, and told what fixes it (a file write outside the
        # workspace: asked whatever the sandbox does, where a shell call would run sandboxed without asking)
        payload = {
            "session_id": "s",
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "cwd": str(clone),
            "tool_input": {"file_path": str(Path(env["HOME"]) / "notes.txt"), "content": "x"},
            "permission_mode": "default",
        }
        hook = subprocess.run(
            [str(clone / ".venv" / "bin" / "nexus-hook"), "claude"],
            input=json.dumps(payload),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        spec = json.loads(hook.stdout)["hookSpecificOutput"]
        assert spec["permissionDecision"] == "deny" and "nexus-tui" in spec["permissionDecisionReason"], spec
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    assert rc == 0, "\n".join(out.lines)

    # what scripts/test runs first: the test tools on top, said so
    boot = subprocess.run(
        ["scripts/bootstrap"], cwd=clone, env=env, capture_output=True, text=True, timeout=1500, check=False
    )
    assert boot.returncode == 0, boot.stderr
    assert "test tools" in boot.stderr, boot.stderr
    found = subprocess.run(
        [venv_py, "-c", "import pytest, ruff, mypy, hypothesis, xdist; print('ok')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert found.stdout.strip() == "ok", found.stderr
    # and a second run-daemon does not install anything again
    again = subprocess.run(
        ["scripts/run-daemon", "--version"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0 and "installing" not in again.stderr, again.stderr
