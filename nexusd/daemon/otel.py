"""Audit records and decision counts to an OpenTelemetry collector (OTLP/HTTP, JSON encoding).

Off by default; ``nexusd --otel-endpoint http://127.0.0.1:4318`` turns it on. Every audit record becomes an OTLP
log record (the audit line as its body, its chain hash and the decision as attributes) and a cumulative counter
``nexusd.decisions`` (by event, decision, source and provider) goes out as an OTLP metric, both POSTed to
``<endpoint>/v1/logs`` and ``/v1/metrics`` every few seconds from a thread of its own.

Standard library only: OTLP/HTTP's JSON encoding is plain JSON (the field names of the protobuf messages in
lowerCamelCase, 64-bit integers as strings), so no SDK is needed; the test validates what is sent against the
official protobuf definitions. Like the journald export, this never blocks or fails a decision: the queue is
bounded (the oldest records are dropped, and counted), and a collector that is down costs one log line.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlsplit

import structlog

from nexusd import __version__
from nexusd.daemon.auditexport import Exporter
from nexusd.protocol import AuditRecord

log = structlog.get_logger("nexusd.otel")

MAX_QUEUE = 10_000  # records waiting to be sent; past it the oldest are dropped (and counted)
MAX_BATCH = 512  # log records per request
SEVERITY = {"deny": (13, "WARN")}  # the rest: (9, "INFO"), as syslog's severities in the journald export
POST_TIMEOUT = 5.0


def check_endpoint(url: str) -> str:
    """The collector's base URL (``http[s]://host:port[/prefix]``) without a trailing slash. ValueError else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"an OTLP/HTTP endpoint is http(s)://HOST:PORT[/PATH], not {url!r}")
    return url.rstrip("/")


def _headers_from_env() -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS`` (``k=v,k2=v2``), as every OpenTelemetry exporter reads it."""
    out: dict[str, str] = {}
    for item in os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "").split(","):
        k, sep, v = item.partition("=")
        if sep and k.strip():
            out[k.strip()] = unquote(v.strip())
    return out


def _attr(key: str, value: str | int | bool) -> dict[str, object]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _resource() -> dict[str, object]:
    return {
        "attributes": [
            _attr("service.name", "nexusd"),
            _attr("service.version", __version__),
            _attr("process.pid", os.getpid()),
        ]
    }


_SCOPE = {"name": "nexusd.audit", "version": __version__}


def log_record(record: AuditRecord, line: bytes, digest: str) -> dict[str, object]:
    """One OTLP LogRecord for one audit line."""
    number, text = SEVERITY.get(record.decision, (9, "INFO"))
    attrs = [
        _attr("nexus.event", record.event),
        _attr("nexus.id", record.id),
        _attr("nexus.decision", record.decision),
        _attr("nexus.source", record.source),
        _attr("nexus.provider", record.provider),
        _attr("nexus.session", record.session),
        _attr("nexus.tool", record.tool),
        _attr("nexus.hash", digest),
        _attr("nexus.prev", record.prev),
    ]
    if record.rule:
        attrs.append(_attr("nexus.rule", record.rule))
    return {
        "timeUnixNano": str(int(record.time * 1e9)),
        "observedTimeUnixNano": str(time.time_ns()),
        "severityNumber": number,
        "severityText": text,
        "body": {"stringValue": line.decode("utf-8", "replace")},
        "attributes": attrs,
    }


class OtlpExport:
    """An audit ``Exporter`` that queues and a thread that sends. ``errors`` counts failed requests,
    ``dropped`` records lost to a full queue."""

    def __init__(self, endpoint: str, *, interval: float = 5.0, headers: dict[str, str] | None = None) -> None:
        self.endpoint = check_endpoint(endpoint)
        self.interval = interval
        self.headers = {"Content-Type": "application/json", **_headers_from_env(), **(headers or {})}
        self.errors = 0
        self.dropped = 0
        self._queue: collections.deque[dict[str, object]] = collections.deque()
        self._counts: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
        self._counts_changed = False
        self._start_ns = time.time_ns()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="nexusd-otel", daemon=True)
        self._thread.start()

    def send(self, record: AuditRecord, line: bytes, digest: str) -> None:
        item = log_record(record, line, digest)
        with self._lock:
            if len(self._queue) >= MAX_QUEUE:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append(item)
            self._counts[(record.event, record.decision, record.source, record.provider)] += 1
            self._counts_changed = True

    def flush(self) -> None:
        """Send what is queued now (the thread does this every ``interval`` seconds)."""
        while True:
            with self._lock:
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
                metrics = self._metrics_payload() if self._counts_changed else None
                self._counts_changed = False
            if batch:
                body: dict[str, object] = {
                    "resourceLogs": [{"resource": _resource(), "scopeLogs": [{"scope": _SCOPE, "logRecords": batch}]}]
                }
                self._post("/v1/logs", body)
            if metrics is not None:
                self._post("/v1/metrics", metrics)
            with self._lock:
                if not self._queue:
                    return

    def _metrics_payload(self) -> dict[str, object]:
        now = str(time.time_ns())
        points = [
            {
                "attributes": [
                    _attr("nexus.event", event),
                    _attr("nexus.decision", decision),
                    _attr("nexus.source", source),
                    _attr("nexus.provider", provider),
                ],
                "startTimeUnixNano": str(self._start_ns),
                "timeUnixNano": now,
                "asInt": str(n),
            }
            for (event, decision, source, provider), n in sorted(self._counts.items())
        ]
        metric = {
            "name": "nexusd.decisions",
            "description": "Audit records written, by event, decision, source and provider",
            "unit": "{decision}",
            "sum": {"aggregationTemporality": 2, "isMonotonic": True, "dataPoints": points},  # 2: cumulative
        }
        return {
            "resourceMetrics": [{"resource": _resource(), "scopeMetrics": [{"scope": _SCOPE, "metrics": [metric]}]}]
        }

    def _post(self, path: str, body: Mapping[str, object]) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        req = urllib.request.Request(self.endpoint + path, data=data, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=POST_TIMEOUT) as resp:
                resp.read()
        except (OSError, urllib.error.URLError, ValueError) as e:
            self.errors += 1
            if not self._failing:
                self._failing = True
                log.error("otel export failing", endpoint=self.endpoint + path, error=str(e))
            return
        if self._failing:
            self._failing = False
            log.error("otel export working again", endpoint=self.endpoint, errors=self.errors, dropped=self.dropped)

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(self.interval)
            self._wake.clear()
            with contextlib.suppress(Exception):  # never take the daemon down: _post already counts failures
                self.flush()

    def close(self) -> None:
        """Last flush (bounded by the POST timeout), then the thread ends."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=2 * POST_TIMEOUT + 1)
        with contextlib.suppress(Exception):
            self.flush()


class Tee:
    """Several exporters behind the one the audit log takes (journald and OpenTelemetry together)."""

    def __init__(self, exporters: Sequence[Exporter]) -> None:
        self.exporters = list(exporters)
        self.errors = 0  # each exporter counts (and logs) its own failures

    def send(self, record: AuditRecord, line: bytes, digest: str) -> None:
        for e in self.exporters:
            e.send(record, line, digest)

    def close(self) -> None:
        for e in self.exporters:
            e.close()


def combined(exporters: Sequence[Exporter]) -> Exporter | None:
    if not exporters:
        return None
    return exporters[0] if len(exporters) == 1 else Tee(exporters)
