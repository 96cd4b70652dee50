"""The audit trail's hash chain: each line carries the SHA-256 of the line before it (``prev``), and the chain's
position is checkpointed in ``<audit>.chain`` (0600, written atomically) at start, at every rotation and at
clean shutdown. ``verify`` walks the files oldest first and names the first place where the chain breaks.

What it proves: a line edited, removed, inserted or reordered anywhere in the kept files breaks the chain; a
tail truncated or a rotated file swapped, removed or replaced no longer matches the checkpoint. What it cannot
prove alone: a writer who rewrites every line *and* the checkpoint (same user) leaves a consistent chain; the
copy exported to the system journal (``--audit-export``), outside the user's reach, carries each line's hash
and anchors the chain against that (docs/SECURITY.md).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from nexusd.atomicfile import write_atomic

GENESIS = "0" * 64  # ``prev`` of the very first line


def line_hash(line: bytes) -> str:
    """The chain hash of one line as it is on disk, without its newline."""
    return hashlib.sha256(line).hexdigest()


class FileMark(msgspec.Struct, forbid_unknown_fields=True):
    """Where one audit file starts and ends in the chain."""

    first_prev: str  # ``prev`` of its first line (the hash of the last line of the file before it)
    last: str  # hash of its last line (== first_prev while it is empty)
    lines: int  # chain lines in it


class Checkpoint(msgspec.Struct, forbid_unknown_fields=True):
    current: FileMark  # the live file, as of the checkpoint (it may have grown since)
    rotated: list[FileMark] = []  # index 0 is ``<audit>.1``, the newest rotated file
    version: int = 1


class _Prev(msgspec.Struct):
    prev: str = ""


_prev_decoder = msgspec.json.Decoder(_Prev)


def checkpoint_path(audit: Path) -> Path:
    return audit.with_name(audit.name + ".chain")


def rotated_path(audit: Path, i: int) -> Path:
    return audit.with_name(f"{audit.name}.{i}")


def load_checkpoint(audit: Path) -> Checkpoint | None:
    """The checkpoint, or None when there is none. Raises ValueError when it exists but cannot be read."""
    try:
        data = checkpoint_path(audit).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"{checkpoint_path(audit)}: {e.strerror or e}") from e
    try:
        return msgspec.json.decode(data, type=Checkpoint)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ValueError(f"{checkpoint_path(audit)}: not a chain checkpoint ({e})") from e


def save_checkpoint(audit: Path, cp: Checkpoint) -> None:
    write_atomic(checkpoint_path(audit), msgspec.json.encode(cp).decode() + "\n", 0o600)


@dataclass
class ChainLine:
    number: int  # 1-based line number in its file
    prev: str
    hash: str


@dataclass
class Scan:
    """One audit file read for the chain."""

    lines: list[ChainLine] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)  # line numbers that are not chain records (a crash's half line)

    def mark(self, first_prev: str) -> FileMark:
        if not self.lines:
            return FileMark(first_prev, first_prev, 0)
        return FileMark(self.lines[0].prev, self.lines[-1].hash, len(self.lines))


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            yield n, raw.rstrip(b"\n")


def scan(path: Path) -> Scan | None:
    """Read ``path``'s chain lines; None when it is missing or not a regular file (``/dev/full`` in tests)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    out = Scan()
    for n, line in _raw_lines(path):
        if not line.strip():
            continue
        try:
            prev = _prev_decoder.decode(line).prev
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            prev = ""
        if len(prev) != 64:
            out.torn.append(n)
            continue
        out.lines.append(ChainLine(n, prev, line_hash(line)))
    return out


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)  # in chain order: the first is where it first breaks
    notes: list[str] = field(default_factory=list)  # not a break (a crash's torn line, skipped by readers)
    lines: int = 0
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(audit: Path, keep: int, live: tuple[str, int] | None = None) -> Report:  # noqa: C901 - one branch per way a chain breaks
    """Check every kept audit file against the chain and the checkpoint.

    ``live`` is the running daemon's (head, lines in the current file): what the live file must contain, so
    a tail cut since the last checkpoint is found too.
    """
    rep = Report()
    try:
        cp = load_checkpoint(audit)
    except ValueError as e:
        rep.problems.append(f"checkpoint unreadable: {e}")
        cp = None
    present = [rotated_path(audit, i) for i in range(keep, 0, -1)] + [audit]
    if cp is None and any(f.exists() for f in present) and not rep.problems:
        rep.problems.append(
            f"{checkpoint_path(audit)}: missing (removed, or the audit files were not written by nexusd)"
        )
    expected: dict[Path, FileMark] = {}
    if cp is not None:
        expected[audit] = cp.current
        for i, m in enumerate(cp.rotated, 1):
            expected[rotated_path(audit, i)] = m
    prev_hash: str | None = None
    prev_where = ""
    for path in present:
        s = scan(path)
        want = expected.get(path)
        if s is None:
            if want is not None and (want.lines or path != audit):
                rep.problems.append(f"{path}: missing (the checkpoint expects {want.lines} lines)")
            elif path.exists() or path.is_symlink():
                rep.problems.append(f"{path}: not a regular file")
            continue
        rep.files += 1
        rep.lines += len(s.lines)
        if want is None and path != audit:
            rep.problems.append(f"{path}: not in the checkpoint (a file put in place of the trail's own)")
        for n in s.torn:
            rep.notes.append(f"{path}:{n}: not a chain record (a torn line left by a crash), skipped")
        if s.lines:
            first = s.lines[0]
            anchor = prev_hash if prev_hash is not None else (want.first_prev if want is not None else None)
            if anchor is not None and first.prev != anchor:
                where = f"the end of {prev_where}" if prev_hash is not None else "the checkpoint"
                rep.problems.append(
                    f"{path}:{first.number}: chain broken: does not follow {where} "
                    "(a file removed, swapped or replaced, or lines cut)"
                )
            for a, b in zip(s.lines, s.lines[1:], strict=False):
                if b.prev != a.hash:
                    rep.problems.append(
                        f"{path}:{b.number}: chain broken: line {a.number} before it was edited, "
                        "or lines between them removed or inserted"
                    )
                    break
        if want is not None:
            mark = s.mark(want.first_prev)
            if path == audit:  # the live file may have grown since the checkpoint: its prefix must match
                if want.lines and (len(s.lines) < want.lines or s.lines[want.lines - 1].hash != want.last):
                    rep.problems.append(
                        f"{path}: truncated or rewritten: the checkpoint has {want.lines} lines "
                        f"ending in {want.last[:12]}, the file {len(s.lines)}"
                    )
            elif (mark.lines, mark.last, mark.first_prev) != (want.lines, want.last, want.first_prev):
                rep.problems.append(
                    f"{path}: does not match the checkpoint ({want.lines} lines ending in "
                    f"{want.last[:12]} expected, {mark.lines} ending in {mark.last[:12]} found): "
                    "truncated, swapped or replaced"
                )
        if s.lines:
            prev_hash, prev_where = s.lines[-1].hash, str(path)
    if live is not None:
        head, n = live
        s = scan(audit)
        lines = s.lines if s is not None else []
        rotated_ok = cp is not None and cp.rotated and cp.rotated[0].last == head and n == cp.rotated[0].lines
        if n and not rotated_ok and (len(lines) < n or lines[n - 1].hash != head):
            rep.problems.append(
                f"{audit}: truncated or rewritten: the running daemon has written {n} lines "
                f"ending in {head[:12]}, the file has {len(lines)}"
            )
        elif not n and lines and lines[0].prev != head and not rotated_ok:
            rep.problems.append(
                f"{audit}:{lines[0].number}: chain broken: the running daemon wrote no line "
                "to this file since it was started or rotated"
            )
    return rep
