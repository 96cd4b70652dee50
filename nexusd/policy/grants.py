"""Grants: what people allowed (or denied) beyond one call, in one place to see and take back.

Three kinds, one table:

- **timed** (answer scope ``timed`` with a duration): a rule for every session until its expiry, persisted
  in ``<state-dir>/grants.json`` (atomically) so it survives a restart with the same expiry;
- **session** (scope ``session``): a rule for that agent session only, in memory, gone with the session;
- **always** / **never**: the rules in ``learned.toml``; this table keeps who gave each, when and from which
  UI (persisted beside the timed ones) and lists every learned rule, including ones added by hand.

Each has an id, its rule, who gave it from which UI, when, its expiry and how often it decided a call.
Expiry is exact: the engine only ever sees the timed rules still valid at the instant of the decision
(``timed_rules(now)``), and the daemon also arms one timer per timed grant to drop it at its expiry.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
import structlog

from nexusd.atomicfile import write_atomic
from nexusd.protocol import GrantInfo, RuleInfo

log = structlog.get_logger("nexusd.grants")

MAX_DURATION = 30 * 86400.0  # longer than this is "always"
GRANTS_FILE = "grants.json"
Kind = Literal["allow", "deny"]


class _Saved(msgspec.Struct, forbid_unknown_fields=True):
    version: int = 1
    grants: list[GrantInfo] = []


def learned_id(kind: str, rule: str) -> str:
    """A stable id for a learned rule, so one added by hand (no record of who gave it) can be revoked too."""
    return "l-" + hashlib.sha256(f"{kind}\0{rule}".encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Use:
    """Which grant decided a call, from the verdict's rule and origin."""

    rule: str
    origin: str
    session: str


