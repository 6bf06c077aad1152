"""Evaluation of a ``Selection`` for ``DuckDBStore``: rollups for the aligned middle, raw samples at edges.

Every value set reads a range: ``[start, end)`` for MEAN and INCREASE, ``[end - lookback, end)`` for
LAST. The part of that range made of whole rollup buckets that are sealed is answered from ``rollups``
(one row per series per bucket); the ragged rest from raw samples (chunks and head). Raw samples are
fetched with ``lookback`` before each raw piece so that every sample's previous sample is at hand, and
each rollup bucket adds its last sample as a "virtual" sample: the previous sample of the first raw
sample after a run of buckets is the last sample of the last non-empty bucket. The result is the same as
``MemoryStore`` on the same data (see ``docs/store.md`` for the argument).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from servemetrics.store.base import Cell, GroupKey, Reducer, Selection, SelectResult

Ranges = list[tuple[int, int]]
RawReader = Callable[[Ranges], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass
class Plan:
    """Pieces of each value set: raw ``(vs, lo, hi)``, rollup ``(vs, lo, hi, tail follows)``; fetch ranges."""

    raw: list[tuple[int, int, int]]
    roll: list[tuple[int, int, int, bool]]
    fetch: Ranges


def plan(sel: Selection, rollup_ms: int, rollup_until: int) -> Plan:
    """Split each value set's read range into rollup buckets (aligned, sealed) and raw pieces."""
    raw: list[tuple[int, int, int]] = []
    roll: list[tuple[int, int, int, bool]] = []
    fetch: Ranges = []
    lb = sel.lookback_ms
    inc = sel.reducer is Reducer.INCREASE
    for i, vs in enumerate(sel.value_sets):
        lo, hi = (vs.end_ms - lb, vs.end_ms) if sel.reducer is Reducer.LAST else (vs.start_ms, vs.end_ms)
        a = -(-lo // rollup_ms) * rollup_ms
        b = min(hi // rollup_ms * rollup_ms, rollup_until)
        pieces = [(lo, hi)]
        if a < b:
            roll.append((i, a, b, b < hi))
            pieces = [p for p in ((lo, a), (b, hi)) if p[0] < p[1]]
            if inc and b < hi and a == lo:  # a tail piece without a head piece: prev may precede the set
                fetch.append((lo - lb, lo))
        for p_lo, p_hi in pieces:
            raw.append((i, p_lo, p_hi))
            fetch.append((p_lo - lb if inc else p_lo, p_hi))
    return Plan(raw, roll, merge_ranges(fetch))


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

    ``val_ext`` and ``inc_ext`` (each sample's delta to the previous one) carry one extra 0 at the end
    for ``_range_sum_ext``; the previous sample of ``j`` is ``j - 1`` when ``has_prev(j)``.
    """

    def __init__(self, sidx: np.ndarray, ts: np.ndarray, val: np.ndarray, t0: int, span: int) -> None:
        self.sidx, self.ts, self.t0, self.span = sidx, ts, t0, span
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
        return cls(sidx[order], ts[order], val[order], t0, span)

    @property
    def val_ext(self) -> np.ndarray:
        if self._val_ext is None:
            self._val_ext = np.append(self.val, 0.0)
        return self._val_ext

    @property
    def inc_ext(self) -> np.ndarray:
        """``increases`` (a drop is a reset) of each sample to the one before it, in place."""
        if self._inc is None:
            val, n = self.val, self.ts.size
            inc = np.empty(n + 1)
            inc[n] = 0.0
            if n:
                inc[0] = val[0]
                d = inc[1:n]
                with np.errstate(invalid="ignore"):
                    np.subtract(val[1:], val[:-1], out=d)
                reset = np.greater_equal(val[1:], val[:-1])
                np.logical_not(reset, out=reset)  # also where a value is NaN, as in ``increases``
                np.copyto(d, val[1:], where=reset)
            self._inc = inc
        return self._inc

    def prev_within(self, j: np.ndarray, since: np.ndarray) -> np.ndarray:
        """Per index ``j`` (valid): the sample has a previous sample of its series at or after ``since``."""
        jm = np.maximum(j - 1, 0)
        return (j > 0) & (self.sidx[jm] == self.sidx[j]) & (self.ts[jm] >= since)

    def find(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.key, s.astype(np.int64) * self.span + (t - self.t0))


class RollupIndex:
    """The ``rollups`` table in memory, sorted by (series, bucket); ``key`` = series << 32 | bucket number."""

    COLUMNS = ("series_id", "bucket", "n", "sum", "inc", "first_inc", "prev_age", "last_off", "last_val")

    def __init__(self, cols: dict[str, np.ndarray], rollup_ms: int, presorted: bool = False) -> None:
        sid = np.asarray(cols["series_id"], dtype=np.int64)
        bucket = np.asarray(cols["bucket"], dtype=np.int64)
        key = (sid << 32) | (bucket // rollup_ms)
        order = slice(None) if presorted else np.argsort(key, kind="stable")
        self.rollup_ms = rollup_ms
        self.key = key[order]
        self.bucket = bucket[order]
        self.n = np.asarray(cols["n"], dtype=np.int64)[order]
        self.sum = np.asarray(cols["sum"], dtype=np.float64)[order]
        self.inc = np.asarray(cols["inc"], dtype=np.float64)[order]
        first = np.asarray(cols["first_inc"], dtype=np.float64)[order]
        self.prev_age = np.asarray(cols["prev_age"], dtype=np.int64)[order]  # -1: no previous sample
        self.first_inc = np.where(self.prev_age >= 0, first, 0.0)
        self.full_inc = self.inc + self.first_inc
        self.last_ts = self.bucket + np.asarray(cols["last_off"], dtype=np.int64)[order]
        self.last_val = np.asarray(cols["last_val"], dtype=np.float64)[order]

    @classmethod
    def empty(cls, rollup_ms: int) -> RollupIndex:
        return cls({c: np.zeros(0) for c in cls.COLUMNS}, rollup_ms, presorted=True)

    def columns(self) -> dict[str, np.ndarray]:
        return {
            "series_id": self.key >> 32,
            "bucket": self.bucket,
            "n": self.n,
            "sum": self.sum,
            "inc": self.inc,
            "first_inc": self.first_inc,
            "prev_age": self.prev_age,
            "last_off": self.last_ts - self.bucket,
            "last_val": self.last_val,
        }

    def merged(self, cols: dict[str, np.ndarray]) -> RollupIndex:
        """A new index with the rows ``cols`` (keys not present yet) added."""
        if len(cols["bucket"]) == 0:
            return self
        mine = self.columns()
        return RollupIndex(
            {c: np.concatenate([mine[c], np.asarray(cols[c])]) for c in self.COLUMNS}, self.rollup_ms
        )

    def ranges(self, sids: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row ranges ``[i0, i1)`` of series ``sids`` with buckets in ``[lo, hi)`` (multiples of the step)."""
        base = sids.astype(np.int64) << 32
        r = self.rollup_ms
        return np.searchsorted(self.key, base | (lo // r)), np.searchsorted(self.key, base | (hi // r))


def evaluate(
    sel: Selection, sids: np.ndarray, rollups: RollupIndex, rollup_until: int, read_raw: RawReader
) -> tuple[np.ndarray, np.ndarray]:
    """Per series (rows, in ``sids`` order) and value set (columns): the reduced value and has-data mask.

    ``read_raw(ranges)`` gives the raw samples of ``sids`` in ``ranges`` as (index into ``sids``, ts,
    value), sorted by (index, ts) and unique.
    """
    n_s, n_v = sids.size, len(sel.value_sets)
    p = plan(sel, rollups.rollup_ms, rollup_until)
    total = np.zeros(n_s * n_v)
    count = np.zeros(n_s * n_v, dtype=np.int64)
    r_idx, r_ts, r_val = (
        read_raw(p.fetch) if p.raw else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    )
    v_s, v_ts, v_val = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    if p.roll:
        rs, rv, rlo, rhi = _grid([r[:3] for r in p.roll], n_s)
        i0, i1 = rollups.ranges(sids[rs], rlo, rhi)
        tail = np.tile(np.array([r[3] for r in p.roll], dtype=bool), n_s)
        need = (i1 > i0) & (tail | (sel.reducer is Reducer.LAST))  # last sample of a run of buckets
        j = i1[need] - 1
        v_s, v_ts, v_val = rs[need], rollups.last_ts[j], rollups.last_val[j]
        if sel.reducer is not Reducer.LAST:
            _roll_pieces(sel, rollups, rs, rv, i0, i1, total, count)
    if sel.reducer is not Reducer.LAST and not p.raw:
        return _finish(sel, total.reshape(n_s, n_v), count.reshape(n_s, n_v))
    t0 = min([lo for lo, _ in p.fetch] + [r[1] for r in p.roll]) - 1
    span = max([hi for _, hi in p.fetch] + [r[2] for r in p.roll]) - t0 + 1
    if v_ts.size == 0:
        stream = _Stream(r_idx, r_ts, r_val, t0, span)
    else:
        stream = _Stream.unsorted(
            np.concatenate([r_idx, v_s]),
            np.concatenate([r_ts, v_ts]),
            np.concatenate([r_val, v_val]),
            np.concatenate([np.ones(r_ts.size, bool), np.zeros(v_ts.size, bool)]),
            t0,
            span,
        )
    if sel.reducer is Reducer.LAST:
        return _last(sel, stream, n_s)
    _raw_pieces(sel, stream, p.raw, n_s, total, count)
    return _finish(sel, total.reshape(n_s, n_v), count.reshape(n_s, n_v))


def _finish(sel: Selection, total: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if sel.reducer is Reducer.MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / np.maximum(count, 1)
    return total, count > 0


def _grid(pieces: Sequence[tuple[int, int, int]], n_s: int) -> tuple[np.ndarray, ...]:
    arr = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
    s = np.repeat(np.arange(n_s), len(arr))
    return s, np.tile(arr[:, 0], n_s), np.tile(arr[:, 1], n_s), np.tile(arr[:, 2], n_s)


def _accumulate(
    total: np.ndarray, count: np.ndarray, cell: np.ndarray, value: np.ndarray, n: np.ndarray
) -> None:
    """Add ``value`` and ``n`` into the flat (series x value set) cells ``cell`` (repeats allowed)."""
    size = total.size
    total += np.bincount(cell, weights=np.where(n > 0, value, 0.0), minlength=size)
    count += np.bincount(cell, weights=n, minlength=size).astype(np.int64)


def _raw_pieces(sel: Selection, st: _Stream, pieces, n_s: int, total: np.ndarray, count: np.ndarray) -> None:
    if not pieces or n_s == 0:
        return
    n_v = len(sel.value_sets)
    s, v, lo, hi = _grid(pieces, n_s)
    i0, i1 = st.find(s, lo), st.find(s, hi)
    n = i1 - i0
    if sel.reducer is Reducer.MEAN:
        value = _range_sum_ext(st.val_ext, i0, i1)
    else:
        inc = st.inc_ext
        value = _range_sum_ext(inc, np.minimum(i0 + 1, i1), i1)
        some = n > 0
        j = i0[some]
        starts = np.array([vs.start_ms for vs in sel.value_sets], dtype=np.int64)[v[some]]
        first = np.where(st.prev_within(j, starts - sel.lookback_ms), inc[j], 0.0)
        value[some] += first
    _accumulate(total, count, s * n_v + v, value, n)


def _roll_pieces(sel, ix: RollupIndex, s, v, i0, i1, total, count) -> None:
    n = range_sum(ix.n, i0, i1).astype(np.int64)
    if sel.reducer is Reducer.MEAN:
        value = range_sum(ix.sum, i0, i1)
    else:
        starts = np.array([vs.start_ms for vs in sel.value_sets], dtype=np.int64)[v]
        value = range_sum(ix.full_inc, np.minimum(i0 + 1, i1), i1)
        j = np.minimum(i0, max(ix.key.size - 1, 0))
        if ix.key.size:
            prev_ts = ix.bucket[j] - ix.prev_age[j]
            ok = (i1 > i0) & (ix.prev_age[j] >= 0) & (prev_ts >= starts - sel.lookback_ms)
            value = value + np.where(i1 > i0, ix.inc[j], 0.0) + np.where(ok, ix.first_inc[j], 0.0)
    _accumulate(total, count, s * len(sel.value_sets) + v, value, n)


def _last(sel: Selection, st: _Stream, n_s: int) -> tuple[np.ndarray, np.ndarray]:
    n_v = len(sel.value_sets)
    ends = np.array([vs.end_ms for vs in sel.value_sets], dtype=np.int64)
    s = np.repeat(np.arange(n_s), n_v)
    e = np.tile(ends, n_s)
    j = st.find(s, e) - 1
    if st.key.size == 0:
        return np.zeros((n_s, n_v)), np.zeros((n_s, n_v), dtype=bool)
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (st.sidx[jj] == s) & (st.ts[jj] >= e - sel.lookback_ms)
    return np.where(ok, st.val[jj], 0.0).reshape(n_s, n_v), ok.reshape(n_s, n_v)


def group_cells(
    sel: Selection,
    groups: Sequence[GroupKey],
    deployments: Sequence[str | None],
    value: np.ndarray,
    has: np.ndarray,
) -> SelectResult:
    """Sum per group the series that serve each value set and have data there (``Cell`` or ``None``).

    Every group with a series that serves in some value set appears, even when all its cells are ``None``.
    """
    n_v = len(sel.value_sets)
    names = sorted({d for d in deployments if d is not None})
    masks = np.zeros((len(names) + 1, n_v), dtype=bool)  # the last row: no deployment_id, never serves
    for k, d in enumerate(names):
        masks[k] = [d in vs.deployment_ids for vs in sel.value_sets]
    code = {d: k for k, d in enumerate(names)}
    serve = masks[np.array([code.get(d, len(names)) for d in deployments], dtype=np.int64)]  # type: ignore[arg-type]
    use = serve & has
    keys = sorted(set(groups))
    kidx = {g: k for k, g in enumerate(keys)}
    gi = np.array([kidx[g] for g in groups], dtype=np.int64)
    tot = np.zeros((len(keys), n_v))
    cnt = np.zeros((len(keys), n_v), dtype=np.int64)
    present = np.zeros(len(keys), dtype=bool)
    np.add.at(tot, gi, np.where(use, value, 0.0))
    np.add.at(cnt, gi, use.astype(np.int64))
    np.logical_or.at(present, gi, serve.any(axis=1))
    out: SelectResult = {}
    for k, key in enumerate(keys):
        if present[k]:  # a group whose series serve in some value set appears, even with no data
            out[key] = [
                Cell(t, c) if c else None for t, c in zip(tot[k].tolist(), cnt[k].tolist(), strict=True)
            ]
    return out
