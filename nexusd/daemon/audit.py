"""The audit trail: one JSON line per decision in ``<state-dir>/audit.jsonl``, written off the event loop.

A writer thread appends whole lines with O_APPEND and rotates by size (rename, never truncate), so a crash
loses at most the records still queued, never what is already on disk. Clean shutdown drains and fsyncs.
Every line carries the hash of the line before it (``prev``; nexusd/daemon/auditchain.py), so an edit, a
removal or a truncation shows in ``nexusctl audit verify``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import structlog

from nexusd.daemon import auditchain
from nexusd.daemon.auditchain import GENESIS, Checkpoint, FileMark, line_hash
from nexusd.daemon.auditexport import Exporter
from nexusd.protocol import AuditRecord

DEFAULT_MAX_BYTES = 16 << 20
DEFAULT_KEEP = 3
# After the first record of a burst, the writer sleeps this long before draining, so it wakes (and takes
# the GIL from the event loop) once per batch rather than once per decision: measured -16 % decision p50
# and +12 % throughput under load (docs/PERFORMANCE.md). Records wait at most this much longer in memory.
BATCH_WINDOW = 0.005
_SUMMARY_MAX = 200


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()
log = structlog.get_logger("nexusd.audit")


def summarize(tool_input: dict[str, Any]) -> str:
    """The command, path or URL a person recognizes, truncated, with control characters escaped."""
    text: Any = None
    for key in ("command", "cmd", "file_path", "path", "notebook_path", "url", "pattern", "query", "prompt"):
        value = tool_input.get(key)
        if isinstance(value, str | list) and value:
            text = value
            break
    if text is None:
        for value in tool_input.values():
            if isinstance(value, str) and value:
                text = value
                break
    if isinstance(text, list):
        text = " ".join(str(x) for x in text)
    if not isinstance(text, str):
        return ""
    return escape(text[: _SUMMARY_MAX * 2])[:_SUMMARY_MAX]


_HIDDEN = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def escape(text: str) -> str:
    """Control, bidi and zero-width characters made visible so a log line cannot hide what ran."""
    return _HIDDEN.sub(_visible, text)


class AuditLog:
    """Queue records from the loop (cheap); a daemon thread batches them onto disk."""

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
        export: Exporter | None = None,
    ) -> None:
        self.path = path
        self.export = export  # a copy of every line to the system journal or syslog
        self.max_bytes = max_bytes
        self.keep = keep
        self.errors = 0  # failed writes
        self.unrecorded = 0  # decisions lost to them
        self.failing: str | None = None  # the error while writes fail; None once one succeeds again
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self._size = 0
        self._encoder = msgspec.json.Encoder()
        # the chain: the hash of the last line on disk and the current file's place in it. ``chain`` is one
        # tuple, assigned whole, so another thread (status) reads a consistent (head, lines) pair.
        self.chain: tuple[str, int] = (GENESIS, 0)
        self._first_prev = GENESIS
        self._rotated: list[FileMark] = []

    def start(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._open()
        self._load_chain()
        self._thread = threading.Thread(target=self._run, name="nexusd-audit", daemon=True)
        self._thread.start()

    def write(self, record: AuditRecord, tool_input: dict[str, Any] | None = None) -> None:
        """Queue ``record``; with ``tool_input``, the writer thread fills ``summary`` from it (off the loop)."""
        self._queue.put(record if tool_input is None else (record, tool_input))

    def flush(self, timeout: float = 5.0) -> bool:
        """Blocking: wait until everything queued so far is on disk (call from a worker thread)."""
        if self._thread is None or not self._thread.is_alive():
            return False
        token = _Flush()
        self._queue.put(token)
        return token.done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        stopped = True
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)
            stopped = not self._thread.is_alive()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if stopped and self._thread is not None:
            self._checkpoint()
        if self.export is not None:
            self.export.close()

    # ------------------------------------------------------------------ the chain

    def _load_chain(self) -> None:
        """Continue the chain where the files end, unless they no longer match the checkpoint: then from the
        checkpoint's head, so the cut stays visible as a break at the next line written."""
        try:
            cp = auditchain.load_checkpoint(self.path)
        except ValueError as e:
            log.error("audit chain checkpoint unreadable; starting a new one", error=str(e))
            cp = None
        s = auditchain.scan(self.path)
        lines = s.lines if s is not None else []
        intact = True
        if cp is None:
            self._rotated = []
            for i in range(1, self.keep + 1):
                r = auditchain.scan(auditchain.rotated_path(self.path, i))
                if r is None:
                    break
                self._rotated.append(r.mark(r.lines[0].prev if r.lines else GENESIS))
            before = self._rotated[0].last if self._rotated else GENESIS
            head = lines[-1].hash if lines else before
            self._first_prev = lines[0].prev if lines else before
        else:
            self._rotated = list(cp.rotated)
            want = cp.current
            intact = want.lines <= len(lines) and (not want.lines or lines[want.lines - 1].hash == want.last)
            if intact:
                head = lines[-1].hash if lines else want.last
                self._first_prev = lines[0].prev if lines else want.first_prev
            else:
                log.error(
                    "audit trail does not match its chain checkpoint (truncated or rewritten while the "
                    "daemon was stopped); the next line will show the break",
                    file=str(self.path),
                    checkpoint_lines=want.lines,
                    file_lines=len(lines),
                )
                head, self._first_prev = want.last, want.first_prev
        self.chain = (head, len(lines))
        if intact:
            self._checkpoint()

    def _checkpoint(self) -> None:
        head, lines = self.chain
        mark = FileMark(self._first_prev, head, lines)
        try:
            auditchain.save_checkpoint(self.path, Checkpoint(current=mark, rotated=self._rotated[: self.keep]))
        except OSError as e:
            log.error("audit chain checkpoint cannot be written", error=str(e))

    # ------------------------------------------------------------------ writer thread

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size
        if self._size and os.pread(self._fd, 1, self._size - 1) != b"\n":
            # A crash tore the last line: end it so the next record starts clean (readers skip the torn one).
            os.write(self._fd, b"\n")
            self._size += 1

    def _rotate(self) -> None:
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        for i in range(self.keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        head, lines = self.chain
        self._rotated = [FileMark(self._first_prev, head, lines), *self._rotated][: self.keep]
        self._first_prev = head
        self.chain = (head, 0)
        self._open()
        self._checkpoint()

    def _run(self) -> None:
        stop = False
        while not stop:
            items = [self._queue.get()]
            time.sleep(BATCH_WINDOW)
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            records: list[AuditRecord] = []
            flushes: list[_Flush] = []
            for item in items:
                if item is _STOP:
                    stop = True
                elif isinstance(item, _Flush):
                    flushes.append(item)
                else:
                    records.append(self._record(item))
            if records:
                self._append(records)
            for f in flushes:
                f.done.set()

    def _record(self, item: Any) -> AuditRecord:
        if isinstance(item, tuple):
            record, tool_input = item
            try:
                record.summary = summarize(tool_input)
            except Exception:
                record.summary = "<summary failed>"  # the decision is still logged
            return record  # type: ignore[no-any-return]
        return item  # type: ignore[no-any-return]

    def _chained(self, records: list[AuditRecord]) -> tuple[bytes, str, list[tuple[bytes, str]]]:
        """The lines for ``records``, each carrying the hash of the one before; the new head; each line with
        its hash (for the export)."""
        head = self.chain[0]
        out: list[bytes] = []
        hashed: list[tuple[bytes, str]] = []
        for record in records:
            record.prev = head
            line = self._encoder.encode(record)
            head = line_hash(line)
            out.append(line + b"\n")
            hashed.append((line, head))
        return b"".join(out), head, hashed

    def _append(self, batch: list[AuditRecord]) -> None:
        records = len(batch)
        data, head, hashed = self._chained(batch)
        try:
            self._write(data, head, records)
        finally:
            if self.export is not None:  # the copy goes out even when the file cannot be written
                for record, (line, digest) in zip(batch, hashed, strict=True):
                    self.export.send(record, line, digest)

    def _write(self, data: bytes, head: str, records: int) -> None:
        try:
            if self._fd is None:
                self._open()
                self._resync()
            assert self._fd is not None
            if self.failing is not None:
                self._size = os.fstat(self._fd).st_size
                if self._size and os.pread(self._fd, 1, self._size - 1) != b"\n":
                    data = b"\n" + data  # a failed write may have left half a line: end it first
            if self._size and self._size + len(data) > self.max_bytes:
                self._rotate()
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._size += len(data)
            self.chain = (head, self.chain[1] + records)
        except OSError as e:
            # a full disk must not take the gate down: count, say so once, and let the policy decide
            # ([audit] on_failure) whether decisions go on while they cannot be recorded
            self.errors += 1
            self.unrecorded += records
            if self._fd is not None:  # reopen next time: the path may be repaired (space freed, file replaced)
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
            if self.failing is None:
                self.failing = f"{self.path}: {e.strerror or e}"
                log.error("audit log cannot be written; decisions are not being recorded", error=self.failing)
            return
        if self.failing is not None:
            log.error("audit log writable again", unrecorded=self.unrecorded, after=self.failing)
            self.failing = None

    def _resync(self) -> None:
        """After a failure the file may have been replaced (space freed, file recreated): count its lines
        again; the chain goes on from the last line written, so lost records show as a break."""
        s = auditchain.scan(self.path)
        lines = s.lines if s is not None else []
        if not lines:
            self._first_prev = self.chain[0]
        self.chain = (self.chain[0], len(lines))


_decoder = msgspec.json.Decoder(AuditRecord)


def read_tail(
    path: Path,
    limit: int,
    match: dict[str, Any] | None = None,
    keep: int = DEFAULT_KEEP,
) -> list[AuditRecord]:
    """The newest ``limit`` records (oldest first) that equal ``match`` on every given field."""
    match = {k: v for k, v in (match or {}).items() if v is not None}
    found: list[AuditRecord] = []
    files = [path, *(path.with_name(f"{path.name}.{i}") for i in range(1, keep + 1))]
    for file in files:
        if len(found) >= limit:
            break
        for line in _lines_backwards(file):
            try:
                rec = _decoder.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
                continue  # a torn last line after a power loss, or a foreign line
            if all(getattr(rec, k, None) == v for k, v in match.items()):
                found.append(rec)
                if len(found) >= limit:
                    break
    found.reverse()
    return found


def find_records(path: Path, id_prefix: str, keep: int = DEFAULT_KEEP, limit: int = 2) -> list[AuditRecord]:
    """Records whose id starts with ``id_prefix``, newest first (at most ``limit``: two tell "ambiguous")."""
    found: list[AuditRecord] = []
    needle = id_prefix.encode()
    for file in [path, *(path.with_name(f"{path.name}.{i}") for i in range(1, keep + 1))]:
        for line in _lines_backwards(file):
            if needle not in line:
                continue
            try:
                rec = _decoder.decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError, ValueError):
                continue
            if rec.id.startswith(id_prefix):
                found.append(rec)
                if len(found) >= limit:
                    return found
    return found


def _lines_backwards(path: Path, block: int = 1 << 16) -> Iterator[bytes]:
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; generator
    except OSError:
        return
    with f:
        f.seek(0, os.SEEK_END)
        pos = f.tell()
        rest = b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step) + rest
            parts = chunk.split(b"\n")
            rest = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
