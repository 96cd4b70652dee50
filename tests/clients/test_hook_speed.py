"""The per-call hook stays at interpreter speed (issue 37): what each installed hook command imports on a
real call is held to a budget, the launcher finds its packages in both install layouts, and ``nexusctl
doctor`` notices an installed hook that can no longer start.

Timing itself is the benchmark's (``nexusctl bench --scenario hook``, docs/PERFORMANCE.md): a timed test
would be a flaky test. What makes the time is the import set, and that is exact."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from nexus_clients import agent_settings

from nexusd.bench.hook import PROVIDERS, decision_of, stdin_for
from nexusd.cli.ctl import main as nexusctl
from tests.conftest import DaemonHandle

BENCH_POLICY = '[permissions]\nallow = ["Bash(echo *)"]\n'

# Modules the hook may import beyond what `python -I -S -c pass` already has: ours, and the few standard
# modules it needs (the C halves of json and socket). The hook-path modules quote their annotations instead
# of `from __future__ import annotations`, whose import alone was ~0.25 ms of every call.
OURS = re.compile(
    r"^(nexus_clients(\.(hook|leanjson|options|wire_lean|claude|gemini|codex|cursor|copilot|opencode))?"
    r"|nexusd(\.(client_errors|protocol_version|conversation|channel|linesocket|sockpath|leanos))?)$"
)
STDLIB_BUDGET = 2  # _json, _socket on CPython 3.11 (os and its helpers were 5 more, ~1.4 ms; __future__ one)
OURS_BUDGET = 17  # the hook, its wire and the adapter (Cursor, Copilot and OpenCode share one runner)
# What made the hook slow before (each costs 1-4 ms): never on the per-call path.
FORBIDDEN = {
    "typing", "re", "json", "enum", "pathlib", "socket", "selectors", "contextlib", "collections", "functools",
    "signal", "dataclasses", "urllib", "ipaddress", "fnmatch", "warnings", "site", "msgspec", "platformdirs",
    "os", "posixpath", "stat", "_collections_abc", "__future__",
}  # fmt: skip


def imported(argv: list[str], stdin: bytes | None, env: dict[str, str]) -> tuple[set[str], bytes, int]:
    """Module names a real run imported (``-X importtime``), its stdout and exit code."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], input=stdin, env=env, capture_output=True, timeout=60, check=False
    )
    names = set(re.findall(rb"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", proc.stderr, re.M))
    return {n.decode() for n in names}, proc.stdout, proc.returncode


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_installed_hook_answers_within_its_import_budget(daemon_factory, provider: str) -> None:  # type: ignore[no-untyped-def]
    handle: DaemonHandle = daemon_factory(policy=BENCH_POLICY)
    ws = handle.root / "workspace"
    ws.mkdir(exist_ok=True)
    floor, _, _ = imported([sys.executable, "-I", "-S", "-c", "pass"], None, handle.env)
    argv = agent_settings.hook_argv(provider)  # type: ignore[arg-type]
    assert argv[1] == "-IS" and argv[2].endswith("nexus-hook.py")
    names, out, code = imported(argv, stdin_for(str(ws), 1, provider=provider), handle.env)
    assert decision_of(provider, subprocess.CompletedProcess(argv, code, out, b"")) == "allow", out
    extra = names - floor
    assert not extra & FORBIDDEN, sorted(extra & FORBIDDEN)
    stdlib = sorted(n for n in extra if not OURS.match(n))
    assert len(stdlib) <= STDLIB_BUDGET, stdlib
    assert len(extra) - len(stdlib) <= OURS_BUDGET, sorted(extra)


def _install_like_pip(target: Path) -> None:
    """Both packages side by side in one directory, as a plain (non-editable) install lays them out."""
    for pkg in ("nexusd", "nexus_clients"):
        src = Path(__import__(pkg).__file__).parent  # type: ignore[arg-type]
        shutil.copytree(src, target / pkg, ignore=shutil.ignore_patterns("__pycache__"))


