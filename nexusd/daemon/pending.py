"""The pending table: requests waiting for a person, kept slim, claimed exactly once, denied at their deadline.

One heap and one timer task serve every deadline. Claiming is synchronous (no await between the lookup
and the removal), so the first answer, cancel, disconnect or timeout wins and every later one finds the
id among the recently decided.
"""

from __future__ import annotations

import contextlib
import heapq
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import anyio
import msgspec

from nexusd import protocol as p

if TYPE_CHECKING:
    from nexusd.daemon.connection import Connection

MAX_RECENT = 50_000  # resolved ids remembered for "already decided"
_EXPIRE_BATCH = 256  # deadlines handled before the timer yields to the event loop


class PendingEntry:
    """A request waiting for a person. Slim on purpose (10,000 at once): the call is kept as its compact
    JSON and the verdict as JSON (deflated once many wait: ``pack``), which is what UIs receive anyway,
    decoded again only when the entry is resolved or answered (a few microseconds, off the hot path)."""

    __slots__ = (
        "_guard",
        "_verdict",
        "call_raw",
        "conn",
        "created",
        "deadline",
        "deadline_wall",
        "id",
        "limit",
        "ref",
        "started",
        "steps",
        "verdict_raw",
    )

    def __init__(
        self,
        rid: str,
        call_raw: bytes,
        verdict_raw: bytes,
        conn: Connection,
        ref: str | None,
        created: float,
        deadline_wall: float,
        deadline: float,
        started: float,
        guard: frozenset[int] = frozenset(),
        limit: float | None = None,
    ) -> None:
        self.id = rid
        self.call_raw = call_raw
        self.verdict_raw = verdict_raw
        self.conn = conn
        self.ref = ref
        self.created = created  # unix time
        self.deadline_wall = deadline_wall  # unix time, as announced
        self.deadline = deadline  # monotonic, for the timer
        self.started = started  # monotonic, for latency
        # monotonic: how far a person's hold may push ``deadline`` (the requester's own wait, less a margin)
        self.limit = deadline if limit is None else max(deadline, limit)
        # the requesting agent's pids: answers from below them are refused. Kept as a tuple (a frozenset of
        # two pids is 216 bytes, 10,000 pending hold 2 MB of them); the set is made when an answer comes.
        self._guard = tuple(guard)
        self._verdict: p.Verdict | None = None  # decoded once when first needed (a resolution reads it twice)
        # what was learned while it waited, for its record: the hooks' answers when a person was asked while
        # they ran (``RequestLifecycle.hooks_answered``)
        self.steps: tuple[p.TraceStep, ...] = ()

    @property
    def guard(self) -> frozenset[int]:
        return frozenset(self._guard)

    @property
    def call(self) -> p.CallInfo:
        return _call_decoder.decode(self.call_raw)

    @property
    def verdict(self) -> p.Verdict:
        if self._verdict is None:
            self._verdict = _verdict_decoder.decode(unpack(self.verdict_raw))
        return self._verdict

    def item(self, verdict_json: bytes | None = None) -> p.PendingItem:
        """As UIs see it; call and verdict go out as the stored JSON, verbatim. ``verdict_json``: the JSON
        this entry's verdict was packed from, when the caller still holds it (the ask's own prompt)."""
        return p.PendingItem(
            id=self.id,
            call=msgspec.Raw(self.call_raw),  # type: ignore[arg-type]
            verdict=msgspec.Raw(verdict_json if verdict_json is not None else unpack(self.verdict_raw)),  # type: ignore[arg-type]
            created=self.created,
            deadline=self.deadline_wall,
            peer_pid=self.conn.peer.pid,
            hold_limit=self.deadline_wall + (self.limit - self.deadline) if self.limit > self.deadline else None,
        )


# A verdict's JSON is mostly the same keys and trace phrases; deflate with them as a preset dictionary
# keeps ~850 bytes in ~130 (5 µs to pack, 2 µs to unpack), 7 MB less for 10,000 pending requests.
_ZDICT = (
    b'"details":{"kind":"shell","tool":"Bash","commands":[["reads":["writes":["domain":"notes":["flags":['
    b'"rule":"rule_origin":"builtin","requirement":"read-only"workspace-write"danger-full-access",'
    b'"suggestions":["Bash(","trace":[{"step":"mode","outcome":"default","detail":"(policy default) -> default"},'
    b'{"step":"deny_rules","outcome":"passed"},{"step":"hooks","outcome":"skipped","detail":"no hook applies"},'
    b'{"step":"ask_rules","outcome":"passed"},{"step":"safety","outcome":"passed"},{"step":"allow_rules",'
    b'"outcome":"passed","detail":"no allow rule covers the call"},{"step":"mode_check","outcome":"passed",'
    b'"detail":" is above mode default"},{"step":"escalation","outcome":"ask","detail":"mode escalation"}],'
    b'{"decision":"ask","reason":"Bash needs danger-full-access; mode default asks","source":"mode",'
)


