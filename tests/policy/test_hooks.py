"""Running hook commands for real: answers, exit codes, timeouts, and commands that ignore their input."""

from __future__ import annotations

import time

import pytest

from nexusd.core.policy.policy import HookSpec
from nexusd.policy.hooks import MAX_OUTPUT, run_command, run_hooks

pytestmark = pytest.mark.anyio

BIG = b"x" * (1024 * 1024)  # far more than a pipe holds: writing it blocks until the reader is gone


async def test_answer_without_reading_stdin_counts():
    """A hook that answers at once and exits before its stdin is written must not turn into an error."""
    code, out, _err, error = await run_command(["sh", "-c", 'echo \'{"decision": "allow"}\''], BIG, 5)
    assert (code, error) == (0, "") and b"allow" in out
    answers = await run_hooks([HookSpec(command=("sh", "-c", 'echo \'{"decision": "deny", "reason": "no"}\''))], BIG)
    assert (answers[0].decision, answers[0].reason, answers[0].error) == ("deny", "no", None)


async def test_exit_code_and_input_reach_the_hook():
    code, out, err, error = await run_command(["sh", "-c", "wc -c; echo oops >&2; exit 2"], b"12345", 5)
    assert (code, out.strip(), err.strip(), error) == (2, b"5", b"oops", "")


async def test_output_is_capped():
    code, out, _err, _error = await run_command(["sh", "-c", "head -c 5000000 /dev/zero"], b"", 10)
    assert code == 0 and len(out) == MAX_OUTPUT


async def test_timeout_kills_the_command():
    t = time.monotonic()
    code, _out, _err, error = await run_command(["sleep", "30"], b"", 0.3)
    assert code is None and "timed out" in error and time.monotonic() - t < 5


async def test_missing_command():
    code, _out, _err, error = await run_command(["/nonexistent/hook"], b"", 5)
    assert code is None and "cannot run" in error
