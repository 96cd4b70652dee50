#!/usr/bin/env python3
"""`nexus-hook claude` whole process vs `python3 -c 'import socket, json'` in the same run (issue 8).

Usage: benchmarks/hook_process.py [--runs N] [--json] [--out FILE]"""

from __future__ import annotations

import argparse

from nexusd.bench import hook, report

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = hook.run(a.runs, a.warmup)
    report.emit(out, hook.render(out), as_json=a.json, path=a.out)
