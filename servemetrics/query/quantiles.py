"""Histogram quantiles from bucket increases, by PromQL ``histogram_quantile`` rules.

Source: Prometheus ``promql/quantile.go`` (bucketQuantile, ensureMonotonic): buckets sorted by upper
bound and made monotonic; the rank is ``q * count`` of the ``+Inf`` bucket; linear interpolation inside
the bucket that holds the rank; the first bucket's lower bound is 0 when its upper bound is positive
(otherwise its upper bound is returned); a rank in the ``+Inf`` bucket returns the highest finite bound.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence


def parse_le(le: str) -> float:
    """Upper bound of a bucket label (``"+Inf"`` -> inf). Raises ``ValueError`` on garbage."""
    return math.inf if le in ("+Inf", "+inf", "Inf", "inf") else float(le)


def monotonic(counts: Sequence[float]) -> list[float]:
    """Cumulative bucket counts made non-decreasing (each at least the one below it; regression C2)."""
    out: list[float] = []
    top = -math.inf
    for c in counts:
        top = max(top, c)
        out.append(top)
    return out


def bucket_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> float | None:
    """The ``q`` quantile (0 < q < 1) of cumulative ``counts`` with upper ``bounds`` (sorted, last inf).

    Returns None when there are no observations, fewer than two buckets, or no ``+Inf`` bucket.
    """
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return None
    cum = monotonic(counts)
    total = cum[-1]
    if total <= 0:
        return None
    rank = q * total
    b = bisect.bisect_left(cum, rank, hi=len(cum) - 1)
    if b == len(cum) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    lower = 0.0 if b == 0 else bounds[b - 1]
    below = 0.0 if b == 0 else cum[b - 1]
    in_bucket = cum[b] - below
    if in_bucket <= 0:
        return bounds[b]
    return lower + (bounds[b] - lower) * ((rank - below) / in_bucket)
