"""Risk tiers and the client-side refusal of blanket "always" rules."""

from __future__ import annotations

import pytest
from nexus_clients.tui import risk

from nexusd import protocol


def verdict(flags: list[str] | None = None, requirement: str | None = None, notes: list[str] | None = None):
    details = protocol.CallDetails(kind="shell", tool="Bash", notes=notes or [])
    return protocol.Verdict("ask", "r", "mode", requirement=requirement, flags=flags or [], details=details)


def test_tiers() -> None:
    assert risk.tier(verdict()) == "low"
    assert risk.tier(verdict(requirement="workspace-write")) == "medium"
    assert risk.tier(verdict(["background"])) == "medium"
    assert risk.tier(verdict(["outside_workspace"])) == "high"
    assert risk.tier(verdict(requirement="danger-full-access")) == "high"
    assert risk.tier(verdict(["catastrophic", "outside_workspace"])) == "critical"
    assert risk.is_dangerous(verdict(["protected_path"]))
    assert not risk.is_dangerous(verdict(requirement="workspace-write"))


def test_flag_lines_prefer_the_engines_notes_and_explain_the_rest() -> None:
    lines = risk.flag_lines(verdict(["outside_workspace", "dynamic"], notes=["outside_workspace: /etc/x"]))
    assert lines[0] == "outside_workspace: /etc/x"
    assert any(line.startswith("dynamic:") for line in lines)
    assert len(lines) == 2


@pytest.mark.parametrize(
    "rule",
    [
        "",
        "Bash",
        "Edit",
        "WebFetch",
        "mcp__github",
        "mcp__*",
        "*",
        "Bash(*)",
        "Bash( * )",
        "Bash(:*)",
        "Read(/**)",
        "Edit(**)",
        "Edit(~/**)",
        "Edit(./**)",
        "WebFetch(domain:*)",
        "WebFetch(domain:*.com)",
        "Bash(* --version)",
        "Bash(bash *)",
        "Bash(sh -c *)",
        "Bash(/usr/bin/python3 *)",
        "Bash(sudo *)",
        "Bash(env *)",
        "Bash(xargs *)",
        "not a rule(",
    ],
)
def test_blanket_rules_are_refused(rule: str) -> None:
    assert risk.blanket_reason(rule)


@pytest.mark.parametrize(
    "rule",
    [
        "Bash(git push origin *)",
        "Bash(npm run test *)",
        "Bash(npm run test:*)",
        "Read(src/**)",
        "Edit(/home/dev/project/src/**)",
        "WebFetch(domain:docs.python.org)",
        "WebFetch(domain:*.python.org)",
        "mcp__github__create_issue",
        "Bash(python3 scripts/build.py)",
    ],
)
def test_narrow_rules_pass(rule: str) -> None:
    assert risk.blanket_reason(rule) is None


def test_exact_rule_for_never() -> None:
    def c(tool: str, inp: dict) -> protocol.CallInfo:
        return protocol.CallInfo("claude", "s", tool, inp, "/w")

    plain = protocol.Verdict("ask", "r", "mode")
    assert risk.exact_rule(c("Bash", {"command": " git push -f "}), plain) == "Bash(git push -f)"
    assert risk.exact_rule(c("Write", {"file_path": "/w/a"}), plain) == "Write(/w/a)"
    fetch = protocol.Verdict("ask", "r", "mode", details=protocol.CallDetails("fetch", "WebFetch", domain="x.org"))
    assert risk.exact_rule(c("web_fetch", {"url": "https://x.org/a"}), fetch) == "WebFetch(domain:x.org)"
    assert risk.exact_rule(c("mcp__gh__merge", {"pr": 1}), plain) == "mcp__gh__merge"
