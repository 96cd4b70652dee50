"""``nexusd.nofollow``: the one symlink-proof walk undo's rewind and a preview's apply both write through."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nexusd.nofollow import DIR_FLAGS, UnsafePath, open_parent


@pytest.fixture
def root(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    fd = os.open(tmp_path / "ws", DIR_FLAGS)
    yield tmp_path, fd
    os.close(fd)


@pytest.mark.parametrize("rel", ["", "/etc/passwd", "a//b", "../x", "a/../../x", ".", "a/./b", "a/"])
def test_anything_but_a_plain_relative_path_is_refused(root, rel: str) -> None:  # type: ignore[no-untyped-def]
    _, fd = root
    with pytest.raises(UnsafePath) as e:
        open_parent(fd, rel, create=True)
    assert e.value.where is None and "not a plain relative path" in e.value.describe(str)


@pytest.mark.parametrize("link", ["sub", "sub/deeper"])
def test_a_symlink_on_the_way_is_never_followed(root, link: str) -> None:  # type: ignore[no-untyped-def]
    tmp, fd = root
    target = tmp / "ws" / link
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(tmp / "outside", target)
    with pytest.raises(UnsafePath) as e:
        open_parent(fd, f"{link}/x/f.txt", create=True)
    assert e.value.where == link and "not followed" in e.value.describe(str)
    assert list((tmp / "outside").iterdir()) == []  # nothing made through the link


def test_a_file_where_a_directory_should_be_is_refused(root) -> None:  # type: ignore[no-untyped-def]
    tmp, fd = root
    (tmp / "ws" / "f").write_text("x")
    with pytest.raises(UnsafePath):
        open_parent(fd, "f/g", create=True)


def test_missing_directories_are_made_with_their_modes_or_refused(root) -> None:  # type: ignore[no-untyped-def]
    tmp, fd = root
    with pytest.raises(FileNotFoundError):
        open_parent(fd, "a/b/c.txt", create=False)
    old = os.umask(0o077)
    try:
        dfd, name = open_parent(fd, "a/b/c.txt", create=True, dir_mode=lambda i: (0o750, 0o711)[i])
    finally:
        os.umask(old)
    os.close(dfd)
    assert name == "c.txt"
    assert stat.S_IMODE(os.stat(tmp / "ws" / "a").st_mode) == 0o750  # not narrowed by the umask
    assert stat.S_IMODE(os.stat(tmp / "ws" / "a" / "b").st_mode) == 0o711
