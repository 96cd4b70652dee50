"""``nexusctl check --offline``: the daemon's decision for a call, computed in-process from the files.

Same store, same pipeline (``nexusd.decision.pipeline``), same engine as the daemon, run as a check (hooks
and the classifier are not run; the trace says so), with the facts computed in this thread. For CI:
evaluate a policy change without a daemon.
"""

from __future__ import annotations

from pathlib import Path

from nexusd import locations
from nexusd.core.model import Session
from nexusd.decision.pipeline import offline_verdict
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, TraceStep, Verdict


def check_offline(
    call: CallInfo, *, config_dir: Path | None = None, state_dir: Path | None = None, managed_dir: Path | None = None
) -> Verdict:
    store = PolicyStore(
        config_dir=Path(config_dir or locations.config_dir()),
        state_dir=Path(state_dir or locations.state_dir()),
        managed_dir=Path(managed_dir or locations.MANAGED_POLICY),
    )
    errors = store.load()
    session = Session(id=call.session, provider=call.provider, agent_mode=call.mode)
    verdict = offline_verdict(call, store, session)
    if errors:
        verdict.trace.insert(0, TraceStep("policy", "error", "; ".join(errors)))
    return verdict
