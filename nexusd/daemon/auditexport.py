"""A copy of every audit line outside the user's reach: the system journal (journald's native protocol) or
syslog (RFC 5424), each over its local datagram socket.

The copy carries the line itself and its chain hash, so a trail rewritten on disk (chain and checkpoint
recomputed) still disagrees with the journal. Sending never blocks the writer for long and never fails a
decision: errors are counted and logged once, like the file's own failures.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from typing import Protocol

import structlog

from nexusd.protocol import AuditRecord

JOURNAL_SOCKET = "/run/systemd/journal/socket"
SYSLOG_SOCKET = "/dev/log"
SYSLOG_FACILITY = 10  # authpriv: security/authorization messages, readable by root only on most systems
_SD_ID = "nexusd@32473"  # 32473: the example private enterprise number RFC 5612 reserves for documentation

log = structlog.get_logger("nexusd.audit")


class Exporter(Protocol):
    errors: int

    def send(self, record: AuditRecord, line: bytes, digest: str) -> None: ...

    def close(self) -> None: ...


def _priority(record: AuditRecord) -> int:
    """Syslog severity: a deny is a warning (4), the rest informational (6)."""
    return 4 if record.decision == "deny" else 6


def _message(record: AuditRecord) -> str:
    return f"{record.decision} {record.tool} {record.summary} ({record.source}: {record.reason})"[:2000]


class _Datagram:
    def __init__(self, path: str) -> None:
        self.path = path
        self.errors = 0
        self._failing = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.settimeout(0.5)  # a stuck receiver must not hold the audit writer

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendto(data, self.path)
        except OSError as e:
            self.errors += 1
            if not self._failing:
                self._failing = True
                log.error("audit export failing", socket=self.path, error=str(e))
            return
        if self._failing:
            self._failing = False
            log.error("audit export working again", socket=self.path, errors=self.errors)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class JournalExport(_Datagram):
    """journald's native protocol: ``KEY=value`` lines; a value holding a newline in the binary form
    (``KEY\\n`` + 64-bit little-endian length + value + ``\\n``)."""

    def __init__(self, path: str = JOURNAL_SOCKET) -> None:
        super().__init__(path)

    def send(self, record: AuditRecord, line: bytes, digest: str) -> None:
        fields = {
            "MESSAGE": _message(record).encode(),
            "PRIORITY": str(_priority(record)).encode(),
            "SYSLOG_IDENTIFIER": b"nexusd",
            "NEXUS_EVENT": record.event.encode(),
            "NEXUS_ID": record.id.encode(),
            "NEXUS_DECISION": record.decision.encode(),
            "NEXUS_TOOL": record.tool.encode(),
            "NEXUS_HASH": digest.encode(),
            "NEXUS_PREV": record.prev.encode(),
            "NEXUS_RECORD": line,
        }
        self._send(encode_journal(fields))


def encode_journal(fields: dict[str, bytes]) -> bytes:
    out = bytearray()
    for key, value in fields.items():
        if b"\n" in value:
            out += key.encode() + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
        else:
            out += key.encode() + b"=" + value + b"\n"
    return bytes(out)


def _sd_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


class SyslogExport(_Datagram):
    """RFC 5424 over the local syslog socket; the audit line is the message, its hash structured data."""

    def __init__(self, path: str = SYSLOG_SOCKET) -> None:
        super().__init__(path)
        self._host = (socket.gethostname() or "-").split(".")[0][:255] or "-"

    def send(self, record: AuditRecord, line: bytes, digest: str) -> None:
        pri = SYSLOG_FACILITY * 8 + _priority(record)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.time)) + f".{int(record.time % 1 * 1e6):06d}Z"
        msgid = "".join(c for c in record.event if 33 <= ord(c) <= 126)[:32] or "-"
        sd = (
            f'[{_SD_ID} id="{_sd_escape(record.id)}" decision="{_sd_escape(record.decision)}" '
            f'hash="{digest}" prev="{_sd_escape(record.prev)}"]'
        )
        head = f"<{pri}>1 {stamp} {self._host} nexusd {os.getpid()} {msgid} {sd} "
        self._send(head.encode() + b"\xef\xbb\xbf" + line)


def exporter(spec: str) -> Exporter:
    """``journald``, ``journald:SOCKET``, ``syslog`` or ``syslog:SOCKET``. Raises ValueError on anything else."""
    kind, _, path = spec.partition(":")
    if kind == "journald":
        return JournalExport(path or JOURNAL_SOCKET)
    if kind == "syslog":
        return SyslogExport(path or SYSLOG_SOCKET)
    raise ValueError(f"unknown audit export {spec!r} (journald, journald:SOCKET, syslog or syslog:SOCKET)")
