"""The repository's systemd/ and launchd/ files are exactly what the code renders."""

from __future__ import annotations

from pathlib import Path

from nexusd.service.render import repo_files

ROOT = Path(__file__).resolve().parents[2]


def test_repository_copies_are_current() -> None:
    for path, text in repo_files(ROOT).items():
        assert path.read_text() == text, f"{path} is stale: run python -m nexusd.service.render {ROOT}"
