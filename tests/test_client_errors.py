"""Each client failure says itself by its type (nexusd/client_errors.py), the same in the hook and nexus-mcp,
and nothing a failure says reads like an allow."""

from __future__ import annotations

import pytest
from nexus_clients import hook, leanjson, mcp_bridge
from nexus_clients.claude import HookInputError

from nexusd import client_errors as ce

ERRORS: list[tuple[BaseException, str]] = [
    (ce.DaemonUnreachable("cannot connect"), "the nexusd daemon is not reachable (is nexusd running?)"),
    (ce.ReplyTimeout("late"), "no decision from nexusd within 7 s"),
    (ce.BadReply("garbage"), "nexusd sent a reply nexus-hook could not understand"),
    (ce.ClientError("wrong_role", "agents cannot do that"), "nexusd refused the request: agents cannot do that"),
    (ce.NexusClientError("other"), "nexus-hook could not talk to nexusd"),
    (TimeoutError(), "no decision from nexusd within 7 s"),
    (RuntimeError("x"), "nexus-hook failed (RuntimeError)"),
]


@pytest.mark.parametrize(("exc", "said"), ERRORS, ids=[type(e).__name__ for e, _ in ERRORS])
def test_every_failure_is_described_by_its_type(exc: BaseException, said: str) -> None:
    assert ce.describe(exc, "nexus-hook", 7.0) == said
    assert hook.describe(exc, 7.0) == said


def test_a_subclass_is_said_as_its_own_type_not_by_its_name() -> None:
    class Renamed(ce.BadReply):
        pass

    assert hook.describe(Renamed("x"), 7.0) == "nexusd sent a reply nexus-hook could not understand"
    assert ce.describe(ce.ReplyTimeout("x"), "nexus-mcp") == "no decision from nexusd in time"


def test_the_mcp_bridge_says_the_same_with_its_own_name() -> None:
    assert mcp_bridge.describe(ce.BadReply("x")) == "nexusd sent a reply nexus-mcp could not understand"
    assert mcp_bridge.describe(ce.DaemonUnreachable("x")) == ce.DaemonUnreachable("x").describe("nexus-mcp")


@pytest.mark.parametrize(
    "exc",
    [
        HookInputError("no tool_name"),
        leanjson.JSONError("Expecting value: line 1 column 1 (char 0)"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ],
)
def test_the_hook_says_unreadable_input_for_its_input_errors(exc: BaseException) -> None:
    assert hook.describe(exc, 7.0).startswith("unreadable hook input: ")


def test_the_hook_says_its_own_deadline_and_misuse() -> None:
    assert hook.describe(hook.HookDeadline(), 7.0) == "no decision from nexusd within 7 s"
    assert hook.describe(hook.UsageError("--timeout"), 7.0) == "nexus-hook is misconfigured: --timeout"
