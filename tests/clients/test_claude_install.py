"""``nexusctl install claude``: PreToolUse and PermissionRequest, and ``onFailure: "block"`` only where the
installed Claude Code knows it (2.1.295+). The real CLI's behaviour is in tests/e2e."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from nexus_clients import agent_settings as s

from nexusd.cli.ctl import main as nexusctl


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[dict, str]:
    monkeypatch.setenv("HOME", str(tmp_path))
    r = CliRunner().invoke(nexusctl, ["install", "claude", *args])
    assert r.exit_code == 0, r.output
    return json.loads((tmp_path / ".claude" / "settings.json").read_text()), r.output


@pytest.mark.parametrize(
    ("version", "block"),
    [("2.1.295", True), ("2.1.330", True), ("3.0.0", True), ("2.1.294", False), ("2.0.999", False)],
)
def test_on_failure_only_where_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, block: bool
) -> None:
    settings, output = install(tmp_path, monkeypatch, "--claude-version", version)
    for event in ("PreToolUse", "PermissionRequest"):
        hook = settings["hooks"][event][0]["hooks"][0]
        assert "nexus-hook" in hook["command"] and hook["timeout"] == 60
        assert hook.get("onFailure") == ("block" if block else None)
    assert ("lets the call through" in output) is not block


def write_fake_claude(bin_dir: Path, text: str, code: int = 0) -> None:
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "claude"
    exe.write_text(f"#!/bin/sh\necho '{text}'\nexit {code}\n")
    exe.chmod(0o755)


@pytest.mark.parametrize(
    ("text", "code", "expected"),
    [("2.1.330 (Claude Code)", 0, (2, 1, 330)), ("Claude Code", 0, None), ("2.1.330", 1, None)],
)
def test_version_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, code: int, expected) -> None:
    write_fake_claude(tmp_path / "bin", text, code)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert s.claude_version() == expected


def test_no_claude_on_path_means_no_on_failure_and_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    settings, output = install(tmp_path, monkeypatch)
    assert "onFailure" not in settings["hooks"]["PreToolUse"][0]["hooks"][0]
    assert "not found" in output


def test_bad_version_option_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    r = CliRunner().invoke(nexusctl, ["install", "claude", "--claude-version", "latest"])
    assert r.exit_code != 0 and not (tmp_path / ".claude").exists()


def test_round_trip_with_both_events_is_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = '{\n    "model": "opus",\n    "hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": []}]}\n}\n'
    path.write_text(original)
    install(tmp_path, monkeypatch, "--claude-version", "2.1.330")
    r = CliRunner().invoke(nexusctl, ["uninstall", "claude"])
    assert r.exit_code == 0 and path.read_text() == original
