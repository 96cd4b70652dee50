"""The decision function: ``evaluate(call, policy, session, ...) -> Verdict``.

INTERIM (issue 2): seed 004's tier table. The policy-engine issue replaces the inside of this module,
not its shape: the daemon only ever reaches it through ``nexusd.policy.gate.decide``.
"""

from __future__ import annotations

import msgspec

from nexusd.core.model import Session
from nexusd.protocol import CallInfo, TraceStep, Verdict

SAFE_TOOLS = frozenset({"read_file", "list_files", "search_files", "Read", "Glob", "Grep", "LS", "view_image"})


class Policy(msgspec.Struct, frozen=True):
    """Interim: no rules yet."""


def evaluate(call: CallInfo, policy: Policy, session: Session) -> Verdict:
    if call.tool in SAFE_TOOLS:
        return Verdict("allow", f"{call.tool} is a safe tool", "mode", trace=[TraceStep("mode", "allow")])
    return Verdict("ask", f"{call.tool} needs a person", "mode", trace=[TraceStep("escalation", "ask")])
