"""``nexusd --otel-endpoint``: audit records as OTLP logs and decision counts as an OTLP metric.

The receiver is a tiny OTLP/HTTP server on loopback that this test starts (a ThreadingHTTPServer); what it
receives is decoded with the official OTLP protobuf definitions (opentelemetry-proto's ExportLogsServiceRequest
and ExportMetricsServiceRequest, through protobuf's JSON mapping, unknown fields refused), so a field the
collector would not understand fails the test. The daemon is the real one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nexusd.client import Client
from nexusd.daemon.auditchain import line_hash
from nexusd.protocol import CallInfo

json_format = pytest.importorskip("google.protobuf.json_format")
logs_pb = pytest.importorskip("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
metrics_pb = pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")


class Receiver:
    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.status = status
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                kind = self.path
                msg: Any = None
                if kind == "/v1/logs":
                    msg = json_format.Parse(body, logs_pb.ExportLogsServiceRequest())
                elif kind == "/v1/metrics":
                    msg = json_format.Parse(body, metrics_pb.ExportMetricsServiceRequest())
                outer.requests.append((kind, self.headers.get("Content-Type", ""), msg))
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._t = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._t.start()

    def logs(self) -> list[Any]:
        return [r for kind, _, m in self.requests if kind == "/v1/logs" for r in m.resource_logs]

    def wait(self, pred: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, f"not received in time: {self.requests}"
            time.sleep(0.1)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _attrs(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


def _records(receiver: Receiver) -> list[Any]:
    return [lr for rl in receiver.logs() for sl in rl.scope_logs for lr in sl.log_records]


def _decisions(receiver: Receiver) -> dict[tuple[str, str], int]:
    """The last nexusd.decisions data points, by (decision, source)."""
    last: dict[tuple[str, str], int] = {}
    for kind, _, m in receiver.requests:
        if kind != "/v1/metrics":
            continue
        for rm in m.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    assert metric.name == "nexusd.decisions"
                    assert metric.sum.is_monotonic and metric.sum.aggregation_temporality == 2  # cumulative
                    for dp in metric.sum.data_points:
                        a = _attrs(dp.attributes)
                        last[(a["nexus.decision"], a["nexus.source"])] = dp.as_int
    return last


POLICY = '[permissions]\nallow = ["Bash(ls *)"]\ndeny = ["Bash(rm *)"]\n'


def test_audit_records_and_decision_counts_reach_the_collector(
    daemon_factory, receiver: Receiver, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(policy=POLICY, args=("--otel-endpoint", receiver.url, "--otel-interval", "0.2"))
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        for cmd in ("ls a", "ls b", "rm -r x"):
            c.request(CallInfo("claude", "s-otel", "Bash", {"command": cmd}, str(tmp_path)), timeout=20)
    receiver.wait(lambda: len(_records(receiver)) >= 3 and sum(_decisions(receiver).values()) >= 3)
    assert all(ct == "application/json" for _, ct, _ in receiver.requests)
    records = _records(receiver)
    disk = (h.state_dir / "audit.jsonl").read_bytes().splitlines()
    assert [r.body.string_value.encode() for r in records] == disk  # the very lines on disk
    attrs = [_attrs(r.attributes) for r in records]
    assert [a["nexus.hash"] for a in attrs] == [line_hash(x) for x in disk]
    assert [a["nexus.decision"] for a in attrs] == ["allow", "allow", "deny"]
    assert [r.severity_text for r in records] == ["INFO", "INFO", "WARN"]
    assert all(r.time_unix_nano > 0 for r in records)
    resource = _attrs(receiver.logs()[0].resource.attributes)
    assert resource["service.name"] == "nexusd" and resource["process.pid"] == h.proc.pid
    assert _decisions(receiver) == {("allow", "rule"): 2, ("deny", "rule"): 1}


def test_off_by_default(daemon_factory, receiver: Receiver, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    h = daemon_factory(policy=POLICY)
    with Client(socket_path=str(h.socket), role="agent", name="t") as c:
        c.request(CallInfo("claude", "s", "Bash", {"command": "ls"}, str(tmp_path)), timeout=20)
    time.sleep(1.0)
    assert receiver.requests == []


def test_a_collector_that_fails_does_not_stop_decisions(daemon_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = Receiver(status=503)
    try:
        h = daemon_factory(policy=POLICY, args=("--otel-endpoint", bad.url, "--otel-interval", "0.2"))
        with Client(socket_path=str(h.socket), role="agent", name="t") as c:
            for _ in range(3):
                d = c.request(CallInfo("claude", "s", "Bash", {"command": "ls"}, str(tmp_path)), timeout=20)
                assert d.decision == "allow"
        bad.wait(lambda: bool(bad.requests))
        deadline = time.monotonic() + 30
        while "otel export failing" not in h.log.read_text():
            assert time.monotonic() < deadline, h.log.read_text()
            time.sleep(0.1)
    finally:
        bad.close()


@pytest.mark.parametrize("url", ["localhost:4318", "ftp://x", "http://", "http://h/?q=1"])
def test_a_bad_endpoint_is_a_usage_error(url: str) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "nexusd.cli.daemon_main", "--otel-endpoint", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2 and "--otel-endpoint" in r.stderr, r.stderr


def test_the_queue_is_bounded_and_counts_what_it_drops() -> None:
    from nexusd.daemon import otel

    exp = otel.OtlpExport("http://127.0.0.1:9", interval=3600)  # nobody listens: nothing sent while queued
    try:
        rec = json.loads(
            b'{"time":1.5,"id":"a","provider":"p","session":"s","tool":"Bash","summary":"x",'
            b'"decision":"allow","source":"rule","reason":"r"}'
        )
        from nexusd.protocol import AuditRecord

        record = AuditRecord(**rec)
        for _ in range(otel.MAX_QUEUE + 5):
            exp.send(record, b"{}", "0" * 64)
        assert exp.dropped == 5 and len(exp._queue) == otel.MAX_QUEUE
    finally:
        exp._queue.clear()
        exp.close()
