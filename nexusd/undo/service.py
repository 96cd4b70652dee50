"""The daemon's side of undo: a checkpoint before each allowed call that can change the workspace, and the
``history`` and ``rewind`` queries.

Theory of operation. The daemon hands every decision it sends to an agent to ``send`` (one call, where an
allow leaves the daemon). A deny, or an allow of a call that cannot change the workspace, goes out at
once. An allow of a call that can (file-tool writes and edits; shell, MCP and unknown tools unless the
classification proves them read-only) waits for a snapshot of its workspace, taken in a worker thread
(``anyio.to_thread``) so the event loop never waits on a disk, and bounded by ``timeout``. The checkpoint
is "before the call": the call's own changes are what differs between its checkpoint and the next one.

A checkpoint that fails or times out never allows silently: the history records "no checkpoint" and
why, and the daemon logs it; with ``on_failure = "allow"`` (the default) the call still goes out, with
``"deny"`` it is denied and the audit trail records the denial. The default is allow because the gate
already decided the call may run, a checkpoint is a convenience for undoing it, and a full disk in the
state directory must not stop every agent; a person who wants no call without its undo sets "deny".
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import structlog

from nexusd import protocol as p
from nexusd.core.tools import PATH_KEYS
from nexusd.policy.gate import workspace_of
from nexusd.undo import restore
from nexusd.undo.history import History
from nexusd.undo.settings import UndoSettings, load
from nexusd.undo.shadow import EMPTY_TREE, FileChange, GitError, Shadow, display, kill_running

log = structlog.get_logger("nexusd.undo")

_MUTATING_KINDS = frozenset({"edit", "shell", "mcp", "other"})
_UNPROVABLE = frozenset({"unparseable", "dynamic", "hidden_effect"})
MAINTAIN_EVERY = 200  # checkpoints per workspace between retention sweeps and repacks
MAX_DIFF_BYTES = 4 << 20
HARD_TIMEOUT = 300.0  # a snapshot abandoned by its call may go on this long (it warms the index)


def can_change_workspace(verdict: p.Verdict | None) -> bool:
    """Whether an allowed call may change files: writes, a write requirement, or what cannot be proved
    read-only. A call without its classification (never for an allow) counts as one that can."""
    if verdict is None or verdict.details is None:
        return True
    d = verdict.details
    if d.kind not in _MUTATING_KINDS:
        return False
    if d.kind == "edit":
        return True
    return bool(d.writes) or verdict.requirement != "read-only" or bool(_UNPROVABLE.intersection(verdict.flags))


def _bounded(verdict: p.Verdict | None) -> bool:
    """The call can write only the paths its classification names: the file tools, and shell commands
    whose every program is known (requirement workspace-write, nothing unprovable)."""
    if verdict is None or verdict.details is None or _UNPROVABLE.intersection(verdict.flags):
        return False
    return verdict.details.kind in ("edit", "shell") and verdict.requirement == "workspace-write"


def _summary(call: p.CallInfo) -> str:
    inp = call.input
    for key in ("command", "cmd", *PATH_KEYS):  # a shell command, else the path a file tool names
        v = inp.get(key)
        if isinstance(v, str):
            return v[:500]
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return " ".join(v)[:500]
    return msgspec.json.encode(inp)[:300].decode("utf-8", "replace")


def _relative(paths: list[str], workspace: str) -> list[str]:
    root = workspace.rstrip("/") + "/"
    return sorted({q[len(root) :] for q in paths if q.startswith(root)} | ({""} if workspace in paths else set()))


def _covers(writes: list[str], path: str) -> bool:
    return any(w == "" or path == w or path.startswith(w + "/") for w in writes)


def _bisect_ids(chain: list[p.HistoryEntry], cid: int) -> int:
    """The index of the first entry of ``chain`` (sorted by id) with an id above ``cid``."""
    lo, hi = 0, len(chain)
    while lo < hi:
        mid = (lo + hi) // 2
        if chain[mid].id <= cid:
            lo = mid + 1
        else:
            hi = mid
    return lo


class Ticket:
    """Who records a checkpoint's history entry: the worker thread, or (past the deadline) the waiting call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = False
        self.shadow: Shadow | None = None  # the workspace's, once the thread knows it

    def claim(self) -> bool:
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True


