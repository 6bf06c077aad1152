"""``ReadPool``: the bound on answers computed at once, single-flight, and the keys the metrics routes
share answers under."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from servemetrics.api.read_pool import ReadPool
from servemetrics.api.routes.metrics import MetricsParams, _flight
from servemetrics.query.windows import Mode
from servemetrics.registry.records import ModelInfo

WAIT_S = 60.0


async def until(cond: Callable[[], bool]) -> None:
    """Wait (yielding to the loop) until ``cond()``; fails after ``WAIT_S``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not cond():
        assert loop.time() < deadline, "condition not met"
        await asyncio.sleep(0.005)


class Gate:
    """Blocking work: counts its calls and how many run at once; each waits for ``open``."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls = 0
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    def work(self, result: object = "answer", error: Exception | None = None) -> Callable[[], object]:
        def fn() -> object:
            with self._lock:
                self.calls += 1
                self.running += 1
                self.most = max(self.most, self.running)
            self.open.wait(WAIT_S)
            with self._lock:
                self.running -= 1
            if error is not None:
                raise error
            return result

        return fn


def test_identical_requests_share_one_computation() -> None:
    async def main() -> None:
        pool, gate = ReadPool(2), Gate()
        tasks = [asyncio.ensure_future(pool.run("k", gate.work())) for _ in range(5)]
        await until(lambda: gate.calls == 1 and pool.shared == 4)
        gate.open.set()
        assert await asyncio.gather(*tasks) == ["answer"] * 5
        assert gate.calls == 1 and pool.in_flight == 0
        assert await pool.run("k", gate.work("again")) == "again"  # landed: the next one computes

    asyncio.run(main())


def test_a_shared_failure_reaches_every_waiter() -> None:
    async def main() -> None:
        pool, gate = ReadPool(2), Gate()
        tasks = [asyncio.ensure_future(pool.run("k", gate.work(error=ValueError("bad")))) for _ in range(3)]
        await until(lambda: pool.shared == 2)
        gate.open.set()
        got = await asyncio.gather(*tasks, return_exceptions=True)
        assert [str(e) for e in got] == ["bad"] * 3 and gate.calls == 1

    asyncio.run(main())


def test_at_most_workers_compute_at_once_the_rest_wait() -> None:
    async def main() -> None:
        pool, gate = ReadPool(2), Gate()
        tasks = [asyncio.ensure_future(pool.run(None if i % 2 else i, gate.work(i))) for i in range(5)]
        await until(lambda: gate.running == 2 and pool.waiting == 3)
        assert gate.calls == 2
        gate.open.set()
        assert await asyncio.gather(*tasks) == list(range(5))
        assert gate.most == 2 and gate.calls == 5

    asyncio.run(main())


def test_a_waiter_that_leaves_does_not_cancel_the_others() -> None:
    async def main() -> None:
        pool, gate = ReadPool(1), Gate()
        first = asyncio.ensure_future(pool.run("k", gate.work()))
        second = asyncio.ensure_future(pool.run("k", gate.work()))
        await until(lambda: gate.calls == 1 and pool.shared == 1)
        first.cancel()  # the client that started it went away
        with pytest.raises(asyncio.CancelledError):
            await first
        gate.open.set()
        assert await second == "answer"

    asyncio.run(main())


def _model(org: int) -> ModelInfo:
    return ModelInfo("m1", "m", org, f"org{org}", 0)


def test_only_fixed_windows_are_shared_and_keys_hold_the_organization() -> None:
    fixed = MetricsParams(Mode.SERIES, 1_000, 2_000, ["a", "b"])
    assert (
        _flight("environment", _model(1), "production", MetricsParams(Mode.SERIES, 1_000, None, None)) is None
    )
    assert (
        _flight("environment", _model(1), "production", MetricsParams(Mode.SERIES, None, 2_000, None)) is None
    )
    one = _flight("environment", _model(1), "production", fixed)
    assert one is not None and hash(one) == hash(_flight("environment", _model(1), "production", fixed))
    assert one != _flight("environment", _model(2), "production", fixed)  # another organization
    assert one != _flight("deployment", _model(1), "production", fixed)
    assert one != _flight("environment", _model(1), "development", fixed)
    assert one != _flight(
        "environment", _model(1), "production", MetricsParams(Mode.SERIES, 1_000, 2_000, ["a"])
    )
