"""External hook commands (decision step 2): the request as JSON on stdin, a decision on stdout.

Answer: ``{"decision": "allow" | "ask" | "deny", "reason": "..."}`` and exit 0. Exit 2 is a deny
(stderr is the reason), as with Claude Code's hooks. Anything else — another exit code, no JSON, an
unknown decision, a timeout, a command that cannot start — counts as the hook's ``on_error``
(deny unless configured). Hooks run concurrently; each is killed at its timeout.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterable, Sequence
from typing import Any

import anyio

from nexusd.core.engine import HookAnswer
from nexusd.core.policy.policy import HookSpec

MAX_OUTPUT = 64 * 1024


async def run_command(argv: Sequence[str], payload: bytes, timeout: float) -> tuple[int | None, bytes, bytes, str]:
    """Run one command with ``payload`` on stdin. Returns (exit code or None, stdout, stderr, error).

    A command may answer without reading its stdin (and exit before we finish writing it): that is not
    an error. Output past ``MAX_OUTPUT`` is read and dropped, so a chatty hook cannot fill memory."""
    out, err = bytearray(), bytearray()

    async def drain(stream: AsyncIterable[bytes], into: bytearray) -> None:
        async for chunk in stream:
            if len(into) < MAX_OUTPUT:
                into += chunk[: MAX_OUTPUT - len(into)]

    try:
        with anyio.fail_after(timeout):
            async with await anyio.open_process(list(argv), env={**os.environ, "NEXUS_HOOK": "1"}) as proc:
                assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain, proc.stdout, out)
                    tg.start_soon(drain, proc.stderr, err)
                    try:
                        await proc.stdin.send(payload)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass  # it stopped reading: its answer (or exit code) still counts
                    finally:
                        await proc.stdin.aclose()
                    code = await proc.wait()
    except TimeoutError:
        return None, b"", b"", f"timed out after {timeout:g}s"
    except OSError as e:
        return None, b"", b"", f"cannot run {argv[0]}: {e.strerror or e}"
    return code, bytes(out), bytes(err), ""


def parse_answer(code: int | None, out: bytes, err: bytes, error: str) -> tuple[str | None, str, str | None]:
    """(decision or None for on_error, reason, error text)."""
    if error:
        return None, "", error
    if code == 2:
        return "deny", err.decode("utf-8", "replace").strip()[:500] or "hook exited 2", None
    if code != 0:
        return None, "", f"exited {code}"
    try:
        doc: Any = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "", "printed no JSON answer"
    if not isinstance(doc, dict) or doc.get("decision") not in ("allow", "ask", "deny"):
        return None, "", "answered without a valid decision (allow, ask or deny)"
    reason = doc.get("reason", "")
    return doc["decision"], str(reason)[:500] if reason is not None else "", None


async def run_hooks(hooks: Sequence[HookSpec], payload: bytes) -> list[HookAnswer]:
    """Every applicable hook, concurrently; answers in the policy's order."""
    answers: list[HookAnswer | None] = [None] * len(hooks)

    async def one(i: int, h: HookSpec) -> None:
        code, out, err, error = await run_command(h.command, payload, h.timeout)
        decision, reason, problem = parse_answer(code, out, err, error)
        if decision is None:
            answers[i] = HookAnswer(h, h.on_error, reason, problem or "failed")
        else:
            answers[i] = HookAnswer(h, decision, reason)  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        for i, h in enumerate(hooks):
            tg.start_soon(one, i, h)
    return [a if a is not None else HookAnswer(h, "deny", "", "no answer") for a, h in zip(answers, hooks, strict=True)]
