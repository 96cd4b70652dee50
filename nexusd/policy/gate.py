"""The daemon's one entry into policy: run the engine, and any hooks/classifier it needs (I/O).

INTERIM: calls the engine directly. The policy-engine issue fills in hooks and the auto-mode
classifier here, keeping this signature.
"""

from __future__ import annotations

from nexusd.core.engine import evaluate
from nexusd.core.model import Session
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxProbe, Verdict


async def decide(
    call: CallInfo,
    store: PolicyStore,
    session: Session,
    *,
    dry_run: bool = False,
    sandbox: SandboxProbe | None = None,
) -> Verdict:
    """Never raises for a bad call: the caller still wraps it and turns any exception into deny."""
    return evaluate(call, store.policy, session)
