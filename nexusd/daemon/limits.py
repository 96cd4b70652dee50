"""Runaway agents: a per-session limit on automatic allows, beyond which calls are asked.

A model in a loop repeats calls that are each harmless (a write, an API call, a push in every iteration);
the aggregate is what hurts. So the daemon counts, per agent session, the calls it allowed without a person
in the last minute: the same call more than ``repeats_per_minute`` times, or any calls more than
``calls_per_minute`` times, and the next one is asked instead (a person sees the count and the reason).
A person's own answers are not counted and are never held back: the limit only slows what no one looked at.

State lives in the daemon (it owns time); the policy says the limits (``[limits]``, the strictest layer
wins). Memory is bounded: at most ``calls_per_minute`` stamps per session and ``MAX_SESSIONS`` sessions.
"""

from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass, field

import msgspec

from nexusd.core.policy.policy import Limits
from nexusd.protocol import CallInfo

WINDOW = 60.0
MAX_SESSIONS = 4096
_encode = msgspec.json.Encoder(order="sorted").encode


@dataclass(slots=True)
class _Window:
    stamps: collections.deque[tuple[float, bytes]] = field(default_factory=collections.deque)
    counts: dict[bytes, int] = field(default_factory=dict)


def call_key(call: CallInfo) -> bytes:
    """The same call: same tool, same input (key order ignored), same working directory."""
    return hashlib.blake2b(_encode((call.tool, call.input, call.cwd)), digest_size=16).digest()


class RunawayLimiter:
    def __init__(self) -> None:
        self._sessions: collections.OrderedDict[str, _Window] = collections.OrderedDict()

    def _window(self, session: str, now: float) -> _Window:
        w = self._sessions.get(session)
        if w is None:
            w = self._sessions[session] = _Window()
            if len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session)
        while w.stamps and w.stamps[0][0] <= now - WINDOW:
            _, old = w.stamps.popleft()
            n = w.counts[old] - 1
            if n:
                w.counts[old] = n
            else:
                del w.counts[old]
        return w

    def check(self, call: CallInfo, limits: Limits, now: float) -> str | None:
        """Why this automatic allow must be asked instead (None: within the limits). Does not count it."""
        if not (limits.calls_per_minute or limits.repeats_per_minute):
            return None
        w = self._window(call.session, now)
        repeats = w.counts.get(call_key(call), 0)
        if limits.repeats_per_minute and repeats >= limits.repeats_per_minute:
            return (
                f"runaway limit: the same call was allowed {repeats} times in the last minute in this session "
                f"([limits] repeats_per_minute = {limits.repeats_per_minute}); a person decides the next one"
            )
        if limits.calls_per_minute and len(w.stamps) >= limits.calls_per_minute:
            return (
                f"runaway limit: {len(w.stamps)} calls were allowed in the last minute in this session "
                f"([limits] calls_per_minute = {limits.calls_per_minute}); a person decides the next one"
            )
        return None

    def count(self, call: CallInfo, limits: Limits, now: float) -> None:
        """Remember an automatic allow."""
        if not (limits.calls_per_minute or limits.repeats_per_minute):
            return
        w = self._window(call.session, now)
        key = call_key(call)
        w.stamps.append((now, key))
        w.counts[key] = w.counts.get(key, 0) + 1
        cap = limits.calls_per_minute or 10_000
        while len(w.stamps) > cap:  # only the newest ``cap`` stamps can ever matter
            _, old = w.stamps.popleft()
            n = w.counts[old] - 1
            if n:
                w.counts[old] = n
            else:
                del w.counts[old]
