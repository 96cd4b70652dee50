#!/usr/bin/env python3
"""Daemon start-to-ready and idle RSS (issue 8). Usage: benchmarks/startup.py [--runs N] [--json] [--out FILE]"""

from __future__ import annotations

import argparse

from nexusd.bench import report, startup

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--settle", type=float, default=0.5, help="seconds after ready before reading RSS")
    ap.add_argument("--uvloop", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = startup.run(a.runs, a.settle, uvloop=a.uvloop)
    report.emit(out, startup.render(out), as_json=a.json, path=a.out)
