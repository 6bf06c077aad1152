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
from servemetrics.store.duckdb_schema import counted, counter_deltas


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
        same = np.zeros(n, dtype=bool)
        same[1:] = sidx[1:] == sidx[:-1]
        gap = np.zeros(n, dtype=np.int64)
        gap[1:] = ts[1:] - ts[:-1]
        self.gap = gap
        self.near = same & (gap <= COUNTER_GAP_MS)
        rng = np.searchsorted(fetch_starts, ts, side="right")
        known = same.copy()
        known[1:] &= (rng[1:] == rng[:-1]) | virtual[:-1] | self.near[1:]
        self.known = known
        p_ts, p_val = np.zeros(n, dtype=np.int64), np.zeros(n)
        p_ts[1:], p_val[1:] = ts[:-1], val[:-1]
        self.d = counter_deltas(ts, val, p_ts, p_val, known)
        self.counted = counted(ts, val, p_ts, p_val, known)
        self._range_start = np.concatenate(([np.iinfo(np.int64).min], fetch_starts))[rng]

    def unknown(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions among ``wanted`` (a mask) without a known previous sample, and for each the start
        of its fetched range (its true previous sample lies before it)."""
        at = np.flatnonzero(wanted & ~self.known)
        return at, self._range_start[at]

    def resolve(self, at: np.ndarray, val: np.ndarray, found: np.ndarray, p_val: np.ndarray) -> None:
        """Set ``d`` of the samples ``at`` (values ``val``) from their true previous values ``p_val`` (where
        ``found``): always a gap, so ``v`` when the value dropped, else 0."""
        with np.errstate(invalid="ignore"):
            drop = found & ~(val >= p_val)
        self.d[at] = np.where(drop, val, 0.0)
        self.counted[at] = drop & (val != 0)


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
