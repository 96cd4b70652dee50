"""Verified memo of rule-, mode- and safety-decided verdicts: skip the classifier and engine for a call
seen before, but only after re-asking the file system every question the first decision asked.

Why this is sound: past ``workspace_of`` and ``policy_for`` (which run for every call), a verdict is a
pure function of the call, the policy object, the session's state, the daemon's fixed context (home,
protected directories) and the answers of the ``FileSystem`` the classifier was given. The key holds
the first four (the policy by identity: a reload or a changed project file makes a new object); the
entry holds every file-system question with its answer. A hit replays those questions against the
current file system, and any different answer (a swapped symlink, a new file a glob matches, an edited
git config) is a miss that decides afresh. Replaying a handful of syscalls is much cheaper than parsing,
walking and matching rules again, and nothing the file system says is ever trusted from the past.

Only final allow/deny verdicts of the first engine round are kept: never asks (a person sees those with
a full trace), never a verdict that needed hooks or auto mode's classifier (programs whose answers may
change), never an error.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgspec

from nexusd.core.model import Session
from nexusd.core.policy.policy import Policy
from nexusd.policy.filesystem import DecisionFileSystem
from nexusd.protocol import CallInfo, Verdict

MAX_ENTRIES = 4096
MAX_BYTES = 16 << 20  # an agent that sends megabyte commands must not make the memo a memory sink
_ENTRY_OVERHEAD = 1024  # the verdict, tuples and dict slot, roughly

_encode = msgspec.json.Encoder().encode


class RecordingFileSystem:
    """Answers through one decision's ``DecisionFileSystem`` and writes down every distinct question."""

    __slots__ = ("_fs", "changed", "log")

    def __init__(self, fs: DecisionFileSystem) -> None:
        self._fs = fs
        self.log: dict[tuple[str, tuple[Any, ...]], Any] = {}
        self.changed = False  # one question got two answers: the file system moved under this decision

    def _ask(self, op: str, *args: Any) -> Any:
        answer = getattr(self._fs, op)(*args)
        if isinstance(answer, list):
            answer = tuple(answer)  # the log must not share a list the classifier might keep
        if self.log.setdefault((op, args), answer) != answer:
            self.changed = True  # no single answer stands for what the decision saw: never kept
        return list(answer) if isinstance(answer, tuple) else answer

    def realpath(self, path: str) -> str:
        return self._ask("realpath", path)

    def lexists(self, path: str) -> bool:
        return self._ask("lexists", path)

    def size(self, path: str) -> int | None:
        return self._ask("size", path)

    def head(self, path: str, n: int) -> bytes | None:
        return self._ask("head", path, n)

    def glob(self, pattern: str, limit: int) -> list[str] | None:
        return self._ask("glob", pattern, limit)

    # the two-in-one questions of DecisionFileSystem, recorded as asked: replay asks them the same way
    def realpath_if_lexists(self, path: str) -> str | None:
        return self._ask("realpath_if_lexists", path)

    def size_and_head(self, path: str, n: int) -> tuple[int | None, bytes | None]:
        size, head = self._ask("size_and_head", path, n)
        return size, head

    def is_mount(self, path: str) -> bool:
        return self._ask("is_mount", path)


class _Entry:
    __slots__ = ("cost", "log", "policy", "verdict")

    def __init__(
        self, policy: Policy, log: tuple[tuple[str, tuple[Any, ...], Any], ...], verdict: Verdict, cost: int
    ) -> None:
        self.policy, self.log, self.verdict, self.cost = policy, log, verdict, cost


def _cost(key: tuple[Any, ...], log: tuple[tuple[str, tuple[Any, ...], Any], ...]) -> int:
    """Bytes an entry holds, roughly: the call's text and every path and file head in its log."""
    n = _ENTRY_OVERHEAD + sum(len(k) for k in key if isinstance(k, str | bytes))
    for _op, args, answer in log:
        n += 64 + sum(len(a) for a in args if isinstance(a, str))
        if isinstance(answer, str | bytes):
            n += len(answer)
        elif isinstance(answer, tuple):
            n += sum(len(a) for a in answer if isinstance(a, str | bytes))
    return n


