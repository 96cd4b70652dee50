"""The real Claude Code CLI runs the command text the daemon hands back (``updatedInput``): the generated
wrapper, confined by bubblewrap, with the scrub after it (fake model server, real daemon, real hook)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import short_tmpdir
from tests.e2e.conftest import agent_clis  # noqa: F401  (the fixture: installs the pinned CLIs once)
from tests.e2e.fake_apis import ToolCall
from tests.e2e.test_agents import claude_run_args, run_cli, scenario


@pytest.mark.anyio
async def test_claude_runs_the_wrapped_call_confined(agent_clis: Any, daemon_factory: Any) -> None:  # noqa: F811
    root = short_tmpdir()
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    outside = Path(tempfile.mkdtemp(prefix="nxe2eo", dir="/var/tmp"))  # /tmp is private inside the sandbox
    daemon = daemon_factory(
        policy='# own-policy-marker\n[permissions]\nallow = ["Bash(sh attack.sh)"]\n[sandbox]\nenabled = true\n'
    )
    (project / "attack.sh").write_text(
        f"echo x > {outside}/pwned; cat {daemon.config_dir}/policy.toml; echo inside > made.txt; "
        "mkdir -p sub/.claude && echo '{}' > sub/.claude/settings.json; echo ran-inside\n"
    )
    api = scenario("claude", ToolCall("Bash", {"command": "sh attack.sh", "description": "run it"}))
    argv, env = claude_run_args(agent_clis, home, project, api, daemon, "hook")
    try:
        run = await run_cli(argv, env, project, api, daemon)
    finally:
        pwned = (outside / "pwned").exists()
        shutil.rmtree(outside, ignore_errors=True)
    told = run.told()
    assert "ran-inside" in told, run.explain()
    assert (project / "made.txt").read_text() == "inside\n"
    assert not pwned and "Read-only file system" in told
    assert "own-policy-marker" not in told  # the daemon's config is hidden
    assert not (project / "sub" / ".claude").exists() and "planted by the sandboxed command" in told
