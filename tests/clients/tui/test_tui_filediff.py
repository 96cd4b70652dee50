"""Write/Edit shown as a diff against the file as it is now, read without ever blocking."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from nexus_clients.tui.filediff import change_for, read_current


def test_write_new_file(tmp_path: Path) -> None:
    c = change_for("Write", {"file_path": str(tmp_path / "new.txt"), "content": "a\nb\n"}, str(tmp_path))
    assert c is not None and "new file" in c.note
    assert "+a\n+b\n" in c.diff


def test_write_over_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "f.py"
    f.write_text("x = 1\ny = 2\n")
    c = change_for("Write", {"file_path": "f.py", "content": "x = 1\ny = 3\n"}, str(tmp_path))
    assert c is not None and c.path == str(f)
    assert "-y = 2\n+y = 3\n" in c.diff and " x = 1\n" in c.diff
    assert "replaces the whole file" in c.note


def test_edit_applies_old_to_new(tmp_path: Path) -> None:
    f = tmp_path / "f.py"
    f.write_text("def f():\n    return 1\n")
    c = change_for("Edit", {"file_path": str(f), "old_string": "return 1", "new_string": "return 2"}, "/")
    assert c is not None
    assert "-    return 1\n+    return 2\n" in c.diff
    assert c.note == ""


def test_edit_not_found_or_ambiguous_says_so(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("a\na\n")
    missing = change_for("Edit", {"file_path": str(f), "old_string": "zzz", "new_string": "y"}, "/")
    assert missing is not None and "not found" in missing.note and "-zzz" in missing.diff
    twice = change_for("Edit", {"file_path": str(f), "old_string": "a", "new_string": "b"}, "/")
    assert twice is not None and "2 times" in twice.note
    gemini = change_for(
        "replace", {"file_path": str(f), "old_string": "a", "new_string": "b", "expected_replacements": 2}, "/"
    )
    assert gemini is not None and gemini.diff.count("+b") == 2


def test_multiedit_in_order(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("one two\n")
    edits = [{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}, "junk"]
    c = change_for("MultiEdit", {"file_path": str(f), "edits": edits}, "/")
    assert c is not None and "+1 2\n" in c.diff and "edit 3 is malformed" in c.note


def test_other_tools_have_no_diff() -> None:
    assert change_for("Bash", {"command": "ls"}, "/") is None


def test_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(read_current(str(fifo))), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO must not block the UI"
    assert result[0].problem == "not a regular file"  # type: ignore[attr-defined]


def test_device_binary_and_large_files_are_described_not_shown(tmp_path: Path) -> None:
    assert read_current("/dev/zero").problem == "not a regular file"
    b = tmp_path / "b.bin"
    b.write_bytes(b"\x7fELF\x00\x00")
    assert read_current(str(b)).problem == "binary file"
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2000)
    assert "too large" in read_current(str(big), limit=1000).problem
    c = change_for("Write", {"file_path": str(b), "content": "x"}, "/")
    assert c is not None and "binary file" in c.note and c.diff == ""


def test_symlink_is_followed_to_show_what_would_change(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    c = change_for("Write", {"file_path": str(link), "content": "new\n"}, "/")
    assert c is not None and "-old\n+new\n" in c.diff