# A 4 KB window and the smallest state: a verdict is a few hundred bytes, and copying this primed compressor
# costs half of making one with the dictionary each time (ask CPU, issue 21); the output is the same size.
_PACKER = zlib.compressobj(1, zlib.DEFLATED, 12, 2, zdict=_ZDICT)


# Below this many waiting requests a verdict is kept as plain JSON: deflating it and inflating it again cost
# an ask ~20 µs of daemon CPU (issue 21) to save ~700 bytes, which only matters by the thousand.
PACK_ABOVE = 256


def pack(data: bytes, waiting: int = PACK_ABOVE) -> bytes:
    """A verdict's JSON as the table keeps it: as is while fewer than ``PACK_ABOVE`` requests wait, deflated
    from then on. ``unpack`` tells the two apart by the first byte: JSON of a struct starts with ``{``, a
    zlib stream never does (its first byte is 0x08-0x78)."""
    if waiting < PACK_ABOVE and data[:1] == b"{":
        return data
    z = _PACKER.copy()
    return z.compress(data) + z.flush()


def unpack(data: bytes) -> bytes:
    if data[:1] == b"{":
        return data
    z = zlib.decompressobj(zdict=_ZDICT)
    return z.decompress(data) + z.flush()


_call_decoder = msgspec.json.Decoder(p.CallInfo)
_verdict_decoder = msgspec.json.Decoder(p.Verdict)


class PendingTable:
    """Every pending request by id, the ids recently decided, and the deadline heap with its one timer."""

    __slots__ = ("_entries", "_heap", "_recent", "_wake")

    def __init__(self) -> None:
        self._entries: dict[str, PendingEntry] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._heap: list[tuple[float, str]] = []
        self._wake: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, rid: str) -> PendingEntry | None:
        return self._entries.get(rid)

    def values(self) -> Iterator[PendingEntry]:
        return iter(self._entries.values())

    def decided(self, rid: str) -> bool:
        """True if ``rid`` was resolved recently (bounded memory: the oldest are forgotten)."""
        return rid in self._recent

    def add(self, entry: PendingEntry) -> None:
        rid = entry.id
        self._entries[rid] = entry
        conn = entry.conn
        if conn.pending is None:
            conn.pending = []
        conn.pending.append(rid)
        if not self._heap or entry.deadline < self._heap[0][0]:
            heapq.heappush(self._heap, (entry.deadline, rid))
            if self._wake is not None:
                self._wake.set()
        else:
            heapq.heappush(self._heap, (entry.deadline, rid))

    def claim(self, entry: PendingEntry) -> None:
        """Take ``entry`` out for resolution; the caller must have just found it with ``get``."""
        rid = entry.id
        del self._entries[rid]
        if entry.conn.pending:
            with contextlib.suppress(ValueError):
                entry.conn.pending.remove(rid)  # at most max_pending_per_connection long
        self._recent[rid] = None
        if len(self._recent) > MAX_RECENT:
            self._recent.popitem(last=False)

    def extend(self, entry: PendingEntry, seconds: float, now: float | None = None) -> bool:
        """A person holds ``entry``: its deadline moves to ``seconds`` from now, capped at ``entry.limit``;
        never earlier than it was. False when it could not move (already at the limit). The old heap
        item stays and is skipped when it comes due (``run_timer`` compares with the entry's deadline)."""
        now = time.monotonic() if now is None else now
        target = min(now + seconds, entry.limit)
        if target <= entry.deadline + 0.001 or self._entries.get(entry.id) is not entry:
            return False
        entry.deadline_wall += target - entry.deadline
        entry.deadline = target
        heapq.heappush(self._heap, (target, entry.id))
        return True

    async def run_timer(self, expire: Callable[[PendingEntry], object]) -> None:
        """One task for every deadline: a heap ordered by deadline, stale entries skipped lazily."""
        heap = self._heap
        while True:
            now = time.monotonic()
            done = 0
            while heap and heap[0][0] <= now:
                _, rid = heapq.heappop(heap)
                entry = self._entries.get(rid)
                if entry is not None and entry.deadline <= now:  # a held entry has a later heap item
                    expire(entry)
                    done += 1
                    if done % _EXPIRE_BATCH == 0:
                        # thousands due at once: let their decisions leave and the audit writer catch up
                        # between batches, rather than holding every one of them in memory at once
                        await anyio.sleep(0)
            self._wake = anyio.Event()
            delay = heap[0][0] - now if heap else 3600.0
            with anyio.move_on_after(delay):
                await self._wake.wait()
