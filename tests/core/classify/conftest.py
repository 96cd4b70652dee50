"""A real temporary workspace (with .git, a symlink escaping it) classified through the real file system."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexusd.core.classify import classify
from nexusd.core.model import Classification, Context
from nexusd.policy.filesystem import RealFileSystem
from nexusd.protocol import CallInfo


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ws = str(root / "ws")
        self.home = str(root / "home")
        self.outside = str(root / "outside")
        for d in (self.ws, self.home, self.outside, f"{self.ws}/src", f"{self.ws}/.git", f"{self.home}/.ssh"):
            os.makedirs(d, exist_ok=True)
        Path(self.ws, ".git", "config").write_text("[core]\n\tbare = false\n")
        Path(self.ws, "README.md").write_text("# hi\n")
        Path(self.ws, "src", "main.py").write_text("print(1)\n")
        Path(self.outside, "secret.txt").write_text("s\n")
        os.symlink(self.outside, f"{self.ws}/escape")
        os.symlink(f"{self.outside}/secret.txt", f"{self.ws}/secret_link")
        os.symlink("src", f"{self.ws}/inner_link")
        self.ctx = Context(cwd=self.ws, workspace_roots=(self.ws,), home=self.home)
        self.fs = RealFileSystem()

    def call(self, tool: str, provider: str = "claude", cwd: str | None = None, **inp: object) -> Classification:
        return classify(
            CallInfo(provider=provider, session="s", tool=tool, input=dict(inp), cwd=cwd or self.ws), self.ctx, self.fs
        )

    def bash(self, command: str, **kw: object) -> Classification:
        return self.call("Bash", command=command, **kw)

    def sub(self, text: str) -> str:
        return text.replace("{ws}", self.ws).replace("{home}", self.home).replace("{out}", self.outside)


@pytest.fixture(scope="session")
def world() -> Iterator[World]:
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="nxcls")))
    yield World(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def bash(world: World) -> Callable[[str], Classification]:
    return world.bash
