#!/usr/bin/env python3
"""10,000 requests pending at once: RSS over idle and lateness of the automatic deny (issue 8).

Usage: benchmarks/pending_10k.py [--total N] [--connections C] [--timeout S] [--json] [--out FILE]
       [-- extra daemon flags]"""

from __future__ import annotations

import argparse

from nexusd.bench import pending, report

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--total", type=int, default=10_000)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=20.0, help="the daemon's pending deadline (s)")
    ap.add_argument("--uvloop", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("daemon_args", nargs="*", help="extra nexusd flags (after --)")
    a = ap.parse_args()
    out = pending.run(a.total, a.connections, a.timeout, daemon_args=a.daemon_args, uvloop=a.uvloop)
    report.emit(out, pending.render(out), as_json=a.json, path=a.out)
