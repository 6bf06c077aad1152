"""``ReadPool``: the bounded worker threads that compute metrics answers, and single-flight.

A metrics answer is computed in a worker thread, never on the event loop, and at most ``workers`` at
once (config ``reads``); further requests wait for a thread in arrival order. Without the bound, every
concurrent reader got a thread of the server's shared pool (40), and forty threads of mostly-Python
work took the interpreter lock from the event loop: with 50 readers of SERIES 24 h, ``/healthz`` took
2.1 s (p50) and the answers came no faster than from one reader. Two threads keep both cores busy
(DuckDB and numpy release the lock) and leave the loop its turns.

Single-flight: a request whose ``key`` equals that of an answer being computed waits for that answer
instead of computing its own (Grafana panels and several people on one dashboard send the same
query). Only requests that fix their window (both ends given) are shared, so a shared answer is the one
the request would have got; the caller builds the key from everything the answer depends on,
the organization included. The computation belongs to no request: a client that goes away does not
cancel it for the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

T = TypeVar("T")


class ReadPool:
    """At most ``workers`` answers computed at once, in threads; identical concurrent requests share one.

    Args:
        workers: threads computing answers at once (>= 1).
    """

    def __init__(self, workers: int) -> None:
        self._limiter = CapacityLimiter(workers)
        self._flights: dict[Hashable, asyncio.Future[Any]] = {}
        self.shared = 0
        """Requests answered by another request's computation (since start)."""

    @property
    def waiting(self) -> int:
        """Computations waiting for a free worker thread."""
        return int(self._limiter.statistics().tasks_waiting)

    @property
    def in_flight(self) -> int:
        """Distinct keyed computations running or waiting for a thread."""
        return len(self._flights)

    async def run(self, key: Hashable | None, fn: Callable[[], T]) -> T:
        """``fn()`` in a worker thread once one of the ``workers`` is free; its result, or what it raises.

        With a ``key``, a request arriving while a computation of the same key runs or waits gets that
        computation's result (or its exception) instead. Call inside the event loop.
        """
        if key is None:
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter)
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(anyio.to_thread.run_sync(fn, limiter=self._limiter))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        else:
            self.shared += 1
        result: T = await asyncio.shield(flight)
        return result

    def _landed(self, key: Hashable, flight: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved: no "never retrieved" warning when every waiter left
