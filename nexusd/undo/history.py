"""The history of checkpoints: one JSON line per checkpoint in ``STATE/undo/history.jsonl``.

Appended by one writer at a time (a lock; the daemon is the only writer), read whole at start. Retention
rewrites it atomically (``nexusd.atomicfile``): a crash leaves the old file or the new one. A torn last
line (a crash mid-append) is skipped when read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import msgspec

from nexusd import protocol as p
from nexusd.atomicfile import write_atomic

_decoder = msgspec.json.Decoder(p.HistoryEntry)
_encoder = msgspec.json.Encoder()


class History:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.entries: list[p.HistoryEntry] = []
        self._next = 1
        self._loaded = False

    def load(self) -> list[str]:
        """Read the file; returns one message per line that could not be read (skipped)."""
        errors: list[str] = []
        with self.lock:
            self.entries = []
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            for n, line in enumerate(data.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    self.entries.append(_decoder.decode(line))
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    errors.append(f"{self.path}:{n}: {e}")
            self._next = max((e.id for e in self.entries), default=0) + 1
            self._loaded = True
        return errors

    def next_id(self) -> int:
        with self.lock:
            n = self._next
            self._next += 1
            return n

    def append(self, entry: p.HistoryEntry) -> None:
        line = _encoder.encode(entry) + b"\n"
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            self.entries.append(entry)

    def get(self, cid: int) -> p.HistoryEntry | None:
        with self.lock:
            return next((e for e in self.entries if e.id == cid), None)

    def snapshot(self) -> list[p.HistoryEntry]:
        with self.lock:
            return list(self.entries)

    def drop(self, ids: set[int]) -> None:
        """Forget ``ids`` and rewrite the file without them."""
        if not ids:
            return
        with self.lock:
            self.entries = [e for e in self.entries if e.id not in ids]
            text = b"".join(_encoder.encode(e) + b"\n" for e in self.entries).decode()
            write_atomic(self.path, text, 0o600)
