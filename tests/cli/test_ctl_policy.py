"""nexusctl policy validate (no daemon), rules and trust (through a real daemon)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from nexusd.cli.ctl import main


def test_validate_file_ok(tmp_path: Path):
    f = tmp_path / "policy.toml"
    f.write_text("[permissions]\nallow = ['Bash(git status)', 'Bash(python *)', 'Bash(git *)']\n")
    r = CliRunner().invoke(main, ["policy", "validate", str(f)])
    assert r.exit_code == 0, r.output
    assert "ok: 3 rule(s)" in r.stdout
    assert "'Bash(git *)' is very broad" in r.stderr
    # an interpreter-wide rule says plainly that it allows nothing by itself, and what to write instead
    assert "'Bash(python *)' is set aside in every mode" in r.stderr and "exact commands" in r.stderr


def test_validate_file_errors(tmp_path: Path):
    f = tmp_path / "policy.toml"
    f.write_text("[permissions]\ndeny = [\n  'Bash(ls',\n]\nbogus = 1\n")
    r = CliRunner().invoke(main, ["policy", "validate", str(f)])
    assert r.exit_code == 1
    assert f"{f}:3" in r.stderr and f"{f}:5" in r.stderr


def test_validate_all_layers_without_a_daemon(tmp_path: Path):
    cfg, state, managed = tmp_path / "c", tmp_path / "s", tmp_path / "m"
    for d in (cfg, state, managed):
        d.mkdir()
    (cfg / "policy.toml").write_text("[permissions]\ndeny = ['Bash(curl *)']\n")
    env = {"NEXUS_CONFIG_DIR": str(cfg), "NEXUS_STATE_DIR": str(state), "NEXUS_MANAGED_DIR": str(managed)}
    argv = [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", "policy", "validate", "-w", str(tmp_path)]
    out = subprocess.run(argv, env={**__import__("os").environ, **env}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "user" in out.stdout and "ok: 1 rule(s)" in out.stdout


def test_rules_and_trust_through_the_daemon(daemon, tmp_path: Path):
    run = CliRunner()
    base = ["--socket", str(daemon.socket)]
    r = run.invoke(main, [*base, "rules", "add", "deny", "Bash(curl *)"])
    assert r.exit_code == 0, r.output
    r = run.invoke(main, [*base, "rules", "list"])
    assert "deny  Bash(curl *)  [learned]" in r.stdout
    r = run.invoke(main, [*base, "rules", "add", "allow", "Bash(python *)"])
    assert r.exit_code == 1 and "blanket" in r.stderr
    r = run.invoke(main, [*base, "rules", "remove", "deny", "Bash(curl *)"])
    assert r.exit_code == 0
    assert "Bash(curl *)" not in run.invoke(main, [*base, "rules", "list"]).stdout
    ws = tmp_path / "proj"
    ws.mkdir()
    assert run.invoke(main, [*base, "trust", "add", str(ws)]).exit_code == 0
    assert str(ws.resolve()) in run.invoke(main, [*base, "trust", "list"]).stdout
    assert run.invoke(main, [*base, "trust", "remove", str(ws)]).exit_code == 0
    assert str(ws.resolve()) not in run.invoke(main, [*base, "trust", "list"]).stdout


def test_first_hour_rough_edges(daemon, tmp_path: Path):
    """Bare `rules` lists, `rules remove RULE` finds the kind, help is not cut mid-sentence, an empty trust
    list says so (issue "first hour")."""
    run = CliRunner()
    base = ["--socket", str(daemon.socket)]
    r = run.invoke(main, [*base, "rules"])
    assert r.exit_code == 0 and "no rules" in r.stdout
    assert run.invoke(main, [*base, "rules", "add", "allow", "Bash(npm run test *)"]).exit_code == 0
    assert "Bash(npm run test *)" in run.invoke(main, [*base, "rules", "--json"]).stdout
    r = run.invoke(main, [*base, "rules", "remove", "Bash(npm run test *)"])
    assert r.exit_code == 0 and "removed allow" in r.stdout
    r = run.invoke(main, [*base, "rules", "remove", "Bash(never learned)"])
    assert r.exit_code == 1 and "not a learned rule" in r.stderr
    assert run.invoke(main, [*base, "rules", "add", "deny", "Bash(x)"]).exit_code == 0
    assert run.invoke(main, [*base, "rules", "add", "ask", "Bash(x)"]).exit_code == 0
    r = run.invoke(main, [*base, "rules", "remove", "Bash(x)"])
    assert r.exit_code == 1 and "name the kind" in r.stderr
    assert run.invoke(main, [*base, "rules", "remove", "ask", "Bash(x)"]).exit_code == 0
    helptext = run.invoke(main, ["rules", "--help"]).stdout
    assert "Add RULE as KIND (allow, ask, deny) to learned.toml." in helptext and "(e.g." not in helptext
    r = run.invoke(main, [*base, "trust", "list"])
    assert r.exit_code == 0 and "no trusted workspaces" in r.stdout
