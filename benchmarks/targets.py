#!/usr/bin/env python3
"""Issue 8's target table from saved results: benchmarks/targets.py [RESULT_DIR] [--markdown]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nexusd.bench import report

ORDER = ["wire", "hook_process", "mcp_ready", "pending_10k", "pending_10k_conns", "classify", "startup"]


def main(argv: list[str]) -> int:
    markdown = "--markdown" in argv
    args = [a for a in argv if a != "--markdown"]
    d = Path(args[0]) if args else Path(__file__).with_name("results")
    rows = []
    for name in ORDER:
        f = d / f"{name}.json"
        if not f.is_file():
            rows.append([name, "-", "-", "not run"])
            continue
        data = json.loads(f.read_text())
        for c in data.get("checks", []):
            rows.append([c["metric"], c["value"], c["target"], c["result"]])
    if markdown:
        print("| metric | measured | target | result |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {report.fmt(r[1], 2) if not isinstance(r[1], str) else r[1]} | {r[2]} | {r[3]} |")
    else:
        print(report.table(["target", "value", "goal", "result"], rows))
    return 1 if any(r[3] == "MISS" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
