"""Evaluation of a ``Selection`` for ``DuckDBStore``: rollups for the aligned middle, raw samples at the edges.

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
from servemetrics.store.duckdb_schema import increases

Ranges = list[tuple[int, int]]
RawReader = Callable[[Ranges], tuple[np.ndarray, np.ndarray, np.ndarray]]
RollupReader = Callable[[int, int], dict[str, np.ndarray]]


@dataclass
class Plan:
    """Pieces of every value set: raw ``(vs, lo, hi)``, rollup ``(vs, lo, hi)`` and the raw fetch ranges."""

    raw: list[tuple[int, int, int]]
    roll: list[tuple[int, int, int]]
    fetch: Ranges


def plan(sel: Selection, rollup_ms: int, rollup_until: int) -> Plan:
    """Split each value set's read range into rollup buckets (aligned, sealed) and raw pieces."""
    raw: list[tuple[int, int, int]] = []
    roll: list[tuple[int, int, int]] = []
    fetch: Ranges = []
    lb = sel.lookback_ms
    inc = sel.reducer is Reducer.INCREASE
    for i, vs in enumerate(sel.value_sets):
        lo, hi = (vs.end_ms - lb, vs.end_ms) if sel.reducer is Reducer.LAST else (vs.start_ms, vs.end_ms)
        a = -(-lo // rollup_ms) * rollup_ms
        b = min(hi // rollup_ms * rollup_ms, rollup_until)
        pieces = [(lo, hi)]
        if a < b:
            roll.append((i, a, b))
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
    ext = np.append(arr.astype(np.float64), 0.0)
    idx = np.empty(2 * lo.size, dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return np.where(hi > lo, np.add.reduceat(ext, idx)[0::2], 0.0)


class _Stream:
    """Samples of the selected series, sorted by (series index, ts), keyed for range lookups."""

    def __init__(self, sidx: np.ndarray, ts: np.ndarray, val: np.ndarray, real: np.ndarray, t0: int, span: int):
        key = sidx.astype(np.int64) * span + (ts - t0)
        order = np.lexsort((~real, key))
        key, ts, val, sidx = key[order], ts[order], val[order], sidx[order]
        keep = np.ones(key.size, dtype=bool)
        keep[1:] = key[1:] != key[:-1]  # a real sample shadows the virtual copy of itself
        self.key, self.ts, self.val, self.sidx = key[keep], ts[keep], val[keep], sidx[keep]
        self.t0, self.span = t0, span
        n = self.key.size
        self.has_prev = np.zeros(n, dtype=bool)
        self.has_prev[1:] = self.sidx[1:] == self.sidx[:-1]
        self.prev_ts = np.empty(n, dtype=np.int64)
        prev_val = np.empty(n)
        self.prev_ts[1:], prev_val[1:] = self.ts[:-1], self.val[:-1]
        if n:
            self.prev_ts[0], prev_val[0] = 0, 0.0
        self.inc = increases(self.val, prev_val)

    def find(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.key, s.astype(np.int64) * self.span + (t - self.t0))


def evaluate(
    sel: Selection,
    sids: np.ndarray,
    rollup_ms: int,
    rollup_until: int,
    read_raw: RawReader,
    read_rollups: RollupReader,
) -> tuple[np.ndarray, np.ndarray]:
    """Per series (rows, in ``sids`` order) and value set (columns): the reduced value and has-data mask."""
    n_s, n_v = sids.size, len(sel.value_sets)
    p = plan(sel, rollup_ms, rollup_until)
    total = np.zeros((n_s, n_v))
    count = np.zeros((n_s, n_v), dtype=np.int64)
    r_sid, r_ts, r_val = read_raw(p.fetch) if p.raw else (np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0))
    roll = read_rollups(min(r[1] for r in p.roll), max(r[2] for r in p.roll)) if p.roll else None
    t0 = min([lo for lo, _ in p.fetch] + [r[1] for r in p.roll]) - 1
    span = max([hi for _, hi in p.fetch] + [r[2] for r in p.roll]) - t0 + 1
    v_sidx = np.searchsorted(sids, roll["series_id"]) if roll else np.zeros(0, np.int64)
    v_ts = roll["bucket"] + roll["last_off"] if roll else np.zeros(0, np.int64)
    v_val = roll["last_val"] if roll else np.zeros(0)
    stream = _Stream(
        np.concatenate([np.searchsorted(sids, r_sid), v_sidx]),
        np.concatenate([r_ts, v_ts]),
        np.concatenate([r_val, v_val]),
        np.concatenate([np.ones(r_ts.size, bool), np.zeros(v_ts.size, bool)]),
        t0,
        span,
    )
    if sel.reducer is Reducer.LAST:
        return _last(sel, stream, n_s)
    _raw_pieces(sel, stream, p.raw, n_s, total, count)
    if roll is not None:
        _roll_pieces(sel, roll, v_sidx, t0, span, p.roll, n_s, total, count)
    if sel.reducer is Reducer.MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / np.maximum(count, 1)
    return total, count > 0


def _grid(pieces: Sequence[tuple[int, int, int]], n_s: int) -> tuple[np.ndarray, ...]:
    arr = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
    s = np.repeat(np.arange(n_s), len(arr))
    return s, np.tile(arr[:, 0], n_s), np.tile(arr[:, 1], n_s), np.tile(arr[:, 2], n_s)


def _raw_pieces(sel: Selection, st: _Stream, pieces, n_s: int, total: np.ndarray, count: np.ndarray) -> None:
    if not pieces or n_s == 0:
        return
    s, v, lo, hi = _grid(pieces, n_s)
    i0, i1 = st.find(s, lo), st.find(s, hi)
    n = i1 - i0
    if sel.reducer is Reducer.MEAN:
        value = range_sum(st.val, i0, i1)
    else:
        starts = np.array([vs.start_ms for vs in sel.value_sets], dtype=np.int64)[v]
        value = range_sum(st.inc, np.minimum(i0 + 1, i1), i1)
        j = np.minimum(i0, max(st.key.size - 1, 0))
        ok = (n > 0) & st.has_prev[j] & (st.prev_ts[j] >= starts - sel.lookback_ms) if st.key.size else n > 0
        value = value + np.where(ok, st.inc[j] if st.key.size else 0.0, 0.0)
    np.add.at(total, (s, v), np.where(n > 0, value, 0.0))
    np.add.at(count, (s, v), n)


def _roll_pieces(sel, roll, sidx, t0, span, pieces, n_s, total, count) -> None:
    key = sidx.astype(np.int64) * span + (roll["bucket"] - t0)
    s, v, lo, hi = _grid(pieces, n_s)
    base = s.astype(np.int64) * span - t0
    i0, i1 = np.searchsorted(key, base + lo), np.searchsorted(key, base + hi)
    n = range_sum(roll["n"], i0, i1).astype(np.int64)
    if sel.reducer is Reducer.MEAN:
        value = range_sum(roll["sum"], i0, i1)
    else:
        first = roll["first_inc"]
        full = roll["inc"] + first
        starts = np.array([vs.start_ms for vs in sel.value_sets], dtype=np.int64)[v]
        value = range_sum(full, np.minimum(i0 + 1, i1), i1)
        j = np.minimum(i0, max(key.size - 1, 0))
        prev_ts = roll["bucket"][j] - roll["prev_age"][j]
        ok = (i1 > i0) & (roll["prev_age"][j] >= 0) & (prev_ts >= starts - sel.lookback_ms)
        value = value + np.where(i1 > i0, roll["inc"][j], 0.0) + np.where(ok, first[j], 0.0)
    np.add.at(total, (s, v), np.where(n > 0, value, 0.0))
    np.add.at(count, (s, v), n)


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
    sel: Selection, groups: Sequence[GroupKey], deployments: Sequence[str | None], value: np.ndarray, has: np.ndarray
) -> SelectResult:
    """Sum per group the series that serve each value set and have data there (``Cell`` or ``None``).

    Every group with a series that serves in some value set appears, even when all its cells are ``None``.
    """
    n_v = len(sel.value_sets)
    serve = np.array(
        [[d is not None and d in vs.deployment_ids for vs in sel.value_sets] for d in deployments], dtype=bool
    ).reshape(len(deployments), n_v)
    use = serve & has
    keys = sorted(set(groups))
    gi = np.array([keys.index(g) for g in groups], dtype=np.int64) if groups else np.zeros(0, np.int64)
    tot = np.zeros((len(keys), n_v))
    cnt = np.zeros((len(keys), n_v), dtype=np.int64)
    present = np.zeros(len(keys), dtype=bool)
    np.add.at(tot, gi, np.where(use, value, 0.0))
    np.add.at(cnt, gi, use.astype(np.int64))
    np.logical_or.at(present, gi, serve.any(axis=1))
    out: SelectResult = {}
    for k, key in enumerate(keys):
        if present[k]:  # a group whose series serve in some value set appears, even with no data
            out[key] = [Cell(float(t), int(c)) if c else None for t, c in zip(tot[k].tolist(), cnt[k].tolist())]
    return out
