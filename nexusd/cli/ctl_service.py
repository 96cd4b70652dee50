"""nexusctl commands (filled by their owning issue)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Attach this module's commands to nexusctl."""
