"""The audit trail's hash chain: each line carries the SHA-256 of the line before it (``prev``), and the chain's
position is checkpointed in ``<audit>.chain`` (0600, written atomically) at start, at every rotation and at
clean shutdown. ``verify`` walks the files oldest first and names the first place where the chain breaks.

What it proves: a line edited, removed, inserted or reordered anywhere in the kept files breaks the chain; a
tail truncated or a rotated file swapped, removed or replaced no longer matches the checkpoint.

The tail: the writer records the live file's head in ``<audit>.head`` before every batch it writes (where the
file ends now and where it will end once the batch is written; "stopped" at a clean stop), so lines appended
by someone else after the daemon's last write, and lines cut or replaced at the end, show even after a kill -9
(issue 34). A torn last line (a crash mid-write) is sealed at the next start by a record naming its hash;
a torn line nobody sealed is a break.

What it cannot prove alone: a writer who rewrites every line, the checkpoint *and* the head record (same
user, outside the sandbox) leaves a consistent trail; the running daemon's head (``nexusctl audit verify``
asks it) and the copy exported to the system journal (``--audit-export``), outside the user's reach, anchor
the chain against that (docs/SECURITY.md).
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
    heads: bool = False  # the writer keeps ``<audit>.head``: its absence is then a problem


class HeadMark(msgspec.Struct, forbid_unknown_fields=True):
    """Where the live file ends: written before each batch (``before`` now, ``lines``/``head`` once written)."""

    state: str  # "running" (the file ends at ``before`` or at ``head``) or "stopped" (exactly at ``head``)
    lines: int  # chain lines in the live file once the batch being written is on disk
    head: str  # hash of its last line then (the previous file's last line while it is empty)
    before_lines: int
    before: str
    version: int = 1


HEAD_SIZE = 512  # the record is rewritten in place (pwrite at 0), padded to a fixed size
SEAL_EVENT = "audit_sealed"


class _Prev(msgspec.Struct):
    prev: str = ""
    event: str = ""
    reason: str = ""


_prev_decoder = msgspec.json.Decoder(_Prev)


def checkpoint_path(audit: Path) -> Path:
    return audit.with_name(audit.name + ".chain")


def head_path(audit: Path) -> Path:
    return audit.with_name(audit.name + ".head")


def encode_head(mark: HeadMark) -> bytes:
    data = msgspec.json.encode(mark)
    return data.ljust(HEAD_SIZE - 1, b" ") + b"\n"


def load_head(audit: Path) -> HeadMark | None:
    """The head record, or None when there is none. Raises ValueError when it exists but cannot be read."""
    try:
        data = head_path(audit).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"{head_path(audit)}: {e.strerror or e}") from e
    try:
        return msgspec.json.decode(data.strip(), type=HeadMark)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ValueError(f"{head_path(audit)}: not a head record ({e})") from e


def check_tail(lines: list[ChainLine], mark: HeadMark, torn: bool = False) -> str | None:
    """Whether the live file ends where the writer last said it would; the problem in words, or None.

    ``torn``: the file ends in a torn line, so a crash cut the batch being written short; its whole lines
    before the tear then count as the writer's."""
    ends = [(mark.lines, mark.head)]
    if mark.state == "running":
        ends.append((mark.before_lines, mark.before))
    for n, h in ends:
        if len(lines) == n and (n == 0 or lines[-1].hash == h):
            return None
    if torn and mark.state == "running" and mark.before_lines < len(lines) < mark.lines:
        b = mark.before_lines
        if b == 0 or lines[b - 1].hash == mark.before:
            return None  # a crash cut the batch being written short: its whole lines are the writer's
    n, h = mark.lines, mark.head
    if len(lines) > n and (n == 0 or lines[n - 1].hash == h):
        return (
            f"{len(lines) - n} line(s) after line {n}, where nexusd last recorded its head "
            f"({h[:12]}), were not written by nexusd (appended by someone else)"
        )
    last = lines[-1].hash[:12] if lines else "-"
    return (
        f"the file ends at line {len(lines)} ({last}), but nexusd last recorded its head at line "
        f"{mark.lines} ({mark.head[:12]}): lines cut or replaced at the end"
    )


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
    seal: str = ""  # a seal record's reason (it names the torn line it seals by its hash)


@dataclass
class Scan:
    """One audit file read for the chain."""

    lines: list[ChainLine] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)  # line numbers that are not chain records (a crash's half line)
    torn_hash: dict[int, str] = field(default_factory=dict)  # their hashes, for the seal that names them

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
            head = _prev_decoder.decode(line)
            prev = head.prev
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            head, prev = None, ""
        if len(prev) != 64 or head is None:
            out.torn.append(n)
            out.torn_hash[n] = line_hash(line)
            continue
        out.lines.append(ChainLine(n, prev, line_hash(line), head.reason if head.event == SEAL_EVENT else ""))
    return out


def ends_torn(s: Scan) -> bool:
    """The file's last line is a torn one (after every chain line)."""
    return bool(s.torn) and (not s.lines or s.torn[-1] > s.lines[-1].number)


def unsealed(s: Scan) -> list[int]:
    """Torn lines not followed (as the next chain line) by a seal record naming their hash."""
    out = []
    for n in s.torn:
        after = next((ln for ln in s.lines if ln.number > n), None)
        if after is None or s.torn_hash[n] not in after.seal:
            out.append(n)
    return out


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)  # in chain order: the first is where it first breaks
    notes: list[str] = field(default_factory=list)  # not a break (a crash's torn line, skipped by readers)
    lines: int = 0
    files: int = 0
    tail: bool = False  # a problem is about the live file's tail: worth a second look while a daemon writes

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
        bad = set(unsealed(s))
        for n in s.torn:
            if n in bad:
                rep.problems.append(
                    f"{path}:{n}: a torn line (half a record) nobody sealed: a crash or a full disk cut a record "
                    "short, or a line was put there (nexusd seals a torn tail when it starts)"
                )
            else:
                rep.notes.append(f"{path}:{n}: a torn line left by a crash, sealed by the record after it, skipped")
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
    try:
        hm = load_head(audit)
    except ValueError as e:
        rep.problems.append(f"head record unreadable: {e}")
        hm = None
    if hm is None and cp is not None and cp.heads:
        rep.problems.append(f"{head_path(audit)}: missing (removed): the live file's tail cannot be checked")
    elif hm is not None:
        s = scan(audit)
        why = check_tail(s.lines if s is not None else [], hm, s is not None and ends_torn(s))
        if why is not None:
            rep.problems.append(f"{audit}: {why}")
            rep.tail = True
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
            rep.tail = True
        elif not rotated_ok and len(lines) > n:
            rep.problems.append(
                f"{audit}:{lines[n].number}: {len(lines) - n} line(s) after the running daemon's head "
                f"({head[:12]}, line {n}) were not written by it (appended by someone else)"
            )
            rep.tail = True
        elif not n and lines and lines[0].prev != head and not rotated_ok:
            rep.problems.append(
                f"{audit}:{lines[0].number}: chain broken: the running daemon wrote no line "
                "to this file since it was started or rotated"
            )
    return rep
