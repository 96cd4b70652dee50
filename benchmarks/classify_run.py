#!/usr/bin/env python3
"""Classification of the corpus: median and p99 per command, held to issue 8's target.

The timing loop is benchmarks/classify_bench.py (the classifier's own); this adds the target check and
the shared report format. Usage: benchmarks/classify_run.py [--corpus FILE] [--json] [--out FILE]"""

from __future__ import annotations

import argparse
from pathlib import Path

from nexusd.bench import classify, report

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = classify.run(a.corpus)
    report.emit(out, classify.render(out), as_json=a.json, path=a.out)
