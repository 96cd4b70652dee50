"""learned.toml survives kill -9 at any instant of a write: the file is always the old or the new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import tomlkit

from nexusd.policy.learned import add_rules, remove_rule

WRITER = """
import sys
from pathlib import Path
from nexusd.policy.learned import add_rules
path = Path(sys.argv[1])
i = 0
print("ready", flush=True)
while True:
    add_rules(path, "allow", [f"Bash(make target{i})"])
    i += 1
"""


def test_kill_9_in_the_middle_of_writes_never_tears_the_file(tmp_path: Path):
    path = tmp_path / "learned.toml"
    add_rules(path, "deny", ["Bash(curl *)"])
    for round_ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.02 + 0.013 * round_)  # different instants of the write cycle
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        doc = tomlkit.parse(path.read_text())  # parses: never torn
        assert doc["permissions"]["deny"] == ["Bash(curl *)"]
        allows = list(doc["permissions"].get("allow", []))
        assert allows == [f"Bash(make target{i})" for i in range(len(allows))]
    leftovers = [p for p in tmp_path.iterdir() if p.name != "learned.toml"]
    # a temp file may be left behind by the kill; it is never the live file and never read
    assert all(p.name.startswith(".learned.toml.") for p in leftovers)


def test_add_is_idempotent_and_remove(tmp_path: Path):
    path = tmp_path / "l.toml"
    assert add_rules(path, "allow", ["Bash(a)", "Bash(a)", "Bash(b)"]) == ["Bash(a)", "Bash(b)"]
    assert add_rules(path, "allow", ["Bash(a)"]) == []
    assert remove_rule(path, "allow", "Bash(a)")
    assert not remove_rule(path, "allow", "Bash(a)")
    assert list(tomlkit.parse(path.read_text())["permissions"]["allow"]) == ["Bash(b)"]
