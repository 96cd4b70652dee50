#!/usr/bin/env python3
"""The wire scenarios with the echo floor (same as `nexusctl bench --baseline`); forwards its flags.

Usage: benchmarks/wire.py [nexusctl bench flags]"""

from __future__ import annotations

import sys

from nexusd.cli.ctl import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
