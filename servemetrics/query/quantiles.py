"""Histogram quantiles from bucket increases, by PromQL ``histogram_quantile`` rules, and the merge of
histograms with different bucket layouts (``merge_layouts``).

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


def cumulative_at(bound: float, bounds: Sequence[float], counts: Sequence[float]) -> float:
    """One histogram's cumulative count at ``bound``, which need not be one of its own ``bounds`` (sorted
    upper bounds, ``counts`` cumulative and monotonic): exact at its own bounds; linear inside a bucket
    (``histogram_quantile``'s own assumption; below the first positive bound from 0); beyond its highest
    finite bound the count stays there (its ``+Inf`` bucket's observations have no known value); at
    ``+Inf`` its total."""
    b = bisect.bisect_left(bounds, bound)
    if b < len(bounds) and bounds[b] == bound:
        return counts[b]
    if b == len(bounds) or math.isinf(bound):
        return counts[-1]
    if math.isinf(bounds[b]):
        return counts[b - 1] if b > 0 else 0.0
    if b == 0:
        return counts[0] * bound / bounds[0] if bounds[0] > 0 and bound > 0 else 0.0
    lo, hi = bounds[b - 1], bounds[b]
    return counts[b - 1] + (counts[b] - counts[b - 1]) * (bound - lo) / (hi - lo)


def merge_layouts(groups: Sequence[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The ``(bound, cumulative count)`` buckets of several histograms as one, sorted by bound.

    Histograms of one bucket layout add up per bound (PromQL's ``sum by (le)``: exact). When layouts
    differ (engines, versions, ``--custom-histogram-buckets``), a per-bound sum would be silently wrong
    (a bound of one layout would miss the other's observations below it); instead every histogram is
    read at every bound of the union (``cumulative_at``) and those add up. Under the linear-in-bucket
    assumption of ``bucket_quantile`` this is the combined distribution itself, so its quantiles are
    those of all observations together.
    """
    layouts = [sorted(g) for g in groups if g]
    if len({tuple(b for b, _ in g) for g in layouts}) <= 1:
        summed: dict[float, float] = {}
        for g in layouts:
            for bound, count in g:
                summed[bound] = summed.get(bound, 0.0) + count
        return sorted(summed.items())
    union = sorted({b for g in layouts for b, _ in g})
    totals = [0.0] * len(union)
    for g in layouts:
        bounds = [b for b, _ in g]
        counts = monotonic([c for _, c in g])
        for j, bound in enumerate(union):
            totals[j] += cumulative_at(bound, bounds, counts)
    return list(zip(union, totals, strict=True))
