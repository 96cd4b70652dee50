#!/usr/bin/env python3
"""`nexus-mcp`: process start until tools/list is answered (issue 8).

Usage: benchmarks/mcp_ready.py [--runs N] [--json] [--out FILE]"""

from __future__ import annotations

import argparse

from nexusd.bench import mcp, report

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = mcp.run(a.runs, a.warmup)
    report.emit(out, mcp.render(out), as_json=a.json, path=a.out)