@pytest.mark.parametrize("layout", ["plain install", "checkout"])
def test_the_launcher_finds_its_packages_without_site(tmp_path: Path, layout: str) -> None:
    if layout == "plain install":
        root = tmp_path / "site-packages"
        _install_like_pip(root)
        launcher = root / "nexus_clients" / "nexus-hook.py"
    else:
        launcher = Path(agent_settings.__file__).with_name("nexus-hook.py")
    proc = subprocess.run(
        [sys.executable, "-IS", str(launcher), "claude", "--help"], capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and b"usage: nexus-hook" in proc.stdout, proc.stderr
    code = f"import runpy; print(runpy.run_path({str(launcher)!r})['_paths']({str(launcher)!r}))"
    probe = subprocess.run([sys.executable, "-IS", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    paths = eval(probe.stdout)
    for pkg in ("nexusd", "nexus_clients"):
        assert any((Path(p) / pkg / "__init__.py").is_file() for p in paths), (pkg, paths)
    if layout == "plain install":
        assert paths == [str(root)]  # nothing outside the install is put first on the path


def test_the_agents_environment_cannot_choose_what_the_hook_runs(tmp_path: Path) -> None:
    """-I: PYTHONPATH (a planted nexus_clients), PYTHONSTARTUP and PYTHONINSPECT from the agent are ignored."""
    planted = tmp_path / "nexus_clients"
    planted.mkdir()
    (planted / "__init__.py").write_text("import os; os.write(1, b'PLANTED'); os._exit(0)\n")
    (tmp_path / "startup.py").write_text("import os; os.write(1, b'STARTUP')\n")
    env = {"PYTHONPATH": str(tmp_path), "PYTHONSTARTUP": str(tmp_path / "startup.py"), "PYTHONINSPECT": "1"}
    env["NEXUS_SOCKET"] = str(tmp_path / "absent.sock")
    proc = subprocess.run(
        [*agent_settings.hook_argv("claude")],
        input=json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
                          "session_id": "s", "cwd": str(tmp_path)}).encode(),
        env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert b"PLANTED" not in proc.stdout and b"STARTUP" not in proc.stdout
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"  # no daemon: deny


def test_doctor_says_when_an_installed_hook_can_no_longer_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NEXUS_SOCKET", str(tmp_path / "absent.sock"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    runner = CliRunner()
    for agent in ("claude", "gemini", "opencode"):
        assert runner.invoke(nexusctl, ["install", agent, "--claude-version", "9.9.9"] if agent == "claude"
                             else ["install", agent]).exit_code == 0  # fmt: skip
    result = runner.invoke(nexusctl, ["doctor"])
    assert result.exit_code == 3, result.output  # hooks fine, daemon absent
    assert result.output.count(": ok (") == 3 and "not reachable" in result.output
    # the venv moves away: Gemini's settings now name an interpreter that is not there
    settings = home / ".gemini" / "settings.json"
    data = json.loads(settings.read_text())
    gone = str(tmp_path / "moved-venv" / "bin" / "python")
    data["hooks"]["BeforeTool"][0]["hooks"][0]["command"] = data["hooks"]["BeforeTool"][0]["hooks"][0][
        "command"
    ].replace(sys.executable, gone)
    settings.write_text(json.dumps(data))
    result = runner.invoke(nexusctl, ["doctor"])
    assert result.exit_code == 1
    assert "gemini: BROKEN" in result.output and "does not exist" in result.output
    assert "nexusctl install gemini" in result.output
    assert result.output.count(": ok (") == 2


def test_an_install_too_broken_to_import_the_hook_blocks(tmp_path: Path) -> None:
    """Exit 2 (a block in every agent), not a traceback's exit 1 (which Gemini CLI reads as "go ahead")."""
    root = tmp_path / "site-packages"
    _install_like_pip(root)
    (root / "nexus_clients" / "leanjson.py").write_text("raise ImportError('half an upgrade')\n")
    proc = subprocess.run(
        [sys.executable, "-IS", str(root / "nexus_clients" / "nexus-hook.py"), "gemini"],
        input=b"{}", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and b"nexus-hook cannot load" in proc.stderr and proc.stdout == b""
