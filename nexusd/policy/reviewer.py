"""Auto mode's reviewer: the policy's external ``classifier`` command, run on the request (JSON on stdin)
for a verdict on stdout. Not to be confused with ``nexusd.core.classify``, the static analysis of a call.

Answer ``{"decision": "allow" | "block", "reason": "..."}`` (Claude's ``{"shouldBlock": bool}`` is
accepted too). Anything else is an error, which the engine turns into the policy's ``on_error``:
deny (fail closed, the default) or a person (fail open) — never an allow.
"""

from __future__ import annotations

import json
from typing import Any

from nexusd.core.engine import ClassifierAnswer
from nexusd.core.policy.policy import ClassifierSpec
from nexusd.policy.hooks import run_command


def parse_review(code: int | None, out: bytes, error: str) -> ClassifierAnswer:
    """The command's exit code and output as an answer; anything unexpected is an error (never an allow)."""
    if error:
        return ClassifierAnswer("error", error)
    if code != 0:
        return ClassifierAnswer("error", f"exited {code}")
    try:
        doc: Any = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ClassifierAnswer("error", "printed no JSON answer")
    if not isinstance(doc, dict):
        return ClassifierAnswer("error", "answer is not an object")
    reason = str(doc.get("reason") or "")[:500]
    decision = doc.get("decision")
    if decision is None and isinstance(doc.get("shouldBlock"), bool):
        decision = "block" if doc["shouldBlock"] else "allow"
    if decision == "allow":
        return ClassifierAnswer("allow", reason)
    if decision in ("block", "deny"):
        return ClassifierAnswer("deny", reason)
    return ClassifierAnswer("error", "answered without a valid decision (allow or block)")


async def run_reviewer(spec: ClassifierSpec, payload: bytes) -> ClassifierAnswer:
    """Run the reviewer command on ``payload`` within its timeout."""
    code, out, _err, error = await run_command(spec.command, payload, spec.timeout)
    return parse_review(code, out, error)