class GrantTable:
    """Every grant by id. Not thread-safe: the daemon's event loop owns it."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / GRANTS_FILE
        self._learned_prefix = str(self.path.parent)  # learned rules' origins start with it (count_use)
        self._grants: dict[str, GrantInfo] = {}
        self._timed: tuple[tuple[str, str, str], ...] = ()  # (kind, rule, id), what the engine sees
        self._timed_expiries: tuple[float, ...] = ()

    # ------------------------------------------------------------------ persistence

    def load(self, now: float) -> list[str]:
        """Read grants.json; expired timed grants are dropped. A broken file is kept as it is (never
        rewritten over a person's chance to look at it) and its grants are not applied: fail closed."""
        self._grants = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError as e:
            return [f"{self.path}: {e.strerror or e}; no timed grant applies"]
        if data is not None:
            try:
                saved = msgspec.json.decode(data, type=_Saved)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                return [f"{self.path}: not a grants file ({e}); no timed grant applies"]
            for g in saved.grants:
                if g.scope == "timed" and (g.expires is None or g.expires <= now):
                    continue
                self._grants[g.id] = g
        self._rebuild()
        return []

    def save(self) -> None:
        keep = [g for g in self._grants.values() if g.scope in ("timed", "learned")]
        write_atomic(self.path, msgspec.json.encode(_Saved(grants=keep)).decode() + "\n", 0o600)

    def _rebuild(self) -> None:
        timed = sorted((g for g in self._grants.values() if g.scope == "timed"), key=lambda g: g.given_at or 0.0)
        self._timed = tuple((g.kind, g.rule, g.id) for g in timed)
        self._timed_expiries = tuple(g.expires or 0.0 for g in timed)

    # ------------------------------------------------------------------ giving and taking back

    def add(
        self,
        kind: Kind,
        rules: Iterable[str],
        scope: Literal["session", "timed", "learned"],
        *,
        now: float,
        session: str | None = None,
        given_by: str | None = None,
        ui: str | None = None,
        expires: float | None = None,
    ) -> list[GrantInfo]:
        """Record a grant per rule (persisted when timed or always). A rule already granted the same way
        is given a fresh record (a newer expiry replaces the older one)."""
        out: list[GrantInfo] = []
        for rule in dict.fromkeys(rules):
            for gid, g in list(self._grants.items()):
                if (g.kind, g.rule, g.scope, g.session) == (kind, rule, scope, session if scope == "session" else None):
                    del self._grants[gid]
            gid = learned_id(kind, rule) if scope == "learned" else "g-" + secrets.token_hex(8)
            g = GrantInfo(
                id=gid,
                kind=kind,
                rule=rule,
                scope=scope,
                session=session if scope == "session" else None,
                given_by=given_by,
                ui=ui,
                given_at=now,
                expires=expires if scope == "timed" else None,
            )
            self._grants[gid] = g
            out.append(g)
        self._rebuild()
        if scope in ("timed", "learned"):
            try:
                self.save()
            except OSError:
                for g in out:  # not on disk: not given (a timed grant would vanish at restart unannounced)
                    self._grants.pop(g.id, None)
                self._rebuild()
                raise
        return out

    def get(self, gid: str) -> GrantInfo | None:
        return self._grants.get(gid)

    def remove(self, gid: str) -> GrantInfo | None:
        """Forget one grant (revoked or expired); persisted at once when it was."""
        g = self._grants.pop(gid, None)
        if g is not None:
            self._rebuild()
            if g.scope in ("timed", "learned"):
                self.save()
        return g

    def end_session(self, session: str, kind: Kind = "allow") -> list[GrantInfo]:
        """Forget the session's grants of ``kind`` (the daemon ends only allow grants: never widening)."""
        gone = [g for g in self._grants.values() if g.scope == "session" and g.session == session and g.kind == kind]
        for g in gone:
            del self._grants[g.id]
        return gone

    # ------------------------------------------------------------------ what applies

    def timed_rules(self, now: float) -> tuple[tuple[str, str, str], ...]:
        """The timed rules valid at ``now`` (expiry exclusive): what the engine sees for this decision."""
        if all(e > now for e in self._timed_expiries):
            return self._timed
        return tuple(t for t, e in zip(self._timed, self._timed_expiries, strict=True) if e > now)

    def timed(self) -> list[GrantInfo]:
        return [g for g in self._grants.values() if g.scope == "timed"]

    def count_use(self, use: Use) -> None:
        """One more call decided by the grant behind ``use``."""
        g: GrantInfo | None = None
        if use.origin.startswith("grant:"):
            g = self._grants.get(use.origin[6:])
        elif use.origin.startswith("session:"):
            g = next(
                (
                    x
                    for x in self._grants.values()
                    if x.scope == "session" and x.session == use.session and x.rule == use.rule
                ),
                None,
            )
        elif use.origin.startswith(self._learned_prefix):  # learned.toml:LINE
            g = next((x for x in self._grants.values() if x.scope == "learned" and x.rule == use.rule), None)
            if g is None:
                return
        if g is not None:
            g.uses += 1  # persisted with the next change (a count, not a permission)

    def listing(
        self, learned: list[RuleInfo], live_session_rules: dict[str, tuple[set[str], set[str]]], now: float
    ) -> list[GrantInfo]:
        """Every grant in force: timed ones not yet expired, session ones whose session still holds the
        rule, and every learned rule (with who gave it when the table knows)."""
        out: list[GrantInfo] = []
        for g in self._grants.values():
            if g.scope == "timed" and (g.expires or 0.0) > now:
                out.append(g)
            elif g.scope == "session" and g.session is not None:
                allows, denies = live_session_rules.get(g.session, (set(), set()))
                if g.rule in (allows if g.kind == "allow" else denies):
                    out.append(g)
        for r in learned:
            if r.kind not in ("allow", "deny"):
                continue
            known = self._grants.get(learned_id(r.kind, r.rule))
            if known is not None and known.scope == "learned":
                out.append(msgspec.structs.replace(known, origin=r.origin))
            else:
                out.append(
                    GrantInfo(id=learned_id(r.kind, r.rule), kind=r.kind, rule=r.rule, scope="learned", origin=r.origin)
                )
        return out
