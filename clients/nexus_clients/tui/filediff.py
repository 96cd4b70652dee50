"""What a Write or Edit would change, as a unified diff against the file as it is now.

The TUI runs as the same user as the agent, so it reads the target itself. The path comes from the
agent, so reading is defensive: never block (a FIFO or a device could hang the UI forever), regular
files only, a size cap, binary files described rather than shown.
"""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass
from typing import Any

MAX_READ = 2 * 1024 * 1024
MAX_DIFF_LINES = 2000

# tool name -> (path key, kind); Claude, Gemini CLI and Codex spellings
EDIT_TOOLS: dict[str, str] = {
    "Write": "write",
    "write_file": "write",
    "Edit": "edit",
    "replace": "edit",
    "MultiEdit": "multiedit",
    "NotebookEdit": "notebook",
}


@dataclass(frozen=True)
class Current:
    """The file as it is now: its text, or why it cannot be shown."""

    text: str | None
    exists: bool
    problem: str = ""  # "binary file", "not a regular file", "too large", an OSError ...


def read_current(path: str, limit: int = MAX_READ) -> Current:
    """Read ``path`` without ever blocking or following it into a device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return Current(None, exists=False)
    except OSError as e:
        return Current(None, exists=os.path.lexists(path), problem=f"cannot read: {e.strerror or e}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Current(None, exists=True, problem="not a regular file")
        if st.st_size > limit:
            return Current(None, exists=True, problem=f"too large to diff ({st.st_size} bytes)")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return Current(None, exists=True, problem="too large to diff (grew while reading)")
    except OSError as e:
        return Current(None, exists=True, problem=f"cannot read: {e.strerror or e}")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if b"\x00" in data[:8192]:
        return Current(None, exists=True, problem="binary file")
    return Current(data.decode("utf-8", errors="replace"), exists=True)


@dataclass(frozen=True)
class Change:
    path: str
    diff: str  # unified diff text ("" when there is nothing to compare)
    note: str = ""  # a line for the person: "new file", "old_string not found: the edit will fail" ...


def target_path(tool_input: dict[str, Any], cwd: str) -> str | None:
    path = tool_input.get("file_path") or tool_input.get("path") or tool_input.get("notebook_path")
    if not isinstance(path, str) or not path:
        return None
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(cwd, path))


def _apply_edit(text: str, old: str, new: str, replace_all: bool) -> tuple[str, str]:
    if old == "":
        return text, "old_string is empty"
    count = text.count(old)
    if count == 0:
        return text, "old_string not found in the current file: the edit will fail"
    if replace_all:
        return text.replace(old, new), f"replaces {count} occurrences"
    note = "" if count == 1 else f"old_string occurs {count} times: the agent's tool will refuse an ambiguous edit"
    return text.replace(old, new, 1), note


def _unified(path: str, before: str, after: str) -> str:
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path} (now)",
            tofile=f"{path} (after)",
            n=3,
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more diff lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def change_for(tool: str, tool_input: dict[str, Any], cwd: str, reader: Any = read_current) -> Change | None:
    """The diff a Write/Edit-like call would make, or None when ``tool`` is not one of them."""
    kind = EDIT_TOOLS.get(tool)
    if kind is None:
        return None
    path = target_path(tool_input, cwd)
    if path is None:
        return Change("?", "", "no file path in the request")
    current: Current = reader(path)
    if current.problem:
        return Change(path, "", f"current file not shown: {current.problem}")
    before = current.text or ""
    notes: list[str] = [] if current.exists else ["new file"]
    if kind == "write":
        content = tool_input.get("content")
        if not isinstance(content, str):
            return Change(path, "", "no text content in the request")
        after = content
        if current.exists and before:
            notes.append("replaces the whole file")
    elif kind == "edit":
        old, new = tool_input.get("old_string"), tool_input.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            return Change(path, "", "old_string/new_string missing")
        replace_all = bool(tool_input.get("replace_all")) or int(tool_input.get("expected_replacements") or 1) > 1
        after, note = _apply_edit(before, old, new, replace_all)
        if note:
            notes.append(note)
        if after == before:  # not found: show what the agent meant to change
            return Change(path, _unified(path, old, new), "; ".join(notes))
    elif kind == "multiedit":
        after = before
        edits = tool_input.get("edits")
        if not isinstance(edits, list):
            return Change(path, "", "edits missing")
        for n, e in enumerate(edits, 1):
            if not isinstance(e, dict) or not isinstance(e.get("old_string"), str):
                notes.append(f"edit {n} is malformed")
                continue
            after, note = _apply_edit(after, e["old_string"], str(e.get("new_string", "")), bool(e.get("replace_all")))
            if note:
                notes.append(f"edit {n}: {note}")
    else:
        return Change(path, "", "notebook edit: shown as arguments below")
    return Change(path, _unified(path, before, after), "; ".join(notes))
