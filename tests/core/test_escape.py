"""Escape requests (``nexusd/core/escape.py``): only the exact forms count; the summary names what leaves."""

from __future__ import annotations

import pytest

from nexusd.core.escape import MARKER, escape_request, escape_summary, how_to_escape
from nexusd.core.model import Classification, Command, Requirement, ToolKind


@pytest.mark.parametrize(
    ("tool_input", "want"),
    [
        ({"command": "ls", "dangerouslyDisableSandbox": True}, ""),
        ({"command": "ls", "dangerouslyDisableSandbox": True, "description": "  push   it "}, "push it"),
        ({"command": "ls", "sandbox_permissions": "require_escalated", "justification": "host"}, "host"),
        ({"command": "ls", "with_escalated_permissions": True}, ""),
        ({"command": f"{MARKER}\nls"}, ""),
        ({"command": " #  NEXUS : outside-sandbox \r\nls"}, ""),
        ({"command": MARKER}, ""),
        ({"command": "ls", "dangerouslyDisableSandbox": False}, None),
        ({"command": "ls", "dangerouslyDisableSandbox": "true"}, None),  # a string is no request
        ({"command": "ls", "dangerouslyDisableSandbox": 1}, None),
        ({"command": "ls", "sandbox_permissions": "use_default"}, None),
        ({"command": f"ls\n{MARKER}"}, None),  # only as the first line
        ({"command": f"echo '{MARKER}'"}, None),
        ({"command": "# nexus: outside-sandboxes\nls"}, None),
    ],
)
def test_only_explicit_requests_count(tool_input: dict[str, object], want: str | None) -> None:
    command = tool_input.get("command")
    assert escape_request(tool_input, command if isinstance(command, str) else None) == want


def test_each_agent_is_told_in_its_own_terms() -> None:
    assert '"dangerouslyDisableSandbox": true' in how_to_escape("Bash")
    assert MARKER in how_to_escape("run_shell_command") and "dangerously" not in how_to_escape("bash")


def test_the_summary_names_writes_network_and_reads_outside() -> None:
    cls = Classification(
        kind=ToolKind.SHELL,
        tool="Bash",
        requirement=Requirement.READ_ONLY,
        commands=(Command(argv=("git", "push", "origin", "main")), Command(argv=("curl", "-s", "x"))),
        writes=("/ws/a", "/srv/out"),
        reads=("/ws/b", "/etc/hosts"),
    )
    text = escape_summary(cls, "/ws")
    assert "writes outside the workspace: /srv/out" in text and "/ws/a" not in text
    assert "network: git push, curl -s" in text and "reads outside the workspace: /etc/hosts" in text
    bare = Classification(kind=ToolKind.SHELL, tool="Bash", requirement=Requirement.READ_ONLY)
    assert "credentials" in escape_summary(bare, "/ws")
