"""Evaluation of a ``Selection`` for ``DuckDBStore``: rollups for the aligned middle, raw samples at edges.

Every value set reads a range: ``[start, end)`` for MEAN and INCREASE, ``[end - lookback, end)`` for
LAST. The part of that range made of whole rollup buckets that are sealed is answered from ``rollups``
(one row per series per bucket); the ragged rest from raw samples (chunks and head). Raw samples are
fetched with ``lookback`` before each raw piece so that every sample's previous sample is at hand, and
each rollup bucket adds its last sample as a "virtual" sample: the previous sample of the first raw
sample after a run of buckets is the last sample of the last non-empty bucket. The result is the same as
``MemoryStore`` on the same data (see ``docs/store.md`` for the argument).

Per series only (``duckdb_groups.group_cells`` then sums a group's series); combining across series,
deployments and label sets is ``query/execute.py``'s job (docs/store.md "Who computes what"). Times
are epoch ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from servemetrics.store.base import COUNTER_GAP_MS, Reducer, Selection
from servemetrics.store.duckdb_increase import StreamDeltas, raw_edge_parts, rollup_edge_parts
from servemetrics.store.duckdb_rollups import RollupIndex

Ranges = list[tuple[int, int]]
"""Sorted, disjoint half-open time ranges ``[lo, hi)`` (epoch ms)."""
RawReader = Callable[[Ranges], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""``read_raw(ranges)``: the raw samples in ``ranges`` as (index into ``sids``, ts, value), sorted by
(index, ts) and unique."""
PreviousReader = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""``read_previous(index, before)``: per (index into ``sids``, ts ms) the series' last sample that is not
a stale marker before that ts, as (found, ts, value)."""
Reduced = tuple[np.ndarray, np.ndarray]
"""Per series (rows) and value set (columns): the reduced value and the has-data mask."""


class RawPiece(NamedTuple):
    """A part ``[lo, hi)`` of value set ``value_set``'s read range answered from raw samples."""

    value_set: int
    lo: int
    hi: int


class RollupPiece(NamedTuple):
    """A run of whole sealed rollup buckets ``[lo, hi)`` of value set ``value_set``'s read range;
    ``tail_follows``: a raw piece of the same value set starts at ``hi``."""

    value_set: int
    lo: int
    hi: int
    tail_follows: bool


@dataclass
class ReadPlan:
    """The pieces of every value set (raw and rollup) and the raw ranges to fetch for them; INCREASE: the
    value set edges whose straddling pair is read from raw samples (``raw_edges``) or from the rollup
    bucket starting there (``roll_edges``)."""

    raw: list[RawPiece]
    roll: list[RollupPiece]
    fetch: Ranges
    raw_edges: list[int] = field(default_factory=list)
    roll_edges: list[int] = field(default_factory=list)


