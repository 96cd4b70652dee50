"""End to end: the real Claude Code (against the fake model API) runs one shell command that deletes one
file and edits another; the daemon took a checkpoint before allowing it, and ``nexusctl rewind`` (run by
this test, a person outside the agent's process tree) brings both files back as they were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import AgentCLIs
from tests.e2e.fake_apis import ToolCall
from tests.e2e.test_agents import claude_run_args, run_cli, scenario
from tests.e2e.test_agents import world as world  # the fixture, shared

pytestmark = pytest.mark.e2e

POLICY = """
[permissions]
allow = ["Bash(rm *)", "Bash(sed *)", "Read"]
"""


def ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.anyio
async def test_claude_shell_delete_and_edit_rewound(
    agent_clis: AgentCLIs, daemon_factory: Any, world: tuple[Path, Path]
) -> None:
    home, project = world
    daemon = daemon_factory(policy=POLICY)
    (project / "gone.txt").write_text("precious\n")
    (project / "keep.txt").write_text("one\ntwo\n")
    command = "rm gone.txt && sed -i s/two/TWO/ keep.txt"
    api = scenario("claude", ToolCall("Bash", {"command": command, "description": "clean up"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    run = await run_cli(argv, env, project, api, daemon)
    assert not (project / "gone.txt").exists(), run.explain()  # the call ran
    assert (project / "keep.txt").read_text() == "one\nTWO\n", run.explain()

    listing = ctl(daemon.env, "history", "--json")
    assert listing.returncode == 0, listing.stderr
    entries = [json.loads(line) for line in listing.stdout.splitlines()]
    bash = [e for e in entries if e["tool"] == "Bash"]
    assert len(bash) == 1, entries
    e = bash[0]
    assert e["provider"] == "claude" and e["summary"] == command and e["workspace"] == str(project.resolve())
    assert e.get("deleted") == 1 and e.get("changed") == 1, e

    show = ctl(daemon.env, "history", "show", str(e["id"]))
    assert "-precious" in show.stdout and "+TWO" in show.stdout, show.stdout

    back = ctl(daemon.env, "rewind", str(e["id"]))
    assert back.returncode == 0, back.stdout + back.stderr
    assert (project / "gone.txt").read_text() == "precious\n"
    assert (project / "keep.txt").read_text() == "one\ntwo\n"
    print(back.stdout)
