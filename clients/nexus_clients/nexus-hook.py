"""The per-call hook's launcher: ``PYTHON -I -S …/nexus_clients/hook_main.py PROVIDER [options]``.

What the installers write into the agents' settings (``agent_settings.hook_command``). Skipping ``site``
(``-S``) saves most of an interpreter's start-up on a venv (every ``.pth`` file, an editable install's
finder), and ``-I`` keeps the agent's environment (``PYTHONPATH``, ``PYTHONSTARTUP``, user site) from
choosing what the hook runs. Without ``site`` nothing puts our packages on ``sys.path``, so this file does,
from where it lies: the directory holding ``nexus_clients`` (site-packages, or a checkout's ``clients/``),
the checkout's root when ``nexusd`` lives there (an editable install), and the interpreter's
site-packages last, for the rare lazy import of a dependency (platformdirs without ``XDG_RUNTIME_DIR``).
An install too broken to import the hook exits 2, which every agent reads as a block (a traceback's
exit 1 would let Gemini CLI run the call).
"""

import sys

try:  # the built-in behind os, already loaded: ``import os`` would cost every tool call ~1.4 ms
    import posix as _os
except ImportError:  # pragma: no cover - not POSIX
    import os as _os  # type: ignore[no-redef]


def _parent(path: str) -> str:
    return path.rstrip("/").rpartition("/")[0] or "/"


def _exists(path: str) -> bool:
    try:
        _os.stat(path)
    except OSError:
        return False
    return True


def _paths(here: str) -> list[str]:
    here = here if here.startswith("/") else f"{_os.getcwd()}/{here}"
    package_parent = _parent(_parent(here))
    paths = [package_parent]
    checkout = _parent(package_parent)
    if not _exists(f"{package_parent}/nexusd/__init__.py") and _exists(f"{checkout}/nexusd/__init__.py"):
        paths.append(checkout)
    return paths


def _site_packages() -> str:
    return f"{sys.prefix}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


if __name__ == "__main__":
    sys.path[:0] = _paths(__file__)
    sys.path.append(_site_packages())
    try:
        from nexus_clients.hook import main
    except BaseException as exc:  # a broken or half-removed install: exit 2 is a block in every agent
        _os.write(2, f"nexusd denied this tool call: nexus-hook cannot load ({type(exc).__name__}: {exc})\n".encode())
        _os._exit(2)
    main()
