from __future__ import annotations

import math

from nexusd.bench import report


def test_check_directions() -> None:
    assert report.check(1.0, 1.5) == "pass"
    assert report.check(2.0, 1.5) == "MISS"
    assert report.check(0.7, 0.6, at_least=True) == "pass"
    assert report.check(0.5, 0.6, at_least=True) == "MISS"
    assert report.check(None, 1.0) == "n/a"
    assert report.check(math.nan, 1.0) == "n/a"


def test_table_aligns_columns() -> None:
    text = report.table(["name", "n"], [["a", 1], ["longer", 12345.678]])
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("name")
    assert "12,345.7" in lines[3]
    assert len({len(line) for line in lines[1:]}) == 1  # numbers right-aligned to one width


def test_machine_info_has_the_facts_docs_need() -> None:
    m = report.machine_info()
    assert m["nproc"] >= 1
    assert m["cpu"]
    assert m["python"].count(".") == 2
