"""Protocol data for TUI tests: pending items as the daemon would send them, at a fixed time."""

from __future__ import annotations

from typing import Any

from nexusd import protocol

T0 = 1_750_000_000.0  # the frozen "now" of snapshot tests


def item(
    n: int,
    tool: str = "Bash",
    tool_input: dict[str, Any] | None = None,
    *,
    provider: str = "claude",
    session: str = "sess-alpha",
    cwd: str = "/home/dev/project",
    verdict: protocol.Verdict | None = None,
    created: float | None = None,
    ttl: float = 30.0,
) -> protocol.PendingItem:
    created = T0 - 10 + n if created is None else created
    call = protocol.CallInfo(
        provider=provider,
        session=session,
        tool=tool,
        input=tool_input if tool_input is not None else {"command": f"echo {n}"},
        cwd=cwd,
        workspace=cwd,
    )
    v = verdict or protocol.Verdict(decision="ask", reason="no rule matched: a person decides", source="default")
    return protocol.PendingItem(id=f"{n:032x}", call=call, verdict=v, created=created, deadline=created + ttl)


def shell_verdict() -> protocol.Verdict:
    return protocol.Verdict(
        decision="ask",
        reason="git push needs a person",
        source="mode",
        requirement="workspace-write",
        suggestions=["Bash(git push origin *)"],
        details=protocol.CallDetails(
            kind="shell",
            tool="Bash",
            commands=[["git", "add", "-A"], ["git", "push", "origin", "main"]],
            reads=["/home/dev/project"],
            writes=["/home/dev/project/.git/index"],
        ),
    )


def danger_verdict() -> protocol.Verdict:
    return protocol.Verdict(
        decision="ask",
        reason="catastrophic command",
        source="safety",
        requirement="danger-full-access",
        flags=["catastrophic", "outside_workspace"],
        suggestions=["Bash(rm -rf /tmp/build)"],
        details=protocol.CallDetails(
            kind="shell",
            tool="Bash",
            commands=[["rm", "-rf", "/"]],
            writes=["/"],
            notes=["catastrophic: rm -rf /", "writes outside the workspace: /"],
        ),
    )