def plan_reads(sel: Selection, rollup_ms: int, rollup_until: int) -> ReadPlan:
    """Split each value set's read range into rollup buckets (aligned to ``rollup_ms``, sealed before
    ``rollup_until``) and raw pieces, with the raw ranges to fetch. INCREASE fetches ``COUNTER_GAP_MS``
    before each raw piece (for each sample's previous one) and around each edge not answered by a sealed
    bucket. LAST reads raw samples only (a rollup skips stale markers, which LAST must see)."""
    raw: list[RawPiece] = []
    roll: list[RollupPiece] = []
    fetch: Ranges = []
    increase = sel.reducer is Reducer.INCREASE
    for i, vs in enumerate(sel.value_sets):
        lo = vs.end_ms - sel.lookback_ms if sel.reducer is Reducer.LAST else vs.start_ms
        hi = vs.end_ms
        buckets_lo = -(-lo // rollup_ms) * rollup_ms  # the first bucket boundary at or after lo
        buckets_hi = min(hi // rollup_ms * rollup_ms, rollup_until)  # the last boundary at or before hi
        pieces = [(lo, hi)]
        if buckets_lo < buckets_hi and sel.reducer is not Reducer.LAST:
            roll.append(RollupPiece(i, buckets_lo, buckets_hi, buckets_hi < hi))
            pieces = [p for p in ((lo, buckets_lo), (buckets_hi, hi)) if p[0] < p[1]]
        for piece_lo, piece_hi in pieces:
            raw.append(RawPiece(i, piece_lo, piece_hi))
            fetch.append((piece_lo - COUNTER_GAP_MS if increase else piece_lo, piece_hi))
    plan = ReadPlan(raw, roll, [])
    if increase:
        for x in sorted({e for vs in sel.value_sets for e in (vs.start_ms, vs.end_ms)}):
            if x % rollup_ms == 0 and x + rollup_ms <= rollup_until:
                plan.roll_edges.append(x)
            else:
                plan.raw_edges.append(x)
                fetch.append((x - COUNTER_GAP_MS, x + COUNTER_GAP_MS))
    plan.fetch = merge_ranges(fetch)
    return plan


def merge_ranges(ranges: Ranges) -> Ranges:
    """Sort and merge overlapping or touching half-open ranges."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def range_sum(arr: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``arr[lo[k]:hi[k]].sum()`` for every k (0 for empty ranges), without cumulative-sum round-off."""
    if lo.size == 0:
        return np.zeros(0)
    return _range_sum_ext(np.append(arr.astype(np.float64, copy=False), 0.0), lo, hi)


def _range_sum_ext(ext: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``range_sum`` on an array with one extra element at the end (so ``hi`` may be the length)."""
    idx = np.empty(2 * lo.size, dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return np.where(hi > lo, np.add.reduceat(ext, idx)[0::2], 0.0)


class _Stream:
    """Samples of the selected series, sorted by (series index, ts) and unique, keyed for range lookups.

    ``val_ext`` carries one extra 0 at the end for ``_range_sum_ext``; ``virtual`` marks the last samples
    of rollup runs (``_Evaluation.virtual``) among the raw ones.
    """

    def __init__(
        self,
        sidx: np.ndarray,
        ts: np.ndarray,
        val: np.ndarray,
        t0: int,
        span: int,
        virtual: np.ndarray | None = None,
    ) -> None:
        self.sidx, self.ts, self.t0, self.span = sidx, ts, t0, span
        self.virtual = np.zeros(ts.size, dtype=bool) if virtual is None else virtual
        key = sidx.astype(np.int64)  # a copy
        key *= span
        key += ts
        key -= t0
        self.key = key
        self.val = val
        self._inc: np.ndarray | None = None
        self._val_ext: np.ndarray | None = None

    @classmethod
    def unsorted(
        cls, sidx: np.ndarray, ts: np.ndarray, val: np.ndarray, real: np.ndarray, t0: int, span: int
    ) -> _Stream:
        """Sorted from parts; a real sample shadows a virtual one at the same (series, ts)."""
        key = sidx.astype(np.int64) * span + (ts - t0)
        # real before virtual at the same key; parts arrive mostly sorted, which a stable sort exploits
        order = np.argsort(key * 2 + ~real, kind="stable")
        key = key[order]
        keep = np.ones(key.size, dtype=bool)
        keep[1:] = key[1:] != key[:-1]
        order = order[keep]
        return cls(sidx[order], ts[order], val[order], t0, span, ~real[order])

    @property
    def val_ext(self) -> np.ndarray:
        """The values with one extra 0 at the end (for ``_range_sum_ext``)."""
        if self._val_ext is None:
            self._val_ext = np.append(self.val, 0.0)
        return self._val_ext

    def find(self, series: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Per (series index, ts): the position of the first sample of that series at or after ts."""
        found: np.ndarray = np.searchsorted(self.key, series.astype(np.int64) * self.span + (ts - self.t0))
        return found


class _Samples(NamedTuple):
    """Samples as parallel arrays: index into ``sids``, ts (epoch ms), value."""

    series: np.ndarray
    ts: np.ndarray
    value: np.ndarray


_NO_SAMPLES = _Samples(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))


class _RollupRows(NamedTuple):
    """Every (series, rollup piece) pair: the series index, value set, the rollup rows ``[first, end)``
    holding the piece's buckets, and the piece's ``tail_follows``."""

    series: np.ndarray
    value_set: np.ndarray
    first: np.ndarray
    end: np.ndarray
    tail_follows: np.ndarray


@dataclass
class _Evaluation:
    """One ``evaluate`` call: its inputs and read plan, and the helpers every reducer shares. Results are
    accumulated flat, one cell per (series, value set): ``series * n_sets + value_set``."""

    sel: Selection
    sids: np.ndarray
    rollups: RollupIndex
    reads: ReadPlan
    read_raw: RawReader
    read_previous: PreviousReader
    n_series: int
    n_sets: int

    def zeros(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat accumulators: per (series, value set) cell a total and a sample count."""
        size = self.n_series * self.n_sets
        return np.zeros(size), np.zeros(size, dtype=np.int64)

    def rollup_rows(self) -> _RollupRows:
        """Every (series, rollup piece) pair with its rollup rows."""
        series, value_set, lo, hi = _grid([r[:3] for r in self.reads.roll], self.n_series)
        first, end = self.rollups.ranges(self.sids[series], lo, hi)
        tail = np.tile(np.array([r.tail_follows for r in self.reads.roll], dtype=bool), self.n_series)
        return _RollupRows(series, value_set, first, end, tail)

    def virtual(self, rows: _RollupRows, wanted: np.ndarray) -> _Samples:
        """The last sample of each run of buckets (``wanted`` among the non-empty ones)."""
        need = (rows.end > rows.first) & wanted
        last_row = rows.end[need] - 1
        return _Samples(rows.series[need], self.rollups.last_ts[last_row], self.rollups.last_val[last_row])

    def stream(self, virtual: _Samples) -> _Stream:
        """The raw samples of every raw piece (none without raw pieces) and the ``virtual`` samples."""
        reads = self.reads
        raw = _Samples(*self.read_raw(reads.fetch)) if reads.fetch else _NO_SAMPLES
        if self.sel.reducer is not Reducer.LAST and raw.value.size:
            real = ~np.isnan(raw.value)  # stale markers: only LAST reads them
            if not real.all():
                raw = _Samples(raw.series[real], raw.ts[real], raw.value[real])
        t0 = min([lo for lo, _ in reads.fetch] + [r.lo for r in reads.roll]) - 1
        span = max([hi for _, hi in reads.fetch] + [r.hi for r in reads.roll]) - t0 + 1
        if virtual.ts.size == 0:
            return _Stream(raw.series, raw.ts, raw.value, t0, span)
        return _Stream.unsorted(
            np.concatenate([raw.series, virtual.series]),
            np.concatenate([raw.ts, virtual.ts]),
            np.concatenate([raw.value, virtual.value]),
            np.concatenate([np.ones(raw.ts.size, bool), np.zeros(virtual.ts.size, bool)]),
            t0,
            span,
        )

    def shaped(self, total: np.ndarray, count: np.ndarray) -> Reduced:
        """Flat accumulators -> (series x value set) values and has-data mask."""
        shape = (self.n_series, self.n_sets)
        return total.reshape(shape), count.reshape(shape) > 0


def evaluate(
    sel: Selection,
    sids: np.ndarray,
    rollups: RollupIndex,
    rollup_until: int,
    read_raw: RawReader,
    read_previous: PreviousReader,
) -> Reduced:
    """Per series (rows, in ``sids`` order) and value set (columns): the reduced value and has-data mask.

    ``rollups`` holds the rollup rows sealed before ``rollup_until`` (epoch ms); ``read_raw(ranges)``
    gives the raw samples of ``sids`` in ``ranges`` as (index into ``sids``, ts, value), sorted by
    (index, ts) and unique; ``read_previous`` a series' last sample before a time (``PreviousReader``).
    The reducer's rule is ``_EVALUATORS[sel.reducer]``.
    """
    reads = plan_reads(sel, rollups.rollup_ms, rollup_until)
    evaluation = _Evaluation(
        sel, sids, rollups, reads, read_raw, read_previous, int(sids.size), len(sel.value_sets)
    )
    return _EVALUATORS[sel.reducer](evaluation)


def _with_rollups(
    ev: _Evaluation,
    add_rollups: Callable[[_Evaluation, _RollupRows, np.ndarray, np.ndarray], None],
) -> tuple[np.ndarray, np.ndarray, _Samples]:
    """Flat totals and counts with the rollup pieces added, and the virtual samples (the last sample of
    each run of buckets a raw piece follows) the raw stream must carry."""
    total, count = ev.zeros()
    if not ev.reads.roll:
        return total, count, _NO_SAMPLES
    rows = ev.rollup_rows()
    add_rollups(ev, rows, total, count)
    return total, count, ev.virtual(rows, rows.tail_follows)


def _summed(
    ev: _Evaluation,
    add_rollups: Callable[[_Evaluation, _RollupRows, np.ndarray, np.ndarray], None],
    add_raw: Callable[[_Evaluation, _Stream, np.ndarray, np.ndarray], None],
) -> tuple[np.ndarray, np.ndarray]:
    """Flat totals and sample counts of every cell: the rollup pieces, then the raw pieces."""
    total, count, virtual = _with_rollups(ev, add_rollups)
    if ev.reads.raw:
        add_raw(ev, ev.stream(virtual), total, count)
    return total, count


def _evaluate_mean(ev: _Evaluation) -> Reduced:
    """MEAN: the sum of the samples in ``[start, end)`` over their number."""
    total, count = _summed(ev, _rollup_sums, _raw_sums)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = total / np.maximum(count, 1)
    return ev.shaped(total, count)


def _evaluate_increase(ev: _Evaluation) -> Reduced:
    """INCREASE (``duckdb_increase``: ``C + P(hi) - P(lo)`` per series and value set): the counted deltas
    of the samples in each value set from rollup runs and raw pieces, then the straddling pairs' parts."""
    total, count, virtual = _with_rollups(ev, _rollup_increases)
    if ev.n_series == 0:
        return ev.shaped(total, count)
    stream = ev.stream(virtual)
    starts = np.array([lo for lo, _ in ev.reads.fetch], dtype=np.int64)
    deltas = StreamDeltas(stream.sidx, stream.ts, stream.val, stream.virtual, starts)
    if ev.reads.raw:
        _raw_increases(ev, stream, deltas, total, count)
    _edge_parts(ev, stream, deltas, total, count)
    return ev.shaped(total, count)


def _evaluate_last(ev: _Evaluation) -> Reduced:
    """LAST: the latest sample in ``[end - lookback, end)``; a run of buckets gives its last sample."""
    virtual = _NO_SAMPLES
    if ev.reads.roll:
        rows = ev.rollup_rows()
        virtual = ev.virtual(rows, np.ones(rows.tail_follows.size, dtype=bool))
    return _latest(ev, ev.stream(virtual))


def _grid(pieces: Sequence[tuple[int, int, int]], n_series: int) -> tuple[np.ndarray, ...]:
    """Every (series, piece) pair: series index, value set, lo, hi (pieces repeat per series)."""
    arr = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
    series = np.repeat(np.arange(n_series), len(arr))
    return series, np.tile(arr[:, 0], n_series), np.tile(arr[:, 1], n_series), np.tile(arr[:, 2], n_series)


def _accumulate(
    total: np.ndarray, count: np.ndarray, cell: np.ndarray, value: np.ndarray, n: np.ndarray
) -> None:
    """Add ``value`` and ``n`` into the flat (series x value set) cells ``cell`` (repeats allowed)."""
    size = total.size
    total += np.bincount(cell, weights=value, minlength=size)
    count += np.bincount(cell, weights=n, minlength=size).astype(np.int64)


def _raw_grid(ev: _Evaluation, stream: _Stream) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (series, raw piece) pair: the flat cell, value set and stream range ``[first, end)``."""
    series, value_set, lo, hi = _grid(ev.reads.raw, ev.n_series)
    return series * ev.n_sets + value_set, value_set, stream.find(series, lo), stream.find(series, hi)


def _raw_sums(ev: _Evaluation, stream: _Stream, total: np.ndarray, count: np.ndarray) -> None:
    if ev.n_series == 0:
        return
    cell, _, first, end = _raw_grid(ev, stream)
    _accumulate(total, count, cell, _range_sum_ext(stream.val_ext, first, end), end - first)


def _raw_increases(
    ev: _Evaluation, stream: _Stream, deltas: StreamDeltas, total: np.ndarray, count: np.ndarray
) -> None:
    """Each raw piece's counted deltas; a sample in a piece whose true previous sample the stream lacks
    (after a gap longer than the fetch) gets it from ``read_previous``."""
    cell, value_set, first, end = _raw_grid(ev, stream)
    at, before = deltas.unknown_in(first, end)
    if at.size:
        found, _, p_val = ev.read_previous(stream.sidx[at], before)
        deltas.resolve(at, stream.val[at], found, p_val)
    value = _range_sum_ext(deltas.d_ext, first, end)
    pairs = (end - first) - deltas.uncounted_in(first, end)
    # a pair ending on the value set's start lies before it: it gives the value set no data
    if stream.ts.size:  # none: every sample read was a stale marker (a series that left its target)
        head = np.minimum(first, stream.ts.size - 1)
        pairs = pairs - ((end > first) & (stream.ts[head] == _starts(ev.sel)[value_set]) & deltas.near[head])
    _accumulate(total, count, cell, value, pairs)


def _edge_parts(
    ev: _Evaluation, stream: _Stream, deltas: StreamDeltas, total: np.ndarray, count: np.ndarray
) -> None:
    """Add ``P(end) - P(start)`` to every (series, value set); a pair straddling the end gives the value
    set data even without a sample in it (a step between two samples of a sparse scrape)."""
    edges = np.array(sorted(ev.reads.raw_edges + ev.reads.roll_edges), dtype=np.int64)
    n_e = edges.size
    part = np.zeros((ev.n_series, n_e))
    ok = np.zeros((ev.n_series, n_e), dtype=bool)
    series = np.arange(ev.n_series)
    for cols, raw in ((ev.reads.raw_edges, True), (ev.reads.roll_edges, False)):
        if not cols:
            continue
        k = np.searchsorted(edges, np.asarray(cols, dtype=np.int64))
        s_idx, x = np.repeat(series, k.size), np.tile(edges[k], ev.n_series)
        if raw:
            first = stream.find(s_idx, x)
            at = np.minimum(first, max(stream.ts.size - 1, 0))
            mine = (first < stream.ts.size) & (stream.sidx[at] == s_idx) if stream.ts.size else first < 0
            p, o = raw_edge_parts(deltas, stream.ts, first, mine, x)
        else:
            p, o = rollup_edge_parts(ev.rollups, ev.sids[s_idx], x)
        part[s_idx, np.tile(k, ev.n_series)], ok[s_idx, np.tile(k, ev.n_series)] = p, o
    lo = np.searchsorted(edges, _starts(ev.sel))
    hi = np.searchsorted(edges, np.array([vs.end_ms for vs in ev.sel.value_sets], dtype=np.int64))
    flat_total = total.reshape(ev.n_series, ev.n_sets)
    flat_total += part[:, hi] - part[:, lo]
    flat_count = count.reshape(ev.n_series, ev.n_sets)
    flat_count += ok[:, hi]


def _starts(sel: Selection) -> np.ndarray:
    return np.array([vs.start_ms for vs in sel.value_sets], dtype=np.int64)


def _rollup_sums(ev: _Evaluation, rows: _RollupRows, total: np.ndarray, count: np.ndarray) -> None:
    index = ev.rollups
    n = range_sum(index.n, rows.first, rows.end).astype(np.int64)
    cell = rows.series * ev.n_sets + rows.value_set
    _accumulate(total, count, cell, range_sum(index.sum, rows.first, rows.end), n)


def _rollup_increases(ev: _Evaluation, rows: _RollupRows, total: np.ndarray, count: np.ndarray) -> None:
    """A run of buckets' counted deltas: every bucket's (the first sample's included, wherever its
    previous sample lies: the rule depends on the pair only); data: the samples that count, less a pair
    ending exactly on the value set's start."""
    index = ev.rollups
    value = range_sum(index.full_inc, rows.first, rows.end)
    pairs = range_sum(index.pairs, rows.first, rows.end)
    if index.key.size:
        at = np.minimum(rows.first, index.key.size - 1)
        age = index.prev_age[at]
        starts = _starts(ev.sel)[rows.value_set]
        near = (age >= 0) & (age + index.first_ts[at] - index.bucket[at] <= COUNTER_GAP_MS)
        pairs = pairs - ((rows.end > rows.first) & (index.first_ts[at] == starts) & near)
    _accumulate(total, count, rows.series * ev.n_sets + rows.value_set, value, pairs)


def _latest(ev: _Evaluation, stream: _Stream) -> Reduced:
    """Per cell the latest sample of the series before the value set's end, if within ``lookback_ms`` and
    not a stale marker."""
    n_series, n_sets = ev.n_series, ev.n_sets
    ends = np.array([vs.end_ms for vs in ev.sel.value_sets], dtype=np.int64)
    series = np.repeat(np.arange(n_series), n_sets)
    end = np.tile(ends, n_series)
    latest = stream.find(series, end) - 1
    if stream.key.size == 0:
        return np.zeros((n_series, n_sets)), np.zeros((n_series, n_sets), dtype=bool)
    at = np.maximum(latest, 0)  # a valid index even where there is no sample before the end
    ok = (latest >= 0) & (stream.sidx[at] == series) & (stream.ts[at] >= end - ev.sel.lookback_ms)
    ok &= ~np.isnan(stream.val[at])  # the latest is a stale marker: the series left its target
    return np.where(ok, stream.val[at], 0.0).reshape(n_series, n_sets), ok.reshape(n_series, n_sets)


_EVALUATORS: dict[Reducer, Callable[[_Evaluation], Reduced]] = {
    Reducer.MEAN: _evaluate_mean,
    Reducer.INCREASE: _evaluate_increase,
    Reducer.LAST: _evaluate_last,
}
"""Reducer -> its evaluation; a test keeps it complete for every ``Reducer``."""
