"""The egress proxy's cost: per request through it vs direct, a large download through CONNECT vs direct,
and what a filtered network adds to a sandboxed command's start.

``python -m nexusd.bench.proxy [--requests 300] [--megabytes 200] [--rounds 5] [--starts 10]`` starts a throwaway
daemon (temporary socket, config and state) whose policy allows ``localhost`` on the benchmark's ports,
and loopback servers in a process of their own. The same client script runs on the host (direct) and in
a real filtered sandbox (``nexusctl run``), where it reaches the servers only through the daemon's proxy,
on the ports the joiner made on the sandbox's loopback. Prints one JSON object (the download ratio also
per round, against the direct round just before it: on a shared machine the spread is the honest
figure); figures are in docs/PERFORMANCE.md.
Not a test: nothing is timed against a threshold here.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERVER = r"""
import socket, sys, threading
small = socket.create_server(("127.0.0.1", 0)); big = socket.create_server(("127.0.0.1", 0))
size = int(sys.argv[1]); blob = memoryview(bytes(1 << 20))
print(small.getsockname()[1], big.getsockname()[1], flush=True)
def head(c):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = c.recv(65536)
        if not chunk: return False
        data += chunk
    return True
def one_small(c):
    with c:
        if head(c): c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
def one_big(c):
    with c:
        if not head(c): return
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
        left = size
        while left > 0:
            n = min(left, len(blob)); c.sendall(blob[:n]); left -= n
def loop(s, fn):
    while True:
        c, _ = s.accept(); threading.Thread(target=fn, args=(c,), daemon=True).start()
threading.Thread(target=loop, args=(big, one_big), daemon=True).start()
loop(small, one_small)
"""

CLIENT = r"""
import json, socket, sys, time
mode, small, big, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def drain(s):
    total = 0; buf = bytearray(1 << 18)
    while True:
        k = s.recv_into(buf)
        if not k: return total
        total += k
def request(port):
    if mode == "direct":
        s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    else:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"GET http://localhost:%d/ HTTP/1.1\r\nHost: localhost\r\n\r\n" % port)
    return s
def download(port):
    if mode == "direct":
        s = socket.create_connection(("127.0.0.1", port))
    else:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"CONNECT localhost:%d HTTP/1.1\r\n\r\n" % port)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert head.startswith(b"HTTP/1.1 200"), head
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    return s
with request(small) as s: drain(s)  # the first connection carries the decision
lat = []
for _ in range(n):
    t = time.perf_counter()
    with request(small) as s: drain(s)
    lat.append(time.perf_counter() - t)
t = time.perf_counter()
with download(big) as s: got = drain(s)
took = time.perf_counter() - t
print(json.dumps({"latencies": lat, "bytes": got, "seconds": took}))
"""


def _daemon(root: Path, ports: tuple[int, int]) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    run, cfg, state, managed = root / "run", root / "cfg", root / "state", root / "managed"
    for d in (run, cfg, state, managed):
        d.mkdir(mode=0o700)
    (cfg / "policy.toml").write_text(
        '[sandbox.network]\nmode = "filtered"\nallowed_domains = ["localhost"]\n'
        f"allowed_ports = [{ports[0]}, {ports[1]}]\n"
    )
    env = {
        **os.environ,
        "NEXUS_SOCKET": str(run / "nexusd.sock"),
        "NEXUS_CONFIG_DIR": str(cfg),
        "NEXUS_STATE_DIR": str(state),
        "NEXUS_MANAGED_DIR": str(managed),
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "nexusd")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 15
    while not (run / "nexusd.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the probe
    return proc, env


def _starts(env: dict[str, str], cwd: Path, n: int) -> float:
    """Median wall time of ``nexusctl run -- true``."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).parent / "nexusctl"), "run", "--", "true"],
            env=env,
            cwd=str(cwd),
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m nexusd.bench.proxy")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--megabytes", type=int, default=200)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ns = ap.parse_args(argv)
    size = ns.megabytes * 1024 * 1024
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(size)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    small, big = (int(x) for x in server.stdout.readline().split())
    root = Path(tempfile.mkdtemp(prefix="nxbench", dir="/tmp"))
    daemon, env = _daemon(root, (small, big))
    try:
        args = [str(small), str(big), str(ns.requests), str(size)]
        runs: dict[str, list[dict[str, Any]]] = {"direct": [], "proxy": []}
        for _ in range(ns.rounds):  # interleaved, so that a busy moment of the machine hits both alike
            runs["direct"].append(
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", CLIENT, "direct", *args], check=True, capture_output=True, text=True
                    ).stdout
                )
            )
            r = subprocess.run(
                [
                    str(Path(sys.executable).parent / "nexusctl"),
                    "run",
                    "--",
                    sys.executable,
                    "-I",
                    "-c",
                    CLIENT,
                    "proxy",
                    *args,
                ],
                env=env,
                cwd=str(root),
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            runs["proxy"].append(json.loads(r.stdout))
        filtered = _starts(env, root, ns.starts)
        (root / "cfg" / "policy.toml").write_text('[sandbox.network]\nmode = "isolated"\n')
        time.sleep(1.5)  # hot reload
        isolated = _starts(env, root, ns.starts)
    finally:
        daemon.terminate()
        server.terminate()
        daemon.wait()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)  # the daemon's state, config and socket directory

    def latency(kind: str) -> float:
        return statistics.median(x for run in runs[kind] for x in run["latencies"])

    def speed(kind: str) -> float:
        return statistics.median(run["bytes"] / run["seconds"] for run in runs[kind])

    md, mp, sd, sp = latency("direct"), latency("proxy"), speed("direct"), speed("proxy")
    # each round's proxy download against the direct one just before it (same moment of a shared machine)
    per_round = [
        (p["bytes"] / p["seconds"]) / (d["bytes"] / d["seconds"])
        for d, p in zip(runs["direct"], runs["proxy"], strict=True)
    ]
    out = {
        "request_median_ms": {
            "direct": round(md * 1000, 3),
            "proxy": round(mp * 1000, 3),
            "overhead": round((mp - md) * 1000, 3),
        },
        "download_MBps": {
            "direct": round(sd / 1e6, 1),
            "connect": round(sp / 1e6, 1),
            "ratio": round(sp / sd, 3),
            "ratio_per_round": [round(x, 3) for x in per_round],
            "ratio_per_round_median": round(statistics.median(per_round), 3),
        },
        "download_MB": ns.megabytes,
        "rounds": ns.rounds,
        "sandbox_start_median_ms": {"isolated": round(isolated * 1000, 1), "filtered": round(filtered * 1000, 1)},
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
