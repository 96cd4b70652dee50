"""The pending table on its own: packing round-trips, a request is claimed once, deadlines deny in order.

The wire behaviour (first answer wins, timeouts deny, disconnects cancel) is tested against the real daemon
in ``test_server.py``; these pin the table's own contract. Connections here are real ``Connection``
objects that never get a transport: the table only reads their ``pending`` list and ``peer``.
"""

from __future__ import annotations

import time

import anyio
import pytest

from nexusd import protocol as p
from nexusd.daemon.connection import Connection
from nexusd.daemon.pending import PACK_ABOVE, PendingEntry, PendingTable, pack, unpack


def _entry(rid: str, conn: Connection, deadline: float) -> PendingEntry:
    verdict = p.encode(p.Verdict("ask", "needs a person", "mode")).rstrip(b"\n")
    call = b'{"provider":"claude","session":"s","tool":"Bash","input":{"command":"ls"},"cwd":"/tmp"}'
    now = time.time()
    return PendingEntry(rid, call, pack(verdict), conn, None, now, now + 1, deadline, time.monotonic())


def test_pack_round_trips() -> None:
    data = p.encode(p.Verdict("ask", "Bash needs danger-full-access; mode default asks", "mode"))
    assert unpack(pack(data)) == data
    assert len(pack(data)) < len(data)


@pytest.mark.parametrize("waiting", [0, 1, PACK_ABOVE - 1, PACK_ABOVE, 10_000])
def test_pack_is_plain_while_few_wait_and_deflated_when_many(waiting: int) -> None:
    """Few pending: the verdict stays JSON (no deflate/inflate per ask); many: deflated (memory). Either
    form unpacks to the same bytes, and a deflated one never passes for JSON."""
    data = p.encode(p.Verdict("ask", "Bash needs danger-full-access; mode default asks", "mode")).rstrip(b"\n")
    packed = pack(data, waiting)
    assert unpack(packed) == data
    if waiting < PACK_ABOVE:
        assert packed is data
    else:
        assert len(packed) < len(data) and packed[:1] != b"{"
    assert p.decode_server(p.encode(p.Prompt(item=_entry_with(packed).item()))).item.verdict.reason.startswith("Bash")


def _entry_with(verdict_raw: bytes) -> PendingEntry:
    call = b'{"provider":"claude","session":"s","tool":"Bash","input":{"command":"ls"},"cwd":"/tmp"}'
    now = time.time()
    return PendingEntry("x", call, verdict_raw, Connection(None), None, now, now + 1, now + 1, time.monotonic())  # type: ignore[arg-type]


def test_claimed_once_and_remembered_as_decided() -> None:
    table = PendingTable()
    conn = Connection(None)  # type: ignore[arg-type]
    entry = _entry("a", conn, time.monotonic() + 60)
    table.add(entry)
    assert table.get("a") is entry and len(table) == 1 and conn.pending == ["a"]
    assert not table.decided("a")
    table.claim(entry)
    assert table.get("a") is None and len(table) == 0 and conn.pending == []
    assert table.decided("a")
    assert entry.verdict.decision == "ask"


@pytest.mark.anyio
async def test_timer_expires_earliest_first_and_skips_claimed() -> None:
    table = PendingTable()
    conn = Connection(None)  # type: ignore[arg-type]
    expired: list[str] = []

    def expire(entry: PendingEntry) -> None:
        expired.append(entry.id)
        table.claim(entry)

    now = time.monotonic()
    late, early, gone = _entry("late", conn, now + 0.2), _entry("early", conn, now + 0.05), _entry("gone", conn, now)
    table.add(late)
    table.add(gone)
    table.claim(gone)  # answered before its deadline: the timer must not touch it
    async with anyio.create_task_group() as tg:
        tg.start_soon(table.run_timer, expire)
        await anyio.sleep(0)
        table.add(early)  # earlier than the heap's head: wakes the timer
        with anyio.fail_after(5):
            while len(expired) < 2:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert expired == ["early", "late"]
    assert len(table) == 0
