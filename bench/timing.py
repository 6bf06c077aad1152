"""The one timer the benchmarks share: first call, p50 and p95 in ms of repeated calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """``(first, p50, p95)`` in milliseconds: ``first`` is the warm-up call, then ``runs`` timed calls
    (p95 is the nearest-rank sample at 0.95 of ``runs - 1``)."""
    t = time.perf_counter()
    fn()
    first = (time.perf_counter() - t) * 1000
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return first, statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
