"""The few ``os`` calls the per-call hook makes, on the built-in ``posix`` module.

``python -I -S`` has not imported ``os``; importing it (with ``stat``, ``posixpath``, ``genericpath`` and
``_collections_abc``) costs a hook run ~1.4 ms, over a quarter of its 5 ms budget above a bare
interpreter (issue 37). ``posix`` is built in and already loaded by the import system. Each function
here behaves as its ``os``/``os.path`` namesake for str paths on POSIX (``tests/clients/test_leanos.py``
holds them equal); anything else the hook needs on a rare path imports ``os`` there.
"""

import sys

TYPE_CHECKING = False  # typing costs the hook ~2 ms; mypy reads this name as typing's
if TYPE_CHECKING:
    import os as _posix
else:
    try:
        import posix as _posix
    except ImportError:  # pragma: no cover - not POSIX: plain os, whatever it costs
        import os as _posix

getcwd = _posix.getcwd
getppid = _posix.getppid
readlink = _posix.readlink
write = _posix.write
_exit = _posix._exit

_normpath = getattr(_posix, "_path_normpath", None)  # CPython 3.11+: os.path.normpath's C core


def environ() -> dict[str, str]:
    """The environment as ``os.environ`` holds it, copied. Once ``os`` is loaded its ``environ`` is the
    truth (a process may have changed it; ``posix.environ`` is the snapshot taken at start)."""
    os_module = sys.modules.get("os")
    if os_module is not None:
        return dict(os_module.environ)
    enc, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    return {_text(k, enc, errors): _text(v, enc, errors) for k, v in _posix.environ.items()}


def getenv(name: str) -> str | None:
    """One variable, as ``os.environ.get`` would give it."""
    os_module = sys.modules.get("os")
    if os_module is not None:
        return os_module.environ.get(name)
    enc, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    raw: dict[bytes | str, bytes | str] = _posix.environ  # type: ignore[assignment]
    value = raw.get(name.encode(enc, errors), raw.get(name))
    return None if value is None else _text(value, enc, errors)


def _text(value: bytes | str, enc: str, errors: str) -> str:
    return value if isinstance(value, str) else value.decode(enc, errors)


def isabs(path: str) -> bool:
    return path.startswith("/")


def join(first: str, *rest: str) -> str:
    """``os.path.join``: an absolute part restarts the path."""
    path = first
    for part in rest:
        if part.startswith("/"):
            path = part
        elif not path or path.endswith("/"):
            path += part
        else:
            path += "/" + part
    return path


def normpath(path: str) -> str:
    if _normpath is None:  # pragma: no cover - before 3.11 or not CPython
        import posixpath

        return posixpath.normpath(path)
    return _normpath(path) or "."


def basename(path: str) -> str:
    return path[path.rfind("/") + 1 :]