class UndoService:
    def __init__(
        self,
        state_dir: Path,
        config_dir: Path,
        *,
        spawn: Callable[..., None],
        audit: Callable[[p.CallInfo, p.Decision], None],
        settings: UndoSettings | None = None,
    ) -> None:
        self.settings = settings if settings is not None else load(config_dir)
        for err in self.settings.errors:
            log.error("undo settings", error=err)
        self.root = state_dir / "undo"
        self.hidden = tuple(os.path.realpath(d) for d in (state_dir, config_dir))
        # shared directories are no project: a "workspace" there would snapshot everyone's files
        self.skipped = frozenset(
            {"/", os.path.realpath(os.path.expanduser("~")), os.path.realpath(tempfile.gettempdir()), "/tmp"}
        )
        self.history = History(self.root / "history.jsonl")
        for err in self.history.load():
            log.error("undo history line skipped", error=err)
        self._spawn = spawn
        self._audit = audit
        self._shadows: dict[str, Shadow] = {}
        self._lock = threading.Lock()
        self._since_maintenance: dict[str, int] = {}
        self._diffs: dict[tuple[str, str], list[FileChange]] = {}  # (tree, tree): immutable, cached
        self._watched: OrderedDict[str, Shadow] = OrderedDict()  # workspaces with a watcher, least recent first

    # ------------------------------------------------------------------ the decision path

    def send(
        self, post: Callable[[bytes], bool], call: p.CallInfo, decision: p.Decision, verdict: p.Verdict | None
    ) -> None:
        """Send ``decision`` to the agent: at once, or, for an allow that can change the workspace, once
        its checkpoint is taken (or failed, or timed out)."""
        if not self.settings.enabled or decision.decision != "allow" or not can_change_workspace(verdict):
            post(p.encode(decision))
            return
        self._spawn(self._checkpoint_then_send, post, call, decision, verdict)

    async def _checkpoint_then_send(
        self, post: Callable[[bytes], bool], call: p.CallInfo, decision: p.Decision, verdict: p.Verdict | None
    ) -> None:
        entry: p.HistoryEntry | None = None
        deadline = time.monotonic() + self.settings.timeout
        ticket = Ticket()
        why = f"timed out after {self.settings.timeout:g} s"
        try:
            # past the deadline the thread is abandoned, not killed: it finishes (the index warms for the next
            # call) but records nothing; the history entry "no checkpoint" is this side's (the ticket decides
            # who records, once), also when the thread never started
            with anyio.move_on_after(self.settings.timeout):
                entry = await anyio.to_thread.run_sync(
                    self.checkpoint, call, verdict, deadline, ticket, abandon_on_cancel=True
                )
                why = entry.note if entry.tree is None else ""
        except Exception as e:  # checkpoint() records its own failures; this is a bug's last net
            log.exception("checkpoint failed")
            why = f"{type(e).__name__}: {e}"
        if entry is None and ticket.shadow is not None:
            ticket.shadow.slow = True  # its snapshot goes on: other calls in the workspace fail fast meanwhile
        if entry is None and ticket.claim():
            log.error("checkpoint failed", error=why, tool=call.tool)
            try:
                await anyio.to_thread.run_sync(self._record_failure, call, verdict, f"no checkpoint: {why}")
            except Exception:
                log.exception("recording a failed checkpoint failed")
        if why and self.settings.on_failure == "deny":
            decision = p.Decision(
                "deny",
                f"no checkpoint could be taken before this call ({why}) and [undo] on_failure = deny",
                "error",
                ref=decision.ref,
                id=decision.id,
            )
            try:
                self._audit(call, decision)
            except Exception:
                log.exception("audit of a checkpoint failure failed")
        post(p.encode(decision))
        if entry is not None and entry.tree is not None:
            ws = entry.workspace
            n = self._since_maintenance.get(ws, 0) + 1
            self._since_maintenance[ws] = n
            if n >= MAINTAIN_EVERY:
                self._since_maintenance[ws] = 0
                try:
                    await anyio.to_thread.run_sync(self.maintain, ws)
                except Exception:
                    log.exception("undo maintenance failed", workspace=ws)

    def close(self) -> None:
        """The daemon stops: kill the git processes still running (their threads then end at once), and
        close every watcher (its inotify descriptor and watches)."""
        kill_running()
        with self._lock:
            shadows = list(self._shadows.values())
            self._watched.clear()
        for s in shadows:
            with contextlib.suppress(Exception):
                s.close_watcher()

    def _keep_watching(self, shadow: Shadow) -> None:
        """``shadow`` (its lock held) was just used: the least recently used watchers beyond
        ``watch_workspaces`` are closed (each under its own lock, taken without waiting; a busy one is
        closed at a later turn). A closed watcher re-arms at its workspace's next checkpoint."""
        if shadow.watcher is None:
            return
        with self._lock:
            self._watched[shadow.workspace] = shadow
            self._watched.move_to_end(shadow.workspace)
            over = [s for s in self._watched.values() if s is not shadow][
                : max(0, len(self._watched) - self.settings.watch_workspaces)
            ]
        for old in over:
            if old.lock.acquire(blocking=False):
                try:
                    old.close_watcher()
                finally:
                    old.lock.release()
                with self._lock:
                    self._watched.pop(old.workspace, None)

    # ------------------------------------------------------------------ blocking work (worker threads)

    def shadow(self, workspace: str) -> Shadow:
        with self._lock:
            s = self._shadows.get(workspace)
            if s is None:
                s = Shadow(
                    self.root / "repos",
                    workspace,
                    self.settings.exclude,
                    self.hidden,
                    watch=self.settings.watch and self.settings.watch_workspaces > 0 and sys.platform == "linux",
                    max_dirs=self.settings.watch_max_dirs,
                    rescan=self.settings.watch_rescan,
                )
                self._shadows[workspace] = s
            return s

    def _record_failure(self, call: p.CallInfo, verdict: p.Verdict | None, note: str) -> None:
        try:
            workspace = workspace_of(call)
        except Exception:
            workspace = ""
        self.history.append(self._entry(call, verdict, workspace, None, note, None))

    def _entry(
        self,
        call: p.CallInfo,
        verdict: p.Verdict | None,
        workspace: str,
        tree: str | None,
        note: str,
        took: float | None,
    ) -> p.HistoryEntry:
        details = verdict.details if verdict is not None else None
        return p.HistoryEntry(
            id=self.history.next_id(),
            time=time.time(),
            workspace=workspace,
            kind="call",
            tree=tree,
            session=call.session,
            provider=call.provider,
            tool=call.tool,
            summary=_summary(call),
            agent_pid=call.agent_pid,
            subagent_id=call.subagent_id,
            writes=_relative(list(details.writes), workspace) if details is not None and workspace else [],
            bounded=_bounded(verdict),
            note=note,
            took_ms=round(took * 1000, 2) if took is not None else None,
        )

    def checkpoint(
        self,
        call: p.CallInfo,
        verdict: p.Verdict | None,
        deadline: float | None = None,
        ticket: Ticket | None = None,
    ) -> p.HistoryEntry:
        """Snapshot the call's workspace and record it; never raises for a snapshot that fails (the entry
        says why, with no tree). A snapshot finished after ``deadline`` (the allow went out meanwhile) is
        no "before" of this call: recorded without its tree, though its work warmed the index."""
        started = time.monotonic()
        deadline = deadline if deadline is not None else started + self.settings.timeout
        workspace = ""
        tree: str | None = None
        note = ""
        try:
            workspace = workspace_of(call)
            if workspace in self.skipped:
                raise GitError(f"the workspace is {workspace}, a shared directory: not checkpointed")
            shadow = self.shadow(workspace)
            if ticket is not None:
                ticket.shadow = shadow
            if shadow.slow and not shadow.lock.acquire(blocking=False):
                raise GitError("an earlier checkpoint of this workspace that outlived its call is still being taken")
            if not shadow.slow and not shadow.lock.acquire(timeout=max(0.01, deadline - time.monotonic())):
                raise GitError("another checkpoint of this workspace took too long")
            try:
                self._keep_watching(shadow)
                tree = shadow.snapshot(timeout=HARD_TIMEOUT)
            finally:
                shadow.slow = False  # (set by a call that gave up waiting for this snapshot)
                shadow.lock.release()
            if time.monotonic() > deadline:
                tree = None
                raise GitError(f"took longer than {self.settings.timeout:g} s; the call went on without it")
        except (GitError, OSError) as e:
            note = f"no checkpoint: {e}"
            log.error("checkpoint failed", workspace=workspace, error=str(e), tool=call.tool)
        entry = self._entry(call, verdict, workspace, tree, note, time.monotonic() - started)
        if ticket is not None and not ticket.claim():
            return entry  # abandoned by its call, which recorded "no checkpoint" itself
        if tree is not None:
            self.shadow(workspace).keep(f"c{entry.id}", tree)
        self.history.append(entry)
        return entry

    def maintain(self, workspace: str) -> None:
        """Retention (keep_calls, keep_days) for one workspace, then pack its objects."""
        entries = [e for e in self.history.snapshot() if e.workspace == workspace]
        cutoff = time.time() - self.settings.keep_days * 86400 if self.settings.keep_days > 0 else 0.0
        drop = {e.id for e in entries[: max(0, len(entries) - self.settings.keep_calls)]}
        drop |= {e.id for e in entries if e.time < cutoff}
        shadow = self.shadow(workspace)
        for cid in drop:
            shadow.forget(f"c{cid}")
        self.history.drop(drop)
        shadow.repack()

    # ------------------------------------------------------------------ queries

    def _chain(self, workspace: str) -> list[p.HistoryEntry]:
        return [e for e in self.history.snapshot() if e.workspace == workspace and e.tree is not None]

    def _now(self, shadow: Shadow) -> str:
        with shadow.lock:
            return shadow.snapshot(timeout=120)

    def _changes(self, shadow: Shadow, a: str, b: str, cache: bool) -> list[FileChange]:
        key = (a, b)
        found = self._diffs.get(key)
        if found is None:
            found = shadow.changes(a, b)
            if cache:
                if len(self._diffs) > 20_000:
                    self._diffs.clear()
                self._diffs[key] = found
        return found

    def _next(self, e: p.HistoryEntry, chains: dict[str, list[p.HistoryEntry]]) -> p.HistoryEntry | None:
        """The checkpoint after ``e`` in its workspace (chains: each workspace's, by id, built once a query)."""
        chain = chains.get(e.workspace)
        if chain is None:
            chain = chains[e.workspace] = self._chain(e.workspace)
        i = _bisect_ids(chain, e.id)
        return chain[i] if i < len(chain) else None

    def _summarize(
        self, e: p.HistoryEntry, now: dict[str, str], chains: dict[str, list[p.HistoryEntry]] | None = None
    ) -> p.HistoryEntry:
        if e.tree is None:
            return e
        after = self._next(e, chains if chains is not None else {})
        shadow = self.shadow(e.workspace)
        if after is not None:
            end, until = after.tree or EMPTY_TREE, after.id
        else:
            if e.workspace not in now:
                now[e.workspace] = self._now(shadow)
            end, until = now[e.workspace], None
        files = self._changes(shadow, e.tree, end, cache=until is not None)
        return msgspec.structs.replace(
            e,
            files=[p.FileChange(f.path, f.status, f.plus, f.minus) for f in files],
            added=sum(f.status == "A" for f in files),
            changed=sum(f.status in "MT" for f in files),
            deleted=sum(f.status == "D" for f in files),
            plus=sum(f.plus or 0 for f in files),
            minus=sum(f.minus or 0 for f in files),
            until=until,
        )

    def query(self, msg: p.History) -> p.HistoryReply:
        """Blocking: run in a worker thread."""
        entries = self.history.snapshot()
        if msg.id is not None:
            entries = [e for e in entries if e.id == msg.id]
            if not entries:
                raise LookupError(f"no checkpoint {msg.id}")
        if msg.session is not None:
            entries = [e for e in entries if e.session == msg.session]
        if msg.workspace is not None:
            ws = os.path.realpath(msg.workspace)
            entries = [e for e in entries if e.workspace == ws]
        entries = entries[-max(1, min(msg.limit, 10_000)) :]
        now: dict[str, str] = {}
        chains: dict[str, list[p.HistoryEntry]] = {}
        out = []
        for e in entries:
            try:
                out.append(self._summarize(e, now, chains))
            except (GitError, OSError) as err:
                out.append(msgspec.structs.replace(e, note=f"{e.note}; cannot be read: {err}".lstrip("; ")))
        diff: str | None = None
        truncated = False
        if msg.id is not None and msg.diff:
            e = out[0]
            if e.tree is None:
                diff = ""
            else:
                shadow = self.shadow(e.workspace)
                end = next((x.tree for x in self._chain(e.workspace) if x.id == e.until), None) or now.get(e.workspace)
                rel = [self._rel(e.workspace, q) for q in msg.paths]
                diff, truncated = shadow.diff(e.tree, end or self._now(shadow), rel, MAX_DIFF_BYTES)
        return p.HistoryReply(entries=out, diff=diff, truncated=truncated)

    @staticmethod
    def _rel(workspace: str, path: str) -> str:
        if not path.startswith("/"):
            path = os.path.join(workspace, path)
        path = os.path.normpath(path)
        root = workspace.rstrip("/")
        if path == root:
            return ""
        if not path.startswith(root + "/"):
            raise ValueError(f"{path} is not inside the workspace {workspace}")
        return path[len(root) + 1 :]

    def _others(self, shadow: Shadow, chain: list[p.HistoryEntry], start: int, now: str) -> set[str]:
        """Paths changed after checkpoint ``start`` by someone other than the gated calls: within each
        interval between checkpoints, what a bounded call changed outside the paths it names."""
        later = [e for e in chain if e.id >= start]
        others: set[str] = set()
        for i, e in enumerate(later):
            end = later[i + 1].tree if i + 1 < len(later) else now
            if not e.bounded or e.tree is None or end is None:
                continue  # a call that can write anything: its changes cannot be told from others'
            for f in self._changes(shadow, e.tree, end, cache=i + 1 < len(later)):
                if not _covers(e.writes, f.path):
                    others.add(f.path)
        return others

    def rewind(self, msg: p.Rewind, by: str) -> p.RewindReply:
        """Blocking: run in a worker thread."""
        target_entry = self.history.get(msg.id)
        if target_entry is None:
            raise LookupError(f"no checkpoint {msg.id}")
        if target_entry.tree is None:
            return p.RewindReply(ok=False, detail=f"no checkpoint was taken before call {msg.id}: {target_entry.note}")
        ws = target_entry.workspace
        shadow = self.shadow(ws)
        rel = [self._rel(ws, q) for q in msg.paths]
        only = restore.selector(rel)
        if not shadow.lock.acquire(timeout=120):
            return p.RewindReply(ok=False, detail="the workspace's checkpoints are busy; try again")
        try:
            now = shadow.snapshot(timeout=120, full=True)  # a rewind acts on what is there, watcher or not
            current, target = shadow.entries(now), shadow.entries(target_entry.tree)
            plan = restore.plan(current, target, only)
            changes = [list(x) for x in plan.describe(current)]
            conflicts = sorted(self._others(shadow, self._chain(ws), msg.id, now) & {display(x) for x in plan.paths()})
            if not plan.paths():
                return p.RewindReply(ok=True, detail="nothing to change: the workspace is as it was", changes=[])
            if msg.dry_run:
                what = f"would change {len(changes)} path(s)"
                if conflicts:
                    what += f"; {len(conflicts)} changed after the call by someone else (needs --force)"
                return p.RewindReply(ok=True, detail=what, changes=changes, conflicts=conflicts)
            if conflicts and not msg.force:
                return p.RewindReply(
                    ok=False,
                    detail=f"refused: {len(conflicts)} path(s) were changed after call {msg.id} by someone other "
                    "than the gated calls; rewinding would overwrite them (--force to do it anyway)",
                    changes=changes,
                    conflicts=conflicts,
                )
            rescue = p.HistoryEntry(
                id=self.history.next_id(),
                time=time.time(),
                workspace=ws,
                kind="rescue",
                tree=now,
                session="",
                provider="nexusd",
                tool="rewind",
                summary=f"before rewinding to {msg.id}" + (f" ({', '.join(display(r) for r in rel)})" if rel else ""),
                writes=[display(x) for x in plan.paths()],
                bounded=True,
                note=f"by {by}",
            )
            shadow.keep(f"c{rescue.id}", now)
            self.history.append(rescue)
            errors = restore.apply(shadow, plan, target)
            after = shadow.entries(shadow.snapshot(timeout=120, full=True))
            for path in plan.paths():
                if after.get(path) != target.get(path) and not any(display(path) in err for err in errors):
                    errors.append(f"{display(path)}: not as recorded after the rewind")
        finally:
            shadow.lock.release()
        log.info("rewound", checkpoint=msg.id, workspace=ws, paths=len(changes), errors=len(errors), by=by)
        return p.RewindReply(
            ok=not errors,
            detail=(
                f"rewound {len(changes)} path(s) to before call {msg.id}; undo with: nexusctl rewind {rescue.id}"
                + (f"; {len(errors)} could not be restored" if errors else "")
            ),
            changes=changes,
            conflicts=conflicts,
            errors=errors,
            rescue=rescue.id,
        )

    # ------------------------------------------------------------------ handlers (on the loop)

    def on_history(
        self, reply: Callable[[bytes], bool], error: Callable[[str, str], None], msg: p.History
    ) -> Coroutine[Any, Any, None]:
        return self._run(reply, error, msg.ref, lambda: self.query(msg))

    def on_rewind(
        self, reply: Callable[[bytes], bool], error: Callable[[str, str], None], msg: p.Rewind, by: str
    ) -> Coroutine[Any, Any, None]:
        return self._run(reply, error, msg.ref, lambda: self.rewind(msg, by))

    async def _run(
        self, reply: Callable[[bytes], bool], error: Callable[[str, str], None], ref: str | None, fn: Callable[[], Any]
    ) -> None:
        try:
            result = await anyio.to_thread.run_sync(fn)
        except LookupError as e:
            error("not_found", str(e.args[0]) if e.args else str(e))
            return
        except ValueError as e:
            error("invalid_message", str(e))
            return
        except (GitError, OSError) as e:
            error("internal", f"undo: {e}")
            return
        reply(p.encode(msgspec.structs.replace(result, ref=ref)))
