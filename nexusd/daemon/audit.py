"""The audit trail: one JSON line per decision in ``<state-dir>/audit.jsonl``, written off the event loop.

A writer thread appends whole lines with O_APPEND and rotates by size (rename, never truncate), so a crash
loses at most the records still queued, never what is already on disk. Clean shutdown drains and fsyncs.
Every line carries the hash of the line before it (``prev``; nexusd/daemon/auditchain.py), so an edit, a
removal or a truncation shows in ``nexusctl audit verify``.

Issue 34: before each batch the writer records where the file will end (``<audit>.head``), and at start the
daemon checks the file against it, says loudly when it does not match (lines appended by someone else, or
cut) and chains from its own head so the break stays visible; a torn last line is sealed by a record naming
it. A write that fails (a full disk) is cut back, so no half record stays. A record written with ``confirm``
(an allow under ``[audit] on_failure = "deny"``) is fdatasync'ed before ``confirm(True)``, and ``confirm(False)``
when it could not be: the caller replies only then. Asks waiting for a person are journalled
(``<audit>.asks``), so those a crash cut off get a record ("ask_lost") at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import structlog

from nexusd.atomicfile import write_atomic
from nexusd.daemon import auditchain
from nexusd.daemon.auditchain import GENESIS, SEAL_EVENT, Checkpoint, FileMark, HeadMark, line_hash
from nexusd.daemon.auditexport import Exporter
from nexusd.protocol import AuditRecord, CallInfo, Decision, encode

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
_WAKE = object()  # write the notices found at start (a sealed torn line, a tail that does not match) at once
Confirm = Callable[[bool], None]  # called from the writer thread: the record is on disk (fdatasync'ed), or not
MAX_ASKS_JOURNAL = 1 << 20  # <audit>.asks is rewritten with only the open asks past this size
log = structlog.get_logger("nexusd.audit")


def held_until_recorded(
    send: Callable[[bytes], object],
    decision: Decision,
    strict: bool,
    deliver: Callable[[], object] | None = None,
) -> Confirm | None:
    """Under ``[audit] on_failure = "deny"`` (``strict``) an allow is sent only once its record is on disk and
    synced; if it cannot be written, a deny goes out instead. None: send now (a deny, or not strict).
    ``deliver``: what sends the recorded allow (undo's checkpoint first), else ``send`` of its line.
    Call on the event loop; the returned callback is the writer thread's to call."""
    if not strict or decision.decision != "allow":
        return None
    loop = asyncio.get_running_loop()
    line = encode(decision)
    refused = encode(
        msgspec.structs.replace(
            decision,
            decision="deny",
            source="error",
            reason='the audit log cannot be written and [audit] on_failure = "deny": nothing is allowed '
            "that is not recorded",
            updated_input=None,
        )
    )

    def confirm(ok: bool) -> None:
        if ok and deliver is not None:
            loop.call_soon_threadsafe(deliver)
        else:
            loop.call_soon_threadsafe(send, line if ok else refused)

    return confirm


def notice(event: str, reason: str, *, rid: str | None = None, call: CallInfo | None = None) -> AuditRecord:
    """A record the audit log writes about itself (a sealed line, a tail that does not match, a lost ask)."""
    return AuditRecord(
        time=time.time(),
        id=rid or secrets.token_hex(16),
        provider=call.provider if call else "nexusd",
        session=call.session if call else "-",
        tool=call.tool if call else "nexusd.audit",
        summary="",
        decision="deny",
        source="error",
        reason=reason,
        cwd=call.cwd if call else "",
        workspace=call.workspace if call else None,
        event=event,
    )


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
        self._head_fd: int | None = None
        self._head_failing = False
        self._notices: list[AuditRecord] = []  # written first in the next batch (a seal right after its torn line)
        self.tail_problem: str | None = None  # what the start-time check of the tail found
        self._asks: dict[str, None] = {}  # asks waiting for a person, journalled in <audit>.asks
        self._asks_lock = threading.Lock()
        self._asks_fd: int | None = None
        self._asks_lines = 0
        self._asks_failing = False

    def start(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._open()
        self._load_chain()
        self._recover_asks()
        try:
            self._head_fd = os.open(
                auditchain.head_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
            self._write_head("running", self.chain, self.chain)
        except OSError as e:
            log.error("audit head record cannot be written; the trail's tail is not anchored", error=str(e))
        self._thread = threading.Thread(target=self._run, name="nexusd-audit", daemon=True)
        self._thread.start()
        if self._notices:
            self._queue.put(_WAKE)

    def write(
        self, record: AuditRecord, tool_input: dict[str, Any] | None = None, *, confirm: Confirm | None = None
    ) -> None:
        """Queue ``record``; with ``tool_input``, the writer thread fills ``summary`` from it (off the loop).
        With ``confirm``: called (from the writer thread) with True once the record is on disk and synced,
        False when it could not be written."""
        if confirm is not None:
            self._queue.put((record, tool_input, confirm))
        else:
            self._queue.put(record if tool_input is None else (record, tool_input))

    # ------------------------------------------------------------------ asks waiting for a person

    def ask_opened(self, rid: str, call: CallInfo) -> None:
        """An ask began: journalled at once (before the agent hears ``pending``), so a crash before its answer
        leaves a trace that the next start turns into an ``ask_lost`` record. Cheap: one appended line."""
        line = msgspec.json.encode({"id": rid, "call": call}) + b"\n"
        with self._asks_lock:
            try:
                if self._asks_fd is None:
                    self._asks_fd = os.open(
                        self._asks_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
                    )
                os.write(self._asks_fd, b"+" + line)
                self._asks[rid] = None
                self._asks_lines += 1
                self._asks_failing = False
            except OSError as e:
                if not self._asks_failing:  # once per failure, not once per ask
                    log.error("ask journal cannot be written; a crash would leave asks unrecorded", error=str(e))
                self._asks_failing = True

    def _asks_resolved(self, ids: list[str]) -> None:
        """Writer thread: the records of these ids are on disk; asks among them are closed in the journal."""
        with self._asks_lock:
            done = [rid for rid in ids if rid in self._asks]
            if not done or self._asks_fd is None:
                return
            for rid in done:
                del self._asks[rid]
            try:
                os.write(self._asks_fd, b"".join(b"-" + rid.encode() + b"\n" for rid in done))
                self._asks_lines += len(done)
                if self._asks_lines > 64 and os.fstat(self._asks_fd).st_size > MAX_ASKS_JOURNAL:
                    self._rewrite_asks()
            except OSError as e:
                log.error("ask journal cannot be written", error=str(e))

    def _rewrite_asks(self) -> None:
        """Keep only the open asks (called with the lock held). Their calls are read back from the journal."""
        opened = _read_asks(self._asks_path())
        body = b"".join(b"+" + opened[rid] + b"\n" for rid in self._asks if rid in opened)
        write_atomic(self._asks_path(), body.decode(), 0o600)
        if self._asks_fd is not None:
            os.close(self._asks_fd)
        self._asks_fd = os.open(self._asks_path(), os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._asks_lines = len(self._asks)

    def _asks_path(self) -> Path:
        return self.path.with_name(self.path.name + ".asks")

    def _recover_asks(self) -> None:
        """At start: every ask journalled as open was cut off by a crash; record each, then start afresh."""
        path = self._asks_path()
        try:
            opened = _read_asks(path)
        except OSError as e:
            log.error("ask journal unreadable; asks pending at a crash may be unrecorded", error=str(e))
            return
        if opened:  # resolved and recorded, but killed before the journal said so: not lost
            for line in _lines_backwards(self.path):
                try:
                    seen = _id_decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if seen.event == "decision":
                    opened.pop(seen.id, None)
        for rid, raw in opened.items():
            try:
                call = msgspec.json.decode(raw, type=_AskLine).call
            except (msgspec.DecodeError, msgspec.ValidationError):
                call = None
            rec = notice(
                "ask_lost",
                "nexusd stopped (a crash or kill) while this call waited for a person; its hook denied it "
                "when the connection closed",
                rid=rid,
                call=call,
            )
            if call is not None:
                rec.summary = summarize(call.input)
            self._notices.append(rec)
        if opened:
            log.error("asks pending when nexusd last stopped were cut off; recorded as ask_lost", count=len(opened))
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

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
            if self._head_fd is not None:
                with contextlib.suppress(OSError):
                    self._write_head("stopped", self.chain, self.chain)
                    os.fsync(self._head_fd)
        if self._head_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._head_fd)
            self._head_fd = None
        with self._asks_lock:
            if self._asks_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._asks_fd)
                self._asks_fd = None
            if stopped and not self._asks:  # every ask was resolved (and recorded): nothing to recover
                with contextlib.suppress(OSError):
                    self._asks_path().unlink()
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
        head = self._check_tail(lines, head)
        if self.tail_problem is not None:
            intact = False
        self.chain = (head, len(lines))
        if intact:
            self._checkpoint()

    def _check_tail(self, lines: list[auditchain.ChainLine], head: str) -> str:
        """The live file against the head record the writer left: the head to chain from. On a mismatch, the
        recorded head (so the next line shows the break), a loud log line and a record saying what was found."""
        try:
            mark = auditchain.load_head(self.path)
        except ValueError as e:
            self.tail_problem = f"head record unreadable ({e})"
            mark = None
        if mark is None:
            if self.tail_problem is None and lines:
                log.error(
                    "audit trail has no head record: its tail cannot be checked (removed, or written by an older "
                    "nexusd); lines appended or cut at its end since then cannot be told",
                    file=str(self.path),
                )
            elif self.tail_problem is not None:
                log.error("AUDIT TRAIL TAIL CANNOT BE CHECKED", problem=self.tail_problem, file=str(self.path))
                self._notices.append(notice("audit_tail_unchecked", f"at start: {self.tail_problem}"))
            return head
        torn = any(n.event == SEAL_EVENT for n in self._notices)  # _open found (and ended) a torn last line
        why = auditchain.check_tail(lines, mark, torn)
        if why is None:
            return head
        self.tail_problem = why
        log.error(
            "AUDIT TRAIL TAMPERED: its tail does not match the head nexusd recorded; chaining from the recorded "
            "head so the break stays visible",
            problem=why,
            file=str(self.path),
        )
        self._notices.append(notice("audit_tail_mismatch", f"at start: {why}"))
        return mark.head

    def _write_head(self, state: str, before: tuple[str, int], after: tuple[str, int]) -> None:
        """Where the live file ends now (``before``) and once the batch being written is on disk (``after``).
        A failure here costs the anchor, never the record: logged once."""
        if self._head_fd is None:
            return
        mark = HeadMark(state=state, lines=after[1], head=after[0], before_lines=before[1], before=before[0])
        try:
            os.pwrite(self._head_fd, auditchain.encode_head(mark), 0)
        except OSError as e:
            if not self._head_failing:
                log.error("audit head record cannot be written; the trail's tail is not anchored", error=str(e))
            self._head_failing = True
        else:
            self._head_failing = False

    def _checkpoint(self) -> None:
        head, lines = self.chain
        mark = FileMark(self._first_prev, head, lines)
        try:
            auditchain.save_checkpoint(
                self.path, Checkpoint(current=mark, rotated=self._rotated[: self.keep], heads=True)
            )
        except OSError as e:
            log.error("audit chain checkpoint cannot be written", error=str(e))

    # ------------------------------------------------------------------ writer thread

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size
        if self._size and os.pread(self._fd, 1, self._size - 1) != b"\n":
            # A crash tore the last line: end it so the next record starts clean (readers skip the torn one),
            # and seal it: the next chain line names it, so verify knows it was found, not put there later.
            torn = _last_line(self._fd, self._size)
            os.write(self._fd, b"\n")
            self._size += 1
            self._notices.append(
                notice(
                    SEAL_EVENT,
                    f"a torn line ({len(torn)} bytes, sha256 {line_hash(torn)}) left by a crash or a failed "
                    "write was found at the end of the audit file and sealed",
                )
            )
            log.error("audit file ended in a torn line; sealed", bytes=len(torn), file=str(self.path))

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
        with contextlib.suppress(OSError):
            self._write_head("running", self.chain, self.chain)

    def _run(self) -> None:
        stop = False
        while not stop:
            items = [self._queue.get()]
            if not (isinstance(items[0], tuple) and len(items[0]) == 3):
                time.sleep(BATCH_WINDOW)  # an allow held until it is recorded does not wait for a batch
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            records: list[AuditRecord] = []
            flushes: list[_Flush] = []
            confirms: list[Confirm] = []
            for item in items:
                if item is _STOP:
                    stop = True
                elif item is _WAKE:
                    pass
                elif isinstance(item, _Flush):
                    flushes.append(item)
                else:
                    records.append(self._record(item, confirms))
            if records or self._notices:
                ok = self._append(records, sync=bool(confirms))
                for confirm in confirms:
                    with contextlib.suppress(Exception):  # the loop may be gone at stop: its hook then denies
                        confirm(ok)
                if ok and self._asks:  # an ask's resolution is its "decision" record (not a refused answer)
                    self._asks_resolved([r.id for r in records if r.event == "decision"])
            for f in flushes:
                f.done.set()

    def _record(self, item: Any, confirms: list[Confirm]) -> AuditRecord:
        if isinstance(item, tuple):
            record, tool_input = item[0], item[1]
            if len(item) == 3:
                confirms.append(item[2])
            if tool_input is not None:
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

    def _append(self, batch: list[AuditRecord], sync: bool = False) -> bool:
        """Write ``batch`` (after any notices found at start); True when it is on disk (synced with ``sync``)."""
        try:
            if self._fd is None:  # reopened after a failure: the file may have been replaced or repaired
                self._open()
                self._resync()
        except OSError as e:
            self._failed(e, len(batch))
            return False
        notices, self._notices = self._notices, []
        batch = [*notices, *batch]
        records = len(batch)
        data, head, hashed = self._chained(batch)
        ok = False
        try:
            ok = self._write(data, head, records, sync)
        finally:
            if not ok and notices:
                self._notices = notices + self._notices  # said at the next write that succeeds
            if self.export is not None:  # the copy goes out even when the file cannot be written
                for record, (line, digest) in zip(batch, hashed, strict=True):
                    self.export.send(record, line, digest)
        return ok

    def _write(self, data: bytes, head: str, records: int, sync: bool = False) -> bool:
        before = -1
        try:
            assert self._fd is not None
            self._size = os.fstat(self._fd).st_size
            if self._size and self._size + len(data) > self.max_bytes:
                self._rotate()
            assert self._fd is not None
            before = self._size
            self._write_head("running", self.chain, (head, self.chain[1] + records))
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            if sync:
                os.fdatasync(self._fd)
            self._size += len(data)
            self.chain = (head, self.chain[1] + records)
            # and where it ends now: after a crash, only a write caught in the act may end at ``before``
            self._write_head("running", self.chain, self.chain)
        except OSError as e:
            if before >= 0 and self._fd is not None:
                # cut what this write left half done (a full disk writes a prefix, then fails): no torn record
                # stays, and the chain goes on from the last whole line
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, before)
            self._failed(e, records)
            return False
        if self.failing is not None:
            log.error("audit log writable again", unrecorded=self.unrecorded, after=self.failing)
            self.failing = None
        return True

    def _failed(self, e: OSError, records: int) -> None:
        """A full disk must not take the gate down: count, say so once, and let the policy decide
        ([audit] on_failure) whether decisions go on while they cannot be recorded."""
        self.errors += 1
        self.unrecorded += records
        if self._fd is not None:  # reopen next time: the path may be repaired (space freed, file replaced)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self.failing is None:
            self.failing = f"{self.path}: {e.strerror or e}"
            log.error("audit log cannot be written; decisions are not being recorded", error=self.failing)

    def _resync(self) -> None:
        """After a failure the file may have been replaced (space freed, file recreated): count its lines
        again; the chain goes on from the last line written, so lost records show as a break."""
        s = auditchain.scan(self.path)
        lines = s.lines if s is not None else []
        if not lines:
            self._first_prev = self.chain[0]
        self.chain = (self.chain[0], len(lines))


class _IdEvent(msgspec.Struct):
    id: str = ""
    event: str = "decision"


_id_decoder = msgspec.json.Decoder(_IdEvent)


class _AskLine(msgspec.Struct):
    id: str
    call: CallInfo


def _read_asks(path: Path) -> dict[str, bytes]:
    """The asks journalled as open and not closed: id -> the journal line (JSON). Raises OSError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    opened: dict[str, bytes] = {}
    for line in data.splitlines():
        if line.startswith(b"+"):
            try:
                rid = msgspec.json.decode(line[1:], type=_AskLine).id
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # a line torn by the crash: nothing to name
            opened[rid] = line[1:]
        elif line.startswith(b"-"):
            opened.pop(line[1:].decode(errors="replace"), None)
    return opened


def _last_line(fd: int, size: int, block: int = 1 << 16) -> bytes:
    """The bytes after the file's last newline (a torn line), read backwards."""
    pos, tail = size, b""
    while pos > 0:
        step = min(block, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        nl = tail.rfind(b"\n")
        if nl >= 0:
            return tail[nl + 1 :]
    return tail


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
