"""One Bash matcher: the policy's rules and the sandbox's excluded_commands answer alike (issue "Close the
gate", class 13: the two disagreed, e.g. on ``*`` inside a word and on a path-named program)."""

from __future__ import annotations

import shlex

import pytest

from nexusd.core.disposition import _match_rule, excluded_rule
from nexusd.core.policy.rules import parse_rule

PATTERNS = ["npm run *", "npm run test:*", "git fetch", "git * main", "make", "docker compose up *", "cargo build*"]
COMMANDS = [
    "npm run test",
    "npm run",
    "npm runner",
    "npm run test -- --watch",
    "git fetch",
    "git fetch origin",
    "git push origin main",
    "git checkout main",
    "make",
    "make all",
    "/usr/bin/make",
    "docker compose up -d",
    "cargo build --release",
    "cargo buildx",
    "npm run test\x00x",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("command", COMMANDS)
def test_policy_and_sandbox_agree(pattern: str, command: str) -> None:
    argv = tuple(shlex.split(command)) if "\x00" not in command else tuple(command.split(" "))
    policy = parse_rule(f"Bash({pattern})", "allow").matches_argv(argv)
    assert _match_rule(pattern, argv) is policy
    assert _match_rule(f"Bash({pattern})", argv) is policy


def test_a_bad_excluded_pattern_is_an_error_at_load() -> None:
    from pathlib import Path

    from nexusd.policy.sandbox_settings import parse_sandbox_layer

    with pytest.raises(ValueError, match="excluded_commands"):
        parse_sandbox_layer({"excluded_commands": ["Bash(npm run :* x)"]}, Path("/p/policy.toml"))
    assert excluded_rule("git fetch").matches_argv(("git", "fetch"))
