"""The decision pool on its own: deadlines, abandoned and spare workers, bounds, errors handed back."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from nexusd.decision.pool import FactPool, FactsLate, PoolFull


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_results_and_errors_come_back() -> None:
    async def main() -> None:
        pool = FactPool(2)
        pool.start()
        try:
            assert await pool.run(lambda: 41 + 1, 5) == 42
            with pytest.raises(ZeroDivisionError):
                await pool.run(lambda: 1 // 0, 5)
        finally:
            pool.close()

    run(main())


def test_a_stuck_job_misses_its_deadline_and_its_worker_is_replaced() -> None:
    never = threading.Event()

    async def main() -> None:
        pool = FactPool(1, max_extra=2)
        pool.start()
        try:
            t = time.monotonic()
            with pytest.raises(FactsLate, match="did not come back in time"):
                await pool.run(never.wait, 0.3)
            assert 0.25 < time.monotonic() - t < 3
            assert pool.status()["pool/stuck"] == 1
            # the replacement serves the next call at once
            t = time.monotonic()
            assert await pool.run(lambda: "ok", 5) == "ok"
            assert time.monotonic() - t < 1
        finally:
            never.set()
            pool.close()

    run(main())


def test_nobody_queues_behind_a_slow_job() -> None:
    """One worker, busy for 2 s: a spare starts and the quick call is answered long before."""
    release = threading.Event()

    async def main() -> None:
        pool = FactPool(1, slow_after=0.02)
        pool.start()
        try:
            slow = asyncio.ensure_future(pool.run(lambda: release.wait(2.0), 10))
            await asyncio.sleep(0.05)
            t = time.monotonic()
            assert await pool.run(lambda: "quick", 10) == "quick"
            assert time.monotonic() - t < 1.0
            assert pool.status()["pool/spares"] >= 1
            release.set()
            await slow
        finally:
            pool.close()

    run(main())


def test_threads_stay_bounded_and_past_the_bound_calls_are_denied_at_their_deadline() -> None:
    never = threading.Event()

    async def main() -> None:
        pool = FactPool(1, max_extra=2, slow_after=0.01)
        pool.start()
        try:
            stalls = [asyncio.ensure_future(pool.run(never.wait, 0.5)) for _ in range(6)]
            for s in stalls:
                with pytest.raises(FactsLate):
                    await s
            assert threading.active_count() < 20
            st = pool.status()
            assert st["pool/workers"] + st["pool/stuck"] <= 1 + 2
            with pytest.raises(FactsLate, match="no decision worker was free"):
                await pool.run(lambda: "x", 0.3)
        finally:
            never.set()
            pool.close()

    run(main())


def test_the_queue_is_bounded() -> None:
    never = threading.Event()

    async def main() -> None:
        pool = FactPool(1, max_queued=3, max_extra=0)
        pool.start()
        try:
            waiting = [asyncio.ensure_future(pool.run(never.wait, 1.0)) for _ in range(3)]
            await asyncio.sleep(0)
            with pytest.raises(PoolFull):
                await pool.run(lambda: 1, 1.0)
            for w in waiting:
                with pytest.raises(FactsLate):
                    await w
        finally:
            never.set()
            pool.close()

    run(main())
