"""Every mode name of the agents and the permission models we follow maps to one internal mode."""

from __future__ import annotations

import pytest

from nexusd.core.policy.modes import INTERNAL, MODES, resolve

EXPECTED = {
    "read-only": "read_only",
    "workspace-write": "workspace_write",
    "danger-full-access": "danger_full_access",
    "prompt": "prompt",
    "allow": "allow",
    "default": "default",
    "manual": "default",
    "acceptEdits": "accept_edits",
    "plan": "plan",
    "auto": "auto",
    "dontAsk": "dont_ask",
    "bypassPermissions": "bypass",
    # the Nexus CLI's ACCEPT_EDITS and YOLO and Gemini's autoEdit approve edit tools only (was accept_edits,
    # which also allowed deletes, moves and workspace-write shell commands: looser than where they come from)
    # the Nexus CLI's upper-case modes decide by its tool tiers (seed 004): nexus_default, nexus_edits
    "DEFAULT": "nexus_default",
    "CAUTIOUS": "cautious",
    "YOLO": "nexus_edits",
    "PLAN": "plan",
    "ACCEPT_EDITS": "nexus_edits",
    "BYPASS_PERMISSIONS": "bypass",
    "autoEdit": "edits_only",
    "auto_edit": "edits_only",
    "yolo": "bypass",
}


@pytest.mark.parametrize(("name", "internal"), sorted(EXPECTED.items()))
def test_every_name(name, internal):
    spec = resolve(name)
    assert spec is not None and spec.name == internal


def test_table_covers_every_name():
    assert set(EXPECTED) <= {s for s, _, _ in MODES}
    assert all(i in INTERNAL for _, _, i in MODES)


@pytest.mark.parametrize(
    ("loose", "internal"),
    [
        ("accept-edits", "accept_edits"),
        ("DONTASK", "dont_ask"),
        ("Bypass_Permissions", "bypass"),
        ("AUTOEDIT", "edits_only"),
    ],
)
def test_loose_spellings(loose, internal):
    assert resolve(loose).name == internal


def test_unknown_and_case_dependent():
    assert resolve("nonsense") is None and resolve(None) is None
    assert resolve("Yolo") is None  # yolo (Gemini: bypass) vs YOLO (Nexus CLI: edits): only exact spellings


def test_kill_switch_covers_every_full_access_mode():
    """Was {"bypass", "allow"}: danger-full-access kept full access under disable_bypass (a hole)."""
    assert {m.name for m in INTERNAL.values() if m.bypass} == {"bypass", "allow", "danger_full_access"}
    assert all(m.bypass == (m.ceiling == 3) for m in INTERNAL.values())
    assert not INTERNAL["dont_ask"].prompts
