"""The sandbox: capability probe, bubblewrap plans, and the runner behind ``nexusctl run``."""

from __future__ import annotations

import functools
import sys
from pathlib import Path


def base_python() -> str:
    """The interpreter the sandbox's standard-library helpers run on (the joiner, the Unix-socket
    supervisor): the base one, never a virtualenv's, which may lie under ``/tmp`` (replaced inside the
    sandbox) or in the workspace (the command may change it)."""
    return getattr(sys, "_base_executable", None) or sys.executable


@functools.cache
def helper_source(module: str) -> str:
    """A helper module's source (``nexusd.sandbox.<module>``), read once: it runs as ``-c`` text, so nothing
    is read from the checkout when it starts."""
    import importlib

    file = importlib.import_module(f"nexusd.sandbox.{module}").__file__
    assert file is not None
    return Path(file).read_text(encoding="utf-8")


def helper_argv(module: str) -> list[str]:
    """``python -I -S -c SOURCE``: the base interpreter without ``site`` or the environment's say."""
    return [base_python(), "-I", "-S", "-c", helper_source(module)]
