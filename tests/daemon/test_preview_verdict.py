"""A preview's verdict (``requests.preview_verdict``): always a person's, and a malformed one is discarded.

The preview's input comes from the wrapper's side (``nexusd.sandbox.previewrun``), which runs in the agent's
environment: every field is checked before any of it is shown to a person. The daemon round trip is
``tests/sandbox/test_preview_daemon.py``; this is the pure part, over many shapes."""

from __future__ import annotations

from typing import Any

import pytest

from nexusd import protocol as p
from nexusd.core.engine import HUMAN_FLAG
from nexusd.daemon.requests import preview_verdict
from nexusd.sandbox.previewrun import PREVIEW_FLAG, PREVIEW_TOOL

GOOD: dict[str, Any] = {"command": "make", "exit_code": 0, "summary": "2 files", "changes": [], "diff": ""}


def _call(inp: dict[str, Any]) -> p.CallInfo:
    return p.CallInfo("claude", "s", PREVIEW_TOOL, inp, "/w", workspace="/w")


def test_a_well_formed_preview_is_put_to_a_person_only() -> None:
    v = preview_verdict(_call(GOOD))
    assert v.decision == "ask" and v.source == "safety"
    assert HUMAN_FLAG in v.flags and PREVIEW_FLAG in v.flags  # no rule, mode or hook may settle it
    assert "`make`" in v.reason and "/w" in v.reason and "exit 0" in v.reason


def test_conflicts_are_named_in_the_ask() -> None:
    v = preview_verdict(_call({**GOOD, "conflicts": ["a.py", "b.py"]}))
    assert v.decision == "ask" and "2 path(s) changed" in v.reason and "a.py, b.py" in v.reason


@pytest.mark.parametrize(
    "inp",
    [
        {k: v for k, v in GOOD.items() if k != "diff"},  # a field missing
        {**GOOD, "exit_code": "0"},  # a wrong type
        {**GOOD, "changes": "x"},
        {**GOOD, "command": None},
        {**GOOD, "conflicts": "a.py"},  # conflicts must be a list
        {**GOOD, "apply": True},  # an unknown key
        {},
    ],
)
def test_a_malformed_preview_is_discarded(inp: dict[str, Any]) -> None:
    v = preview_verdict(_call(inp))
    assert v.decision == "deny" and v.source == "error" and "malformed preview" in v.reason


def test_a_long_command_is_cut_in_the_question() -> None:
    v = preview_verdict(_call({**GOOD, "command": "x" * 5000}))
    assert v.decision == "ask" and "x" * 300 in v.reason and "x" * 301 not in v.reason
