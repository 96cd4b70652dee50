"""``nexus_clients.leanjson`` reads and writes exactly what ``json`` does with the hook's strict settings,
through ``_json`` and through its fallback, and refuses the same malformed documents."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nexus_clients import leanjson

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@pytest.fixture(params=[True, False], ids=["accelerated", "fallback"])
def paths(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param and not leanjson.ACCELERATED:
        pytest.skip("no _json accelerator on this Python")
    monkeypatch.setattr(leanjson, "ACCELERATED", request.param)
    return bool(request.param)


@given(JSON_VALUES)
def test_dumps_and_loads_agree_with_json(value: Any) -> None:
    for accelerated in {leanjson.ACCELERATED, False}:
        saved = leanjson.ACCELERATED
        leanjson.ACCELERATED = accelerated
        try:
            text = leanjson.dumps(value)
            assert text == json.dumps(value, separators=(",", ":"), allow_nan=False)
            assert leanjson.loads(text) == json.loads(text)
            assert leanjson.loads(f" \n{json.dumps(value, indent=2)}\t ") == value
        finally:
            leanjson.ACCELERATED = saved


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "NaN",
        "[Infinity]",
        '{"a": -Infinity}',
        "[1e999]",
        "{'a': 1}",
        '{"a": 1,}',
        "[1] [2]",
        '{"a": 1} x',
        "tru",
        '"\\x"',
        '"unterminated',
        '"\x01"',  # a control character inside a string (strict)
        "[" * 100_000,
    ],
)
def test_malformed_documents_are_refused(paths: bool, text: str) -> None:
    with pytest.raises(leanjson.JSONError):
        leanjson.loads(text)


def test_nan_and_infinity_are_never_written(paths: bool) -> None:
    for bad in (math.nan, math.inf, -math.inf, [1, {"x": math.inf}]):
        with pytest.raises(ValueError):
            leanjson.dumps(bad)


def test_lone_surrogates_are_escaped_when_written_and_found_when_checked(paths: bool) -> None:
    assert leanjson.dumps("a\ud800") == '"a\\ud800"'
    with pytest.raises(UnicodeEncodeError):
        leanjson.utf8_checked({"k": ["ok", "\udfff"]})
    leanjson.utf8_checked({"k": ["ok", "é", "\U0001f600"]})


def test_a_fresh_interpreter_reads_and_refuses_without_importing_json_or_re() -> None:
    """The point of the module: its error path included, nothing of json.decoder's regexes is loaded."""
    root = str(Path(leanjson.__file__).parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {root!r}); from nexus_clients import leanjson\n"
        "assert leanjson.loads(' {\"a\": [1, 2.5, \"\\\\u00e9\"]} ') == {'a': [1, 2.5, 'é']}\n"
        "assert leanjson.dumps({'a': 'é'}) == '{\"a\":\"\\\\u00e9\"}'\n"
        "print(sorted(m for m in ('json', 'json.decoder', 're', 'typing') if m in sys.modules))\n"
        "try:\n    leanjson.loads('{\"a\": 1,}')\nexcept leanjson.JSONError as e:\n    print('refused', e)\n"
    )
    out = subprocess.run([sys.executable, "-IS", "-c", code], capture_output=True, text=True, check=True).stdout
    first, second = out.splitlines()
    assert first == "[]"
    assert second.startswith("refused ") and "line 1" in second  # json's own precise message, read on failure
