"""The decision pool: where the slow part of a decision (its facts) runs, off the event loop, with a deadline.

Why threads. A call's facts are mostly file-system questions (realpath, lstat, the nested-repository walk,
project policy files): a thread blocked in a syscall releases the GIL and the loop goes on answering
other agents. A thread blocked for ever (a FUSE mount whose server never answers) cannot be killed, so
the pool *abandons* it: the call's deadline passes, the call is denied with the reason, and a replacement
thread takes the stuck one's place, up to ``max_stuck`` abandoned threads at once (a stuck thread that
returns after all leaves quietly and frees its place). Past that bound no thread is added: calls wait for
a live worker and are denied at their deadline, and memory stays bounded. The classification itself is
CPU work, which threads under CPython's GIL do not spread over cores; docs/ARCHITECTURE.md says what was
measured and why the pool is threads all the same.

Everything here is called from the event loop except ``_work``, which runs in the workers; a worker hands
its result back through ``loop.call_soon_threadsafe`` and touches no other state.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import structlog

log = structlog.get_logger("nexusd")

T = TypeVar("T")


class FactsLate(Exception):
    """A call's facts missed their deadline (a stalled file system, or every worker stuck on one)."""


class PoolFull(Exception):
    """More calls waiting for facts than the pool holds: refused at once, never queued without bound."""


class _Worker:
    __slots__ = ("abandoned", "job", "thread")

    def __init__(self) -> None:
        self.abandoned = False
        self.job: _Job[Any] | None = None  # the job it runs now (set and cleared by the worker)
        self.thread: threading.Thread | None = None


class _Job(Generic[T]):
    __slots__ = ("deadline", "expired", "fn", "fut", "label", "started", "worker")

    def __init__(self, fn: Callable[[], T], fut: asyncio.Future[T], deadline: float, label: str) -> None:
        self.fn, self.fut, self.deadline, self.label = fn, fut, deadline, label
        self.expired = False  # set on the loop: the deadline passed; a worker that dequeues it skips it
        self.worker: _Worker | None = None  # set by the worker that runs it
        self.started = 0.0  # when that worker began it


