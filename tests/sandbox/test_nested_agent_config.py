"""Issue 17 in the sandbox (real bubblewrap): Copilot CLI's ``.github/hooks`` and ``.github/copilot``, Cursor's
``.cursor`` and OpenCode's ``opencode.json`` / ``.opencode`` are read-only at any depth when they exist, and
scrubbed after the command when it plants them; ``.github/workflows`` stays writable."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.test_nested import found, run  # noqa: F401 (fixture)

EXISTING = (
    "pkg/.github/hooks/nexusd.json",
    ".github/copilot/settings.json",
    "pkg/.cursor/hooks.json",
    "lib/opencode.json",
    "lib/.opencode/plugins/x.js",
    ".github/hooks/a.json",
)


@pytest.fixture
def world() -> Iterator[tuple[Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix="nxag", dir="/var/tmp"))
    ws = root / "ws"
    for rel in EXISTING:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("{}")
    (ws / ".github" / "workflows").mkdir(parents=True)
    (root / "cfg").mkdir()
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    yield root, ws
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("target", EXISTING)
def test_existing_agent_config_is_read_only(world, found, target):  # noqa: F811
    root, ws = world
    run(root, ws, found, f"echo 'evil' > {target}; true")
    assert (ws / target).read_text() == "{}"


@pytest.mark.parametrize(
    "planted",
    ["new/.github/hooks/evil.json", "new/.github/copilot/settings.json", "x/.cursor/hooks.json", "y/opencode.jsonc"],
)
def test_planted_agent_config_is_scrubbed(world, found, planted):  # noqa: F811
    root, ws = world
    err = run(root, ws, found, f"mkdir -p {os.path.dirname(planted)} && echo '{{}}' > {planted}")
    assert not (ws / planted).exists(), err


def test_workflows_stay_writable(world, found):  # noqa: F811
    root, ws = world
    run(root, ws, found, "echo ok > .github/workflows/ci.yml")
    assert (ws / ".github/workflows/ci.yml").read_text() == "ok\n"
