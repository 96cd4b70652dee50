"""How a shell command runs sandboxed. INTERIM: refuses until the sandbox issue lands."""

from __future__ import annotations

from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxPlan, SandboxProbe, Verdict


def plan_command(
    command: str, cwd: str, store: PolicyStore, probe: SandboxProbe | None, session: str | None = None
) -> SandboxPlan:
    return SandboxPlan(allowed=False, reason="sandboxed execution is not available yet")


def wrap_for_agent(
    call: CallInfo, verdict: Verdict, store: PolicyStore, probe: SandboxProbe | None
) -> dict[str, object] | None:
    """The updated tool input that runs an allowed shell call sandboxed, or None to run it as is."""
    return None