class FactPool:
    """``workers`` threads that compute facts, a queue, and a deadline per job.

    Nobody waits behind a slow call: while calls are queued and a worker has been on one job for longer
    than ``slow_after`` seconds with no worker idle, a spare thread is started (it retires once the queue
    is empty again). Threads in all, spares and abandoned ones included, never exceed ``workers +
    max_extra``."""

    def __init__(
        self,
        workers: int = 4,
        *,
        max_queued: int = 20_000,
        max_extra: int | None = None,
        slow_after: float = 0.02,
    ) -> None:
        if workers < 1:
            raise ValueError("the decision pool needs at least one worker")
        self.size = workers
        self.max_queued = max_queued
        self.max_extra = max_extra if max_extra is not None else max(8, 4 * workers)
        self.slow_after = slow_after
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _workers and stuck (the loop and the workers change them)
        self._workers: set[_Worker] = set()  # live: not abandoned
        self.stuck = 0  # abandoned threads still inside a job that missed its deadline
        self.inflight = 0  # jobs queued or running (loop-side count)
        self.late = 0  # jobs that missed their deadline, ever
        self.spares = 0  # spare threads started, ever
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._closed = False
        self._retiring = 0  # retirement notes (None) queued for spares no longer needed

    # ------------------------------------------------------------------ loop side

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for _ in range(self.size):
            self._spawn()

    def close(self) -> None:
        """Stop the live workers once the queue drains (abandoned ones are daemon threads, left behind)."""
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
        with self._lock:
            n = len(self._workers)
        for _ in range(n):
            self._queue.put(None)

    async def run(self, fn: Callable[[], T], timeout: float, label: str = "facts") -> T:
        """``fn()`` in a worker; raises ``FactsLate`` when it has not returned within ``timeout`` seconds
        (it may still be running: its result is dropped), ``PoolFull`` when too many calls wait."""
        loop = self._loop
        if loop is None or self._closed:
            raise FactsLate("the decision pool is not running")
        if self.inflight >= self.max_queued:
            raise PoolFull(f"{self.inflight} calls are already waiting for their facts (limit {self.max_queued})")
        fut: asyncio.Future[T] = loop.create_future()
        job = _Job(fn, fut, time.monotonic() + timeout, label)
        self.inflight += 1
        timer = loop.call_later(timeout, self._expire, job)
        self._queue.put(job)
        if self._ticker is None:
            self._ticker = loop.call_later(self.slow_after / 2, self._tick)
        try:
            return await fut
        finally:
            timer.cancel()
            self.inflight -= 1
            if self.inflight == 0:
                self._trim()

    def _trim(self) -> None:
        """Spares beyond ``size`` that have nothing to do: one retirement note each (any idle worker takes it)."""
        if self._closed or not self._queue.empty():
            return
        with self._lock:
            idle = sum(1 for w in self._workers if w.job is None)  # a busy one retires after its job, if due
            excess = min(idle, len(self._workers) - self.size - self._retiring)
            if excess > 0:
                self._retiring += excess
        for _ in range(excess):
            self._queue.put(None)

    def _tick(self) -> None:
        """While calls wait: a spare thread for each worker that is slow on its job, if none is idle."""
        self._ticker = None
        if self._closed or self.inflight == 0:
            return
        if not self._queue.empty():
            now = time.monotonic()
            with self._lock:
                live = list(self._workers)
                room = self.size + self.max_extra - len(live) - self.stuck
            jobs = [w.job for w in live]
            if all(j is not None for j in jobs):
                slow = sum(1 for j in jobs if j is not None and now - j.started > self.slow_after)
                for _ in range(min(slow, room, self._queue.qsize())):
                    self.spares += 1
                    self._spawn()
        else:
            self._trim()
        assert self._loop is not None
        self._ticker = self._loop.call_later(self.slow_after / 2, self._tick)

    def _expire(self, job: _Job[Any]) -> None:
        if job.fut.done():
            return
        job.expired = True
        self.late += 1
        worker = job.worker
        if worker is None:
            why = self._starved_reason()
        else:  # it is running: the thread is stuck on this call; a replacement serves the others
            why = f"its {job.label} did not come back in time (a file-system question that never returned?)"
            self._abandon(worker)
        job.fut.set_exception(FactsLate(why))

    def _starved_reason(self) -> str:
        with self._lock:
            live, stuck = len(self._workers), self.stuck
        if live == 0 or all(w.job is not None for w in list(self._workers)):
            return f"no decision worker was free in time ({stuck} stuck on file systems that never answered)"
        return "no decision worker was free in time"

    def _abandon(self, worker: _Worker) -> None:
        with self._lock:
            if worker.abandoned or worker not in self._workers:
                return
            worker.abandoned = True
            self._workers.discard(worker)
            self.stuck += 1
            short = len(self._workers) < self.size
            room = len(self._workers) + self.stuck < self.size + self.max_extra
        log.warning("decision worker stuck; abandoned", stuck=self.stuck, replaced=short and room)
        if short and room and not self._closed:
            self._spawn()

    def _spawn(self) -> None:
        worker = _Worker()
        t = threading.Thread(target=self._work, args=(worker,), name="nexusd-facts", daemon=True)
        worker.thread = t
        with self._lock:
            self._workers.add(worker)
        t.start()

    @staticmethod
    def _deliver(job: _Job[T], result: T | None, error: BaseException | None) -> None:
        if job.fut.done():
            return  # it came back after its deadline: the call was already denied
        if error is not None:
            job.fut.set_exception(error)
        else:
            job.fut.set_result(result)  # type: ignore[arg-type]

    def _returned(self) -> None:
        """An abandoned thread came back: its place is free again, and a replacement may be owed."""
        if self._closed:
            return
        with self._lock:
            short = len(self._workers) < self.size
        if short:
            self._spawn()

    # ------------------------------------------------------------------ worker side

    def _work(self, me: _Worker) -> None:
        loop = self._loop
        assert loop is not None
        get = self._queue.get
        while True:
            job = get()
            if job is None:  # a retirement note (a spare no longer needed) or the pool closing
                with self._lock:
                    self._retiring = max(0, self._retiring - 1)
                    leave = self._closed or len(self._workers) > self.size  # a note is advice, not an order
                    if leave:
                        self._workers.discard(me)
                if leave:
                    return
                continue
            if job.expired:
                continue
            job.worker = me
            job.started = time.monotonic()
            me.job = job
            result: Any = None
            error: BaseException | None = None
            try:
                result = job.fn()
            except BaseException as e:  # handed to the caller, which denies
                error = e
            me.job = None
            if not job.expired:
                try:
                    loop.call_soon_threadsafe(self._deliver, job, result, error)
                except RuntimeError:  # the loop is closed: the daemon is gone
                    return
            with self._lock:
                if me.abandoned:
                    self.stuck -= 1
                    retire, returned = True, True
                else:
                    retire = len(self._workers) - self._retiring > self.size and self._queue.empty()
                    returned = False
                    if retire:
                        self._workers.discard(me)  # a spare whose rush is over
            if returned:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._returned)
            if retire:
                return

    def status(self) -> dict[str, int]:
        with self._lock:
            live, stuck = len(self._workers), self.stuck
        return {
            "pool/workers": live,
            "pool/stuck": stuck,
            "pool/inflight": self.inflight,
            "pool/late": self.late,
            "pool/spares": self.spares,
        }
