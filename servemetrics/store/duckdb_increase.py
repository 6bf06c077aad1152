"""The counter rule of ``DuckDBStore`` on arrays: each sample's counted delta, and the parts of the pairs
that straddle a value set's edges (``duckdb_eval._evaluate_increase`` puts them together).

INCREASE of a value set ``[lo, hi)`` (``store.base``: each pair's delta spread evenly over ``(t0, t1]``)
is computed as ``C + P(hi) - P(lo)``: ``C`` sums the counted delta of every sample in ``[lo, hi)``
(``counter_deltas``; rollup buckets carry it summed), and ``P(x)`` is the part of the pair straddling
``x`` (``t0 < x <= t1``, at most ``COUNTER_GAP_MS`` apart) that lies before ``x``: ``d (x - t0) / (t1 -
t0)``. ``C`` counts the whole delta of the first sample after ``lo`` and none of the pair across ``hi``;
the two ``P`` move the parts across the edges, so a pair's delta is shared by the value sets it overlaps
and the totals over any tiling of a window are equal (docs/store.md "Counters between samples").
Times are epoch ms.
"""

from __future__ import annotations

import numpy as np

from servemetrics.store.base import COUNTER_GAP_MS
from servemetrics.store.duckdb_rollups import RollupIndex


class StreamDeltas:
    """Per sample of a stream (sorted by series index, ts; markers removed): its counted delta ``d``,
    whether its previous sample is the one before it in the stream at most ``COUNTER_GAP_MS`` earlier
    (``near``: the pair is spread), whether the stream holds its true previous sample (``known``), and
    whether it gives its value set data (``counted``: ``duckdb_schema.counted``).

    The stream's previous sample is the true one when both lie in the same fetched range (every sample
    of a range is read), when it is a rollup run's last sample (``virtual``), or when it is near (each
    range starts ``COUNTER_GAP_MS`` before what it serves). ``d`` of an unknown sample is 0 until
    ``resolve`` is given its true previous sample.
    """

    def __init__(
        self, sidx: np.ndarray, ts: np.ndarray, val: np.ndarray, virtual: np.ndarray, fetch_starts: np.ndarray
    ) -> None:
        n = ts.size
        self.gap = np.zeros(n, dtype=np.int64)
        np.subtract(ts[1:], ts[:-1], out=self.gap[1:])
        near = np.zeros(n, dtype=bool)
        np.equal(sidx[1:], sidx[:-1], out=near[1:])
        near &= self.gap <= COUNTER_GAP_MS
        self.near = near
        self.d_ext = np.zeros(n + 1)  # one extra 0 at the end, for range sums
        d = self.d_ext[:n]
        np.subtract(val[1:], val[:-1], out=d[1:])
        np.copyto(d, val, where=d < 0)  # a drop is a reset: the delta is the new value
        # the rest is rare: a series' first sample in the stream, and samples after a longer gap
        other = np.flatnonzero(~near)
        d[other] = 0.0
        self.d = d
        self.counted = near.copy()
        prev = np.maximum(other - 1, 0)
        same = (other > 0) & (sidx[prev] == sidx[other])
        rng = np.searchsorted(fetch_starts, ts[other], side="right")
        known = same & (virtual[prev] | (rng == np.searchsorted(fetch_starts, ts[prev], side="right")))
        self.known = np.ones(n, dtype=bool)
        self.known[other] = known
        self._other, self._other_start = other, np.concatenate(([np.iinfo(np.int64).min], fetch_starts))[rng]
        at = other[known]
        self.resolve(at, val[at], np.ones(at.size, dtype=bool), val[prev[known]])

    def unknown_in(self, first: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions inside the ranges ``[first, end)`` without a known previous sample, and
        for each the start of its fetched range (its true previous sample lies before it)."""
        pick = ~self.known[self._other]
        at, start = self._other[pick], self._other_start[pick]
        inside = _inside(at, first, end)
        return at[inside], start[inside]

    def uncounted_in(self, first: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per range ``[first, end)``: how many of its samples give no data (``counted`` is false)."""
        off = self._other[~self.counted[self._other]]
        gone: np.ndarray = np.searchsorted(off, end) - np.searchsorted(off, first)
        return gone

    def resolve(self, at: np.ndarray, val: np.ndarray, found: np.ndarray, p_val: np.ndarray) -> None:
        """Set ``d`` of the samples ``at`` (values ``val``) from their true previous values ``p_val`` (where
        ``found``): always a gap, so ``v`` when the value dropped, else 0."""
        with np.errstate(invalid="ignore"):
            drop = found & ~(val >= p_val)
        self.d[at] = np.where(drop, val, 0.0)
        self.counted[at] = drop & (val != 0)


def _inside(at: np.ndarray, first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per position of ``at``: whether it lies in one of the ranges ``[first, end)`` (they may overlap)."""
    keep = end > first
    order = np.argsort(first[keep])
    lo, hi = first[keep][order], np.maximum.accumulate(end[keep][order]) if keep.any() else end[keep]
    k = np.searchsorted(lo, at, side="right") - 1
    inside: np.ndarray = (k >= 0) & (at < hi[np.maximum(k, 0)]) if lo.size else np.zeros(at.size, dtype=bool)
    return inside


def raw_edge_parts(
    deltas: StreamDeltas, ts: np.ndarray, first: np.ndarray, series_ok: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``P(x)`` per (series, edge) from the stream: ``first`` is the position of the series' first sample
    at or after ``x`` (``series_ok``: it exists and belongs to the series). Returns (part, straddles)."""
    at = np.minimum(first, max(ts.size - 1, 0))
    ok = series_ok & deltas.near[at] if ts.size else series_ok
    if not ts.size:
        return np.zeros(x.size), ok
    with np.errstate(invalid="ignore", divide="ignore"):
        part = deltas.d[at] * (x - (ts[at] - deltas.gap[at])) / deltas.gap[at]
    return np.where(ok, part, 0.0), ok


def rollup_edge_parts(rollups: RollupIndex, sids: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(x)`` per (series id, sealed bucket boundary ``x``) from the bucket starting at ``x``: its first
    sample's pair straddles ``x`` when it has a previous sample at most ``COUNTER_GAP_MS`` before it (an
    empty bucket: no pair can straddle, ``ROLLUP_MS`` being longer). Returns (part, straddles)."""
    i0, i1 = rollups.ranges(sids, x, x + rollups.rollup_ms)
    if not rollups.key.size:
        return np.zeros(x.size), np.zeros(x.size, dtype=bool)
    at = np.minimum(i0, rollups.key.size - 1)
    age = rollups.prev_age[at]
    span = age + (rollups.first_ts[at] - rollups.bucket[at])
    ok = (i1 > i0) & (age >= 0) & (span <= COUNTER_GAP_MS)
    with np.errstate(invalid="ignore", divide="ignore"):
        part = rollups.first_inc[at] * age / np.maximum(span, 1)
    return np.where(ok, part, 0.0), ok
