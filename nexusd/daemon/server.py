"""The daemon's lifecycle: start and stop, accept, sessions, and the handler table.

Theory of operation. ``Server`` owns the daemon's state (connections, sessions, the pending table, the
policy store, grants, audit, probe) and its lifetime (``serve``: the task group, signals, sd_notify,
the sweep of stalled connections; ``stop``: deny everything pending, say bye). ``connection.py`` frames
lines and hands each to ``on_line``; ``dispatch.py`` checks it (hello, the role, the gate-widening guard)
and hands it by message type to its concern, each in its own module and holding no state of its own
beyond its own timers and locks:

- ``requests.py``: the request lifecycle (settle, ask, reply, record): an agent's tool call;
- ``answers.py``: a person's answer (resolve, settle, an edited answer); ``grants.py``: what an answer
  grants; ``holds.py``: a person's "more time" on an ask;
- ``queries.py``: status, check, rules, audit, probe, sandbox plan, and rule/trust changes.

The dispatcher never decides: ``nexusd.policy.gate`` decides, ``nexusd.policy.shaping`` shapes the
verdict. Every path that is not an explicit allow from the policy or a person ends in deny.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import structlog

from nexusd import __version__
from nexusd import protocol as p
from nexusd.core.model import Session
from nexusd.core.policy.modes import MODES, did_you_mean, resolve
from nexusd.daemon.answers import Answers
from nexusd.daemon.connection import Connection
from nexusd.daemon.dispatch import Dispatch, Handler
from nexusd.daemon.grants import Grants
from nexusd.daemon.holds import Holds
from nexusd.daemon.listener import BoundSocket, watch_socket
from nexusd.daemon.notify import Notifier
from nexusd.daemon.notify_person import PersonNotifier
from nexusd.daemon.peer import peer_credentials, with_parent
from nexusd.daemon.queries import Queries
from nexusd.daemon.requests import RequestLifecycle
from nexusd.daemon.startsignals import StartSignals
from nexusd.daemon.state import Config as Config  # re-exported: the settings are constructed with Server
from nexusd.daemon.state import DaemonState
from nexusd.daemon.uploads import Uploads
from nexusd.policy.learned import clean_stale_temps
from nexusd.policy.sandbox_settings import sandbox_settings
from nexusd.policy.store import PolicyStore
from nexusd.sandbox import nested
from nexusd.sandbox.walkers import Walkers
from nexusd.undo.service import UndoService

log = structlog.get_logger("nexusd")

MAX_SESSIONS = 10_000


class Server:
    """The dispatcher: lifecycle, connections, roles, sessions; each message goes to its concern."""

    def __init__(
        self,
        config: Config,
        store: PolicyStore,
        *,
        notifier: Notifier | None = None,
        probe_fn: Callable[[], p.SandboxProbe] | None = None,
        start_signals: StartSignals | None = None,
    ) -> None:
        self.config = config
        self.start_signals = start_signals  # what arrived before our signal loop (daemon/startsignals.py)
        self.store = store
        # The daemon's state, one explicit object (nexusd/daemon/state.py); each concern is built from it.
        state = self.state = DaemonState(config, store, probe_fn=probe_fn)
        # the three concerns the dispatcher hands messages to (polkit's authority / agent split, one step on)
        self.requests = state.requests = RequestLifecycle(state)
        self.given = Grants(state)  # grants in force: given by answers, expired, listed, revoked
        self.answers = state.answers = Answers(state, self.given)
        self.holds = Holds(state)  # a person's "more time" on an ask (a UI's Hold, a notification's)
        self.queries = state.queries = Queries(state)
        self.notifier = notifier or Notifier(None)
        # [notify]: desktop notifications and webhooks for asks nobody is looking at (notify_person.py)
        self.alerts = PersonNotifier(
            lambda: self.store.policy.notify,
            self.answers.deny_from_notification,
            on_hold=self.holds.hold_from_notification,
        )
        state.alerts = self.alerts
        # the state's parts the dispatcher itself uses, under their old names
        self.probe_fn = probe_fn
        self.conns, self.subscribers, self.pending, self.sessions = (
            state.conns,
            state.subscribers,
            state.pending,
            state.sessions,
        )
        self.stats, self.memo, self.pool, self.pipeline = state.stats, state.memo, state.pool, state.pipeline
        self.grants, self.audit, self.errlog, self.replies = state.grants, state.audit, state.errlog, state.replies
        self.agents, self.limiter, self.daemon_ancestors = state.agents, state.limiter, state.daemon_ancestors
        self.uid, self.pid, self.started, self.started_mono = state.uid, state.pid, state.started, state.started_mono
        self._tg: anyio.abc.TaskGroup | None = None
        self._unwatch: anyio.Event | None = None  # set at stop: ends the policy watcher's wait at once
        self._walkers: Walkers | None = None  # the walker children, made in serve
        self._warmed = False  # their warm-up started (``_warm_if_sandboxed``)
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_cid = 0
        self.overrides = state.overrides  # a person's modes, kept across restarts
        # a checkpoint before each allowed call that can change the workspace (nexusd/undo, docs/UNDO.md)
        self.undo = state.undo = UndoService(
            config.state_dir, config.config_dir, spawn=self.spawn, audit=self._undo_audit
        )
        # Plain functions answer inline; coroutine functions (policy, threads) get a task.
        handlers: dict[type, Handler] = {
            p.Request: self.requests.on_request,
            p.Part: self._on_part,
            p.Cancel: self.requests.on_cancel,
            p.Subscribe: self._on_subscribe,
            p.Answer: self.answers.on_answer,
            p.Status: self.queries.on_status,
            p.Check: self.queries.on_check,
            p.SetMode: self._on_set_mode,
            p.Reload: self._on_reload,
            p.Rules: self.queries.on_rules,
            p.RuleChange: self.queries.on_rule_change,
            p.TrustChange: self.queries.on_trust_change,
            p.Probe: self.queries.on_probe,
            p.SandboxPlan: self.queries.on_sandbox_plan,
            p.SandboxReport: self.queries.on_sandbox_report,
            p.Audit: self.queries.on_audit,
            p.Ping: self._on_ping,
            p.Grants: self.given.on_grants,
            p.RevokeGrant: self.given.on_revoke_grant,
            p.SessionEnd: self._on_session_end,
            p.History: lambda c, m: self.undo.on_history(c.send, self._error_to(c, m.ref), m),
            p.Rewind: lambda c, m: self.undo.on_rewind(c.send, self._error_to(c, m.ref), m, c.label),
            p.Hold: self.holds.on_hold,
            p.RuleCheck: self.given.on_rule_check,
        }
        self.dispatch = Dispatch(state, handlers)  # a line to its concern, with the checks first

    def _on_part(self, conn: Connection, msg: p.Part) -> None:
        """A piece of a large input string; the request that names it takes it (``daemon/uploads.py``)."""
        if conn.uploads is None:
            conn.uploads = Uploads()
        conn.uploads.add(msg.upload, msg.text)

    def _error_to(self, conn: Connection, ref: str | None) -> Callable[[str, str], None]:
        return lambda code, message: self.reply_error(conn, code, message, ref)  # type: ignore[arg-type]

    def _undo_audit(self, call: p.CallInfo, decision: p.Decision) -> None:
        """An allow denied because its checkpoint failed ([undo] on_failure = "deny"): its own record."""
        rid = self.replies.record_id()
        self.replies.record(rid, call, decision, time.monotonic(), peer=None, event="undo_checkpoint_failed")

    # The state's values that change over the daemon's life live in the state alone.
    @property
    def probe(self) -> p.SandboxProbe | None:
        return self.state.probe

    @probe.setter
    def probe(self, value: p.SandboxProbe | None) -> None:
        self.state.probe = value

    @property
    def own_socket(self) -> str | None:
        return self.state.own_socket

    @own_socket.setter
    def own_socket(self, value: str | None) -> None:
        self.state.own_socket = value

    @property
    def network(self) -> Any:
        return self.state.network

    @network.setter
    def network(self, value: Any) -> None:
        self.state.network = value

    @property
    def stopping_now(self) -> bool:
        return self.state.stopping_now

    @stopping_now.setter
    def stopping_now(self, value: bool) -> None:
        self.state.stopping_now = value

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """A short task outside the task group (cheaper to start); ``serve`` cancels leftovers at the end."""
        task = asyncio.get_running_loop().create_task(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self, bound: BoundSocket) -> None:
        """Run until SIGTERM/SIGINT (or ``stop()``); the caller has already bound the socket."""
        self.audit.start()
        # The loop and the decision pool's threads share one interpreter lock: a thread busy with a big
        # tree's scan holds it up to the switch interval at a time, and each of a small call's hops between
        # the loop and a worker may wait that long (5 ms by default). 0.5 ms keeps those waits short.
        sys.setswitchinterval(0.0005)
        # the socket an agent's sandbox wrapper checks for (None when inherited: its path is not ours)
        self.own_socket = str(bound.path.absolute()) if bound.path is not None else None
        errors = self.store.load()
        for err in errors:
            log.error("policy error", error=err)
        for warning in self.store.warnings:  # settings not applied (Claude Code keys, a project's loosening ...)
            log.warning("policy warning", warning=warning)
        loop = asyncio.get_running_loop()
        for err in self.grants.load(time.time()):
            log.error("grants error", error=err)
        if (unreadable := self.overrides.load()) is not None:
            log.error("mode overrides unreadable", error=unreadable)
        for stale in clean_stale_temps(self.config.state_dir):  # left by a kill -9 mid-write
            log.info("removed a temporary file left by an interrupted write", file=str(stale))
        for g in self.grants.timed():
            self.given.arm(g.id, g.expires or 0.0)
        listener: asyncio.AbstractServer | None = None
        walkers: Walkers | None = None
        self._unwatch = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self.pending.run_timer, self.requests.expire)
                tg.start_soon(self._sweep)
                # Handlers in place before READY=1: systemd may send SIGHUP (reload) the moment it
                # sees READY, and SIGHUP's default action would kill the daemon.
                await tg.start(self._signal_loop, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
                self.pool.start()  # (after the signal handlers: a stop during start-up stays clean)
                # workspace walks in processes of their own: a big tree's walk holds no lock of ours
                walkers = self._walkers = Walkers(2, timeout=self.config.facts_deadline)
                nested.walk_elsewhere(walkers)
                self._warm_if_sandboxed()
                # A plain asyncio server: one Protocol object per connection, no task per idle connection.
                listener = await loop.create_unix_server(lambda: Connection(self), sock=bound.sock, backlog=4096)
                # a socket file removed while we run is noticed, logged and bound again (daemon/listener.py)
                tg.start_soon(watch_socket, bound, lambda s: loop.create_unix_server(lambda: Connection(self), sock=s))
                if self.probe_fn is not None:
                    tg.start_soon(self.queries.refresh_probe)
                if self.notifier.enabled:
                    tg.start_soon(self._notify_loop)
                tg.start_soon(self.alerts.run)
                if self.config.watch_policy:
                    from nexusd.daemon.watch import watch_policy

                    tg.start_soon(
                        watch_policy, lambda: [f for _, f in self.store.layer_files()], self.reload, self._unwatch
                    )
                tg.start_soon(self._run_network)
                self.notifier.ready(self.status_text())
                log.info(
                    "listening",
                    socket=str(bound.path) if bound.path else "<inherited>",
                    pid=self.pid,
                    version=__version__,
                    pending_timeout=self.config.pending_timeout,
                )
        finally:
            if listener is not None:
                listener.close()
            for task in list(self._tasks):
                task.cancel()
            for conn in list(self.conns):
                conn.kill()
            self.undo.close()  # a checkpoint still running must not hold the exit up
            self.pool.close()
            if walkers is not None:
                nested.walk_elsewhere(None)
                walkers.close()
            self.audit.close()
            self.agents.close()
            log.info("stopped")

    def _warm_if_sandboxed(self) -> None:
        """Start the walker children ahead of the first sandboxed call, once, and only when the policy sandboxes
        (the default): a gate-only daemon does not pay ~0.2 s of CPU and a process each for them. A call of a
        project that turns the sandbox on still gets one, started when it first asks."""
        walkers, tg = self._walkers, self._tg
        if self._warmed or walkers is None or tg is None:
            return
        try:
            wanted = sandbox_settings(self.store.policy).enabled
        except ValueError:  # broken settings sandbox with the defaults (sandbox/plan.py)
            wanted = True
        if wanted:
            self._warmed = True
            tg.start_soon(self._warm_walkers, walkers)

    @staticmethod
    async def _warm_walkers(walkers: Walkers) -> None:
        """The walker children started in a thread, not by the first sandboxed call (nor on the loop)."""
        try:
            await anyio.to_thread.run_sync(walkers.warm, abandon_on_cancel=True)
        except OSError as e:  # the first walk will say so (or walk here)
            log.warning("walker processes not started", error=str(e))

    async def _run_network(self) -> None:
        """The egress proxy of filtered sandboxes (nexusd/daemon/network.py), started without holding up the
        daemon's start and retried if it cannot start (out of descriptors): until it runs, filtered
        sandboxes get no network."""
        delay = 0.5
        while not self.stopping_now:
            try:
                from nexusd.daemon.network import NetworkGate  # an import needs a descriptor too
                from nexusd.sandbox.wrapper import release_stale_fifos

                # a killed daemon's filtered calls: nobody serves their FIFOs now (before we serve new ones)
                await anyio.to_thread.run_sync(release_stale_fifos, self.state.config.state_dir.absolute())
                gate_ = NetworkGate(self.state)
                async with anyio.create_task_group() as tg:
                    await tg.start(gate_.proxy.serve)
                    self.network = gate_
                return
            except Exception:
                self.network = None
                log.exception("the network proxy stopped or did not start: filtered sandboxes get no network")
            await anyio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _signal_loop(self, signals: set[signal.Signals], *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(*signals) as received:
            task_status.started()
            early = self.start_signals
            if early is not None and early.reload:
                await self.reload()
            if early is not None and early.stop is not None:
                log.info("signal received during start-up; stopping", signal=early.stop.name)
                await self.stop("daemon stopping")
                return
            async for signum in received:
                if signum == signal.SIGHUP:
                    await self.reload()
                    continue
                log.info("signal received; stopping", signal=signal.Signals(signum).name)
                await self.stop("daemon stopping")
                return

    async def stop(self, reason: str) -> None:
        """Deny every pending request, say Bye to everyone, and end the task group."""
        if self.stopping_now:
            return
        self.stopping_now = True
        self.notifier.stopping()
        for entry in list(self.pending.values()):
            self.answers.resolve(entry, "deny", "error", reason)
        bye = p.encode(p.Bye(reason=reason))
        for conn in list(self.conns):
            conn.post(bye)
        with anyio.move_on_after(2.0):
            while any(c.transport is not None and c.transport.get_write_buffer_size() for c in self.conns):
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(self.audit.flush)
        if self._unwatch is not None:
            self._unwatch.set()  # the watcher's thread returns at its next step, not at its 5 s timeout
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def accepted(self, conn: Connection) -> None:
        """At accept: the kernel's word on who connected; a stranger gets one error line and is closed."""
        assert conn.transport is not None
        try:
            cred = peer_credentials(conn.transport.get_extra_info("socket"))
        except OSError as e:
            self.errlog.note(
                "unknown peer", "peer credentials unavailable; refusing", {"error": str(e)}, time.monotonic()
            )
            self._refuse(conn, "peer credentials unavailable")
            return
        if cred.uid != self.uid:
            self.errlog.note(f"uid {cred.uid} (pid {cred.pid})", "refused a peer of another uid", {}, time.monotonic())
            self._refuse(conn, "only processes of the daemon's user are served")
            return
        conn.peer = with_parent(cred)  # its parent and start time, from the kernel, once
        self._next_cid += 1
        conn.cid = self._next_cid
        self.conns.add(conn)
        conn.timer = asyncio.get_running_loop().call_later(self.config.hello_timeout, conn.hello_expired)

    def _refuse(self, conn: Connection, message: str) -> None:
        assert conn.transport is not None
        conn.transport.write(p.encode(p.Error(code="forbidden", message=message)))
        conn.close_politely()  # never entered self.conns: nothing to undo

    def detached(self, conn: Connection) -> None:
        self.conns.discard(conn)
        self.subscribers.discard(conn)
        if conn.pending:
            for rid in list(conn.pending):
                entry = self.pending.get(rid)
                if entry is not None:
                    self.answers.resolve(
                        entry, "deny", "cancelled", "the requester disconnected", notify_requester=False
                    )
        conn.pending = None

    def framing_error(self, conn: Connection, code: p.ErrorCode, message: str) -> None:
        self.dispatch.framing_error(conn, code, message)

    def client_fault(self, conn: Connection, event: str, **fields: Any) -> None:
        """Anything a client can make the daemon log goes through the rate-limited ClientErrorLog."""
        self.state.client_fault(conn, event, **fields)

    async def _sweep(self) -> None:
        """Close stalled connections (idle, a line never finished, a UI that stopped reading) and end the error
        log's windows."""
        cfg = self.config
        limits = [t for t in (cfg.idle_timeout, cfg.line_timeout) if t > 0]
        tick = min(1.0, max(0.02, min(limits) / 4)) if limits else 1.0
        while True:
            await anyio.sleep(tick)
            now = time.monotonic()
            try:
                for conn in list(self.conns):  # also: a UI over --max-ui-output that stopped reading is dropped
                    conn.check_timeouts(now, cfg.idle_timeout, cfg.line_timeout)
                self.errlog.flush(now)
            except Exception:  # a bug here must cost one sweep, never the daemon
                log.exception("connection sweep failed")

    def on_line(self, conn: Connection, line: bytes) -> bool | Coroutine[Any, Any, None]:
        """Handle one line (``dispatch.py``): True when done, False to close the connection, or a coroutine."""
        return self.dispatch.on_line(conn, line)

    def reply_error(self, conn: Connection, code: p.ErrorCode, message: str, ref: str | None) -> None:
        self.state.reply_error(conn, code, message, ref)

    def _on_ping(self, conn: Connection, msg: p.Ping) -> None:
        conn.send(p.encode(p.Pong(ref=msg.ref)))

    def session_for(self, call: p.CallInfo) -> Session:
        return self.state.session_for(call)

    def session_by_id(self, sid: str) -> Session:
        return self.state.session_by_id(sid)

    def _on_subscribe(self, conn: Connection, msg: p.Subscribe) -> None:
        items = [e.item() for e in self.pending.values()]
        conn.subscribed = True
        self.subscribers.add(conn)
        conn.send(p.encode(p.Snapshot(items=items, ref=msg.ref)))

    def _on_session_end(self, conn: Connection, msg: p.SessionEnd) -> None:
        """The session's allow grants end now; what narrows it (deny answers, a person's mode) stays."""
        s = self.sessions.get(msg.session)
        if s is not None:
            s.allow_rules = ()
        for g in self.grants.end_session(msg.session, "allow"):
            log.info("grant ended with its session", id=g.id, rule=g.rule, session=msg.session)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"session {msg.session} ended")))

    def _on_set_mode(self, conn: Connection, msg: p.SetMode) -> None:
        if msg.mode is not None and (not msg.mode or len(msg.mode) > 64):
            self.reply_error(conn, "invalid_message", "mode must be a short non-empty name", msg.ref)
            return
        if msg.mode is not None and resolve(msg.mode) is None:
            # an unknown name would show in status and silently act as default: refuse it, with the list
            names = ", ".join(dict.fromkeys(spelling for spelling, _, _ in MODES))
            near = did_you_mean(msg.mode)
            hint = f"; did you mean {near!r}?" if near else ""
            self.reply_error(conn, "invalid_message", f"unknown mode {msg.mode!r}{hint}; valid modes: {names}", msg.ref)
            return
        try:
            self.overrides.set(msg.session, msg.mode)  # kept across restarts (daemon/overrides.py)
        except OSError as e:
            log.error("mode override could not be saved", error=str(e))
            self.reply_error(conn, "refused", f"mode not changed: it could not be saved ({e.strerror or e})", msg.ref)
            return
        self.session_by_id(msg.session).override_mode = msg.mode
        log.info("session mode set", session=msg.session, mode=msg.mode, by=conn.label)
        conn.send(p.encode(p.Ack(ref=msg.ref, detail=f"mode {msg.mode or '(agent)'}")))

    def status_text(self) -> str:
        return f"{len(self.pending)} pending"

    async def reload(self) -> list[str]:
        self.notifier.reloading()
        try:
            errors = list(self.store.load())
            if self.memo is not None:
                self.memo.clear()  # entries of the old policy could never hit again; free them
        except Exception as e:  # the store promises not to raise; fail safe if it does
            log.exception("policy reload failed")
            errors = [f"reload failed: {type(e).__name__}: {e}"]
        self.notifier.ready(self.status_text())
        if errors:
            for err in errors:
                log.error("policy error; keeping the last good policy", error=err)
        else:
            log.info("policy reloaded")
            self._warm_if_sandboxed()  # (a reload that turned the sandbox on)
        notice = p.encode(p.PolicyNotice(ok=not errors, errors=errors))
        for ui in list(self.subscribers):  # a UI dropped mid-fan-out must not cut it short
            ui.post(notice)
        return errors

    async def _on_reload(self, conn: Connection, msg: p.Reload) -> None:
        errors = await self.reload()
        if errors:
            self.reply_error(
                conn, "policy_error", "policy not reloaded, the last good one stays: " + "; ".join(errors), msg.ref
            )
        else:
            conn.send(p.encode(p.Ack(ref=msg.ref, detail="policy reloaded")))

    async def _notify_loop(self) -> None:
        interval = Notifier.watchdog_interval()
        last = ""
        next_ping = time.monotonic()
        while True:
            text = self.status_text()
            if text != last:
                self.notifier.status(text)
                last = text
            if interval and time.monotonic() >= next_ping:
                self.notifier.watchdog()
                next_ping = time.monotonic() + interval
            await anyio.sleep(min(1.0, interval) if interval else 1.0)
