"""``nexusd.leanos`` behaves as ``os``/``os.path`` for everything the hook asks of it (issue 37: the hook
skips ``import os``), and the hook process really runs without ``os``."""

from __future__ import annotations

import os
import posixpath
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from nexusd import leanos

PARTS = st.lists(st.sampled_from(["a", "b", "/", ".", "..", "-", " ", "é"]), max_size=8).map("".join)


@given(PARTS, st.lists(PARTS, max_size=4))
def test_join_is_os_path_join(first: str, rest: list[str]) -> None:
    assert leanos.join(first, *rest) == posixpath.join(first, *rest)


@given(PARTS)
def test_normpath_isabs_and_basename_are_os_paths(path: str) -> None:
    assert leanos.normpath(path) == posixpath.normpath(path)
    assert leanos.isabs(path) == posixpath.isabs(path)
    assert leanos.basename(path) == posixpath.basename(path)


def test_the_environment_follows_os_environ_once_os_is_loaded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """In a process that has ``os`` (the daemon, nexusctl, the tests) a changed variable is seen: the
    built-in ``posix.environ`` is only the snapshot taken at start."""
    monkeypatch.setenv("NEXUS_LEANOS_PROBE", "changed")
    monkeypatch.delenv("NEXUS_LEANOS_ABSENT", raising=False)
    assert leanos.getenv("NEXUS_LEANOS_PROBE") == "changed"
    assert leanos.getenv("NEXUS_LEANOS_ABSENT") is None
    assert leanos.environ() == dict(os.environ)


def test_without_os_the_environment_is_decoded_as_os_would() -> None:
    """A fresh ``-I -S`` process (the hook's): no ``os`` loaded, non-UTF-8 bytes kept by surrogateescape."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1]]; from nexusd import leanos; "
        "env = leanos.environ(); assert 'os' not in sys.modules, 'os loaded'; "
        "print(repr((env['PROBE'], leanos.getenv('PROBE'), leanos.getenv('ABSENT'), env['EMPTY'])))"
    )
    root = os.path.dirname(os.path.dirname(leanos.__file__))
    env = {b"PROBE": b"caf\xe9 \xff", b"EMPTY": b""}
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, root], env=env, capture_output=True, timeout=60, check=True
    )
    expected = os.fsdecode(b"caf\xe9 \xff")
    assert eval(out.stdout) == (expected, expected, None, "")
