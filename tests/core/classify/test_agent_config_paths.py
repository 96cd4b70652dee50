"""Issue 17: every agent's own hook, plugin and permission files are protected like ``.claude``: Cursor's
``.cursor/hooks.json``, Copilot CLI's ``.github/hooks/*.json``, ``.github/copilot/settings*.json`` and
``~/.copilot``, OpenCode's ``opencode.json(c)``, ``.opencode/`` and ``~/.config/opencode`` (an agent
rewriting its own hook configuration is a known bypass). Several spellings each, through the real
classifier, for every agent's spelling of its write and shell tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexusd.core.classify import classify
from nexusd.core.classify.paths import is_protected
from nexusd.core.model import Context, Flag
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo

TARGETS = [
    ".cursor/hooks.json",
    ".Cursor/hooks.json",
    "~/.cursor/hooks.json",
    ".cursor/cli.json",
    ".github/hooks/nexusd.json",
    ".github/hooks/evil.json",
    ".GitHub/Hooks/x.json",
    "sub/repo/.github/hooks/a.json",
    ".github/copilot/settings.json",
    ".github/copilot/settings.local.json",
    ".github",
    "~/.copilot/hooks/x.json",
    "~/.copilot/settings.json",
    "~/.copilot/config.json",
    "opencode.json",
    "opencode.jsonc",
    "pkg/opencode.jsonc",
    ".opencode/plugins/x.js",
    ".opencode/plugin/x.ts",
    "~/.config/opencode/plugins/x.js",
    "~/.config/opencode/opencode.json",
]


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    home, ws = tmp_path / "home", tmp_path / "ws"
    (ws / ".github" / "workflows").mkdir(parents=True)
    home.mkdir()
    return home, ws


def classify_as(world: tuple[Path, Path], provider: str, tool: str, inp: dict) -> set[Flag]:
    home, ws = world
    ctx = Context(cwd=str(ws), workspace_roots=(str(ws),), home=str(home))
    return set(classify(CallInfo(provider, "s", tool, inp, str(ws)), ctx, DecisionFileSystem()).flags)


def absolute(world: tuple[Path, Path], target: str) -> str:
    home, ws = world
    return target.replace("~", str(home)) if target.startswith("~") else str(ws / target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("provider", "tool", "shape"),
    [
        ("cursor", "Shell", "shell"),
        ("copilot", "bash", "shell"),
        ("opencode", "bash", "shell"),
        ("acp", "Bash", "shell"),
        ("copilot", "create", "copilot"),
        ("opencode", "write", "opencode"),
        ("acp", "Write", "claude"),
        ("claude", "Write", "claude"),
    ],
)
def test_agent_config_writes_are_protected(world, target: str, provider: str, tool: str, shape: str) -> None:
    if shape == "shell":
        inp = {"command": f"cp /dev/null {target}" if target != ".github" else "mv staging .github"}
    elif shape == "copilot":
        inp = {"path": absolute(world, target), "file_text": "{}"}
    elif shape == "opencode":
        inp = {"filePath": absolute(world, target), "content": "{}"}
    else:
        inp = {"file_path": absolute(world, target), "content": "{}"}
    assert Flag.PROTECTED_PATH in classify_as(world, provider, tool, inp), (provider, tool, target)


@pytest.mark.parametrize(
    "target",
    [
        ".github/workflows/ci.yml",
        ".github/ISSUE_TEMPLATE/bug.md",
        "src/hooks/a.ts",
        "docs/copilot/notes.md",
        "opencode.md",
        "cursor/hooks.json",
    ],
)
def test_neighbours_stay_ordinary(world, target: str) -> None:
    assert Flag.PROTECTED_PATH not in classify_as(world, "copilot", "bash", {"command": f"cp /dev/null {target}"})


def test_the_list_is_one_place() -> None:
    class Ctx:
        home = "/home/u"
        protected_dirs: tuple[str, ...] = ()

    for path in ("/etc/github-copilot/policy.d/a.json", "/etc/cursor/hooks.json", "/p/.github/HOOKS/x"):
        assert is_protected(path, Ctx())  # type: ignore[arg-type]
    assert not is_protected("/p/.github/workflows/x.yml", Ctx())  # type: ignore[arg-type]