def session_state(s: Session) -> tuple[Any, ...]:
    """Everything of a session the engine reads (the id is in the call)."""
    return (
        s.provider,
        s.agent_mode,
        s.override_mode,
        s.allow_rules,
        s.deny_rules,
        s.grant_rules,
        s.classifier_denials,
        s.trust_asked,
        s.person_reachable,
    )


def cacheable(verdict: Verdict) -> bool:
    return verdict.decision in ("allow", "deny") and verdict.source in ("rule", "mode", "safety", "default")


class DecisionMemo:
    """A bounded LRU of verdicts, each valid only while its file-system answers still hold."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = self.stale = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    @staticmethod
    def key(call: CallInfo, workspace: str, session: Session, fixed: tuple[Any, ...]) -> tuple[Any, ...]:
        # The input as canonical bytes: dicts are not hashable, and equal bytes mean an equal input.
        return DecisionMemo.key_of_state(call, workspace, session_state(session), fixed)

    def get(self, key: tuple[Any, ...], policy: Policy, fs: DecisionFileSystem) -> Verdict | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        if entry.policy is not policy or not _still_true(entry.log, fs):
            self._drop(key)
            self.stale += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry.verdict

    # The memo split for the decision pool: a worker thread peeks and replays (file-system questions, off
    # the event loop, no mutation); the loop settles the outcome (counters, LRU order, dropping a stale entry).

    @staticmethod
    def key_of_state(call: CallInfo, workspace: str, state: tuple[Any, ...], fixed: tuple[Any, ...]) -> tuple[Any, ...]:
        """``key`` with the session's state taken beforehand (``session_state``, on the loop)."""
        return (
            call.provider,
            call.session,
            call.tool,
            _encode(call.input),
            call.cwd,
            call.workspace,
            call.mode,
            workspace,
            state,
            fixed,
        )

    def peek(self, key: tuple[Any, ...]) -> object | None:
        """The entry under ``key``, untouched (safe from a worker thread: one dict lookup)."""
        return self._entries.get(key)

    @staticmethod
    def replay(entry: object, policy: Policy, fs: DecisionFileSystem) -> bool:
        """Whether ``entry`` still holds: same policy object, every file-system question answered the same.
        Asks the file system: run it off the loop."""
        assert isinstance(entry, _Entry)
        return entry.policy is policy and _still_true(entry.log, fs)

    def settle(self, key: tuple[Any, ...], entry: object | None, held: bool) -> Verdict | None:
        """On the loop, after ``peek``/``replay``: the verdict of a hit whose entry is still the one replayed
        (else None), with the counters and LRU order ``get`` keeps."""
        if entry is None:
            self.misses += 1
            return None
        current = self._entries.get(key)
        if not held:
            if current is entry:
                self._drop(key)
            self.stale += 1
            return None
        if current is not entry:  # replaced or dropped meanwhile: decide afresh
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        assert isinstance(entry, _Entry)
        return entry.verdict

    def put(self, key: tuple[Any, ...], policy: Policy, recorder: RecordingFileSystem, verdict: Verdict) -> None:
        if not cacheable(verdict) or recorder.changed:
            return
        log = tuple((op, args, answer) for (op, args), answer in recorder.log.items())
        cost = _cost(key, log)
        if cost > self.max_bytes // 64:
            return  # one huge call may not push out dozens of ordinary ones
        self._drop(key)
        self._entries[key] = _Entry(policy, log, verdict, cost)
        self.bytes += cost
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.bytes -= old.cost

    def _drop(self, key: tuple[Any, ...]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.cost


def _still_true(log: tuple[tuple[str, tuple[Any, ...], Any], ...], fs: DecisionFileSystem) -> bool:
    for op, args, answer in log:
        now = getattr(fs, op)(*args)
        if isinstance(now, list):
            now = tuple(now)
        if now != answer:
            return False
    return True
