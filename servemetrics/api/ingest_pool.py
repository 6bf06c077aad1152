"""``IngestPool``: the bounded worker threads that decode, adapt and store pushed samples.

A remote_write or import body is decoded, checked, adapted and appended off the event loop, so one large
write does not stall ``/healthz``, the API, the gateway or the scrapes. At most ``workers`` requests run
in threads at once and ``queue`` more wait for one; a request beyond those is answered at once with 503
``{"error": …, "retry_after": N}`` and ``Retry-After: N`` before its body is read (a remote_write sender
such as Prometheus retries a 503 after that delay), so memory is bounded by ``workers + queue`` bodies.

Python's cyclic garbage collector is paused while ingest work runs (``gc_paused``). A 2-million-sample
body makes millions of short-lived tuples; with the collector on, its full collections (they walk every
tracked object, holding the interpreter lock) stopped every other thread, the event loop included, for
up to 0.75 s each. The samples hold no reference cycles, so reference counting frees them all the same;
other garbage with cycles made meanwhile waits for the collector, which runs again when the last ingest
job ends, or at a job's end once it has been paused ``MAX_GC_PAUSE_S``.
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from servemetrics.api.errors import ApiError
from servemetrics.selfmetrics import SelfMetrics

T = TypeVar("T")

MAX_GC_PAUSE_S = 60.0
"""Longest the garbage collector stays paused while ingest jobs keep overlapping: past it, the job that
ends runs one full collection (and the pause starts again)."""

SWITCH_INTERVAL_S = 0.001
"""The interpreter's thread switch interval while ingest work runs (Python's default is 5 ms)."""

_pause_lock = threading.Lock()
_pause = {"jobs": 0, "since": 0.0, "ours": False, "switch": 0.005}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic garbage collection off and the thread switch interval ``SWITCH_INTERVAL_S`` for the
    block (any thread; nested and overlapping blocks count once); both restored when the last block ends
    (the collector only if it was on when the first began)."""
    with _pause_lock:
        if _pause["jobs"] == 0:
            _pause.update(since=time.monotonic(), ours=gc.isenabled(), switch=sys.getswitchinterval())
            gc.disable()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        _pause["jobs"] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause["jobs"] -= 1
            if _pause["jobs"] == 0:
                sys.setswitchinterval(float(_pause["switch"]))
            if _pause["jobs"] == 0 and _pause["ours"]:
                gc.enable()
            elif _pause["ours"] and time.monotonic() - float(_pause["since"]) > MAX_GC_PAUSE_S:
                gc.collect()
                _pause["since"] = time.monotonic()


def _paused(fn: Callable[..., T], *args: Any) -> T:
    with gc_paused():
        return fn(*args)


class IngestPool:
    """Admission and worker threads for pushed bodies (config ``ingest``).

    Args:
        workers: threads running ingest work at once (>= 1).
        queue: admitted requests that may wait for a thread (>= 0).
        retry_after_s: seconds a refused request is told to wait (rounded up to whole seconds).
        metrics: the service's own metrics (``ingest_in_flight``, ``ingest_refused``), or None.
    """

    def __init__(
        self, workers: int, queue: int, retry_after_s: float, metrics: SelfMetrics | None = None
    ) -> None:
        self.capacity = workers + queue
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        self._limiter = CapacityLimiter(workers)
        self._admitted = 0
        self._metrics = metrics

    @property
    def admitted(self) -> int:
        """Requests admitted and not finished (running in a thread or waiting for one)."""
        return self._admitted

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the ``workers + queue`` places for the block (call inside the event loop).

        Raises:
            ApiError: 503 with ``retry_after`` when every place is taken (nothing of the request is read).
        """
        if self._admitted >= self.capacity:
            if self._metrics is not None:
                self._metrics.ingest_refused.inc()
            raise ApiError(
                503,
                f"the service is busy storing other writes ({self._admitted} in progress or waiting, at "
                f"most ingest.workers + ingest.queue = {self.capacity}); retry after {self.retry_after_s} s",
                self.retry_after_s,
            )
        self._admitted += 1
        self._gauge()
        try:
            yield
        finally:
            self._admitted -= 1
            self._gauge()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread once one of the ``workers`` is free, the garbage collector
        paused meanwhile (``gc_paused``); its result, or what it raises. Not cancelled with the
        request: a started write finishes (its slot is held until then)."""
        return await anyio.to_thread.run_sync(_paused, fn, *args, limiter=self._limiter)

    def _gauge(self) -> None:
        if self._metrics is not None:
            self._metrics.ingest_in_flight.set(self._admitted)
