"""In-memory side of ``DuckDBStore``: an immutable ``View`` of head and rollups, and the chunk cache.

The DuckDB file is the source of truth. The writer keeps a copy of ``head`` (segments of samples
sorted by series and ts) and of ``rollups`` (a ``RollupIndex``) in memory and publishes a new ``View``
after each commit; readers take the current view and never wait for the writer. Sealed chunks are read
from the file (through ``ChunkCache``). ``Generation`` is a sequence lock for the rare writes that change
sealed chunks (late samples, retention): readers that overlap one retry.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np

from servemetrics.store.duckdb_rollups import RollupIndex

Segment = tuple[np.ndarray, np.ndarray, np.ndarray]  # series id (uint32), ts (int64), value (float64)


_SPAN = 1 << 40


def _indices(i0: np.ndarray, i1: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(i0[k], i1[k])`` for every k."""
    n = i1 - i0
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(n) - n
    return np.repeat(i0 - offsets, n) + np.arange(total)


def empty_segment() -> Segment:
    """A segment without samples."""
    return np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.float64)


def sort_segment(sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> Segment:
    """Sort by (series, ts), stable."""
    order = np.lexsort((ts, sid))
    return sid[order], ts[order], val[order]


def first_wins(sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> Segment:
    """Sorted by (series, ts), only the first of equal (series, ts) kept (the sort is stable)."""
    sid, ts, val = sort_segment(sid, ts, val)
    keep = np.ones(ts.size, dtype=bool)
    keep[1:] = (sid[1:] != sid[:-1]) | (ts[1:] != ts[:-1])
    return sid[keep], ts[keep], val[keep]


def concat(segments: tuple[Segment, ...] | list[Segment]) -> Segment:
    """All samples of ``segments`` in one (unsorted) segment."""
    if not segments:
        return empty_segment()
    return tuple(np.concatenate([s[i] for s in segments]) for i in range(3))  # type: ignore[return-value]


MERGE_CAP = 1 << 20
"""Segments of this many samples or more are never merged again (until the seal rewrites the head)."""


def merge_sorted(a: Segment, b: Segment) -> Segment:
    """Two segments, each sorted by (series, ts) and with no (series, ts) in both, as one sorted segment:
    a linear merge (a stable sort of the concatenated keys finds the two runs), where keys fit in int64."""
    sid, ts, val = concat([a, b])
    if ts.size == 0:
        return sid, ts, val
    t0 = int(ts.min())
    if int(ts.max()) - t0 >= _SPAN or int(sid.max()) >= 1 << 22:
        return sort_segment(sid, ts, val)
    order = np.argsort(sid.astype(np.int64) * _SPAN + (ts - t0), kind="stable")
    return sid[order], ts[order], val[order]


def tiered(segments: tuple[Segment, ...], cap: int = MERGE_CAP) -> tuple[Segment, ...]:
    """``segments`` (oldest first) with the newest merged into the one before it while that one is at most
    twice its size and both are under ``cap`` samples: segment sizes then shrink geometrically from the
    oldest, so there are O(log(head / append)) of them below the cap, each sample is merged
    O(log(cap / append)) times, and no merge sorts more than 2 x ``cap`` samples (a merge of
    the whole head at every 33rd append made appends cost more the larger the head grew, issue 18)."""
    out = list(segments)
    while len(out) > 1:
        older, newer = out[-2][1].size, out[-1][1].size
        if older > 2 * newer or older >= cap or newer >= cap:
            break
        b = out.pop()
        out[-1] = merge_sorted(out[-1], b)
    return tuple(out)


@dataclass(frozen=True)
class View:
    """What readers see: samples at or after ``sealed_until`` (head) and the rollups of older ones."""

    sealed_until: int
    head: tuple[Segment, ...]
    rollups: RollupIndex
    _keys: dict[int, tuple[np.ndarray, int]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def with_head(self, segments: tuple[Segment, ...]) -> View:
        """The same view with other head segments, tiered (``tiered``) so that an append costs the same
        however large the head is."""
        return replace(self, head=tiered(segments))

    def head_keep(self, keep_from: int) -> tuple[Segment, ...]:
        """Head segments without samples before ``keep_from``, merged into one."""
        sid, ts, val = concat(self.head)
        m = ts >= keep_from
        return (sort_segment(sid[m], ts[m], val[m]),)

    def head_rows(self, sids: np.ndarray, ranges: list[tuple[int, int]], n_series: int) -> Segment:
        """Head samples of ``sids`` with ts in any of the sorted, disjoint ``ranges``."""
        starts = np.array([lo for lo, _ in ranges], dtype=np.int64)
        ends = np.array([hi for _, hi in ranges], dtype=np.int64)
        s = np.repeat(sids.astype(np.int64), starts.size)
        out = []
        for i, (sid, ts, val) in enumerate(self.head):
            if ts.size == 0:
                continue
            if int(ts.max()) - int(ts.min()) >= _SPAN or int(sid.max()) >= 1 << 22:  # too wide for keys
                pos = np.searchsorted(starts, ts, side="right") - 1
                m = (pos >= 0) & (ts < ends[np.maximum(pos, 0)]) & np.isin(sid, sids)
                out.append((sid[m], ts[m], val[m]))
                continue
            key, base = self._segment_key(i)
            lo = s * _SPAN + np.clip(np.tile(starts, sids.size) - base, 0, _SPAN)
            hi = s * _SPAN + np.clip(np.tile(ends, sids.size) - base, 0, _SPAN)
            idx = _indices(np.searchsorted(key, lo), np.searchsorted(key, hi))
            out.append((sid[idx], ts[idx], val[idx]))
        return concat(out)

    def _segment_key(self, i: int) -> tuple[np.ndarray, int]:
        """(series * 2**40 + ts - base) of segment ``i``, sorted like the segment, with its ``base``."""
        hit = self._keys.get(i)
        if hit is None:
            sid, ts, _ = self.head[i]
            base = int(ts.min())
            hit = self._keys[i] = (sid.astype(np.int64) * _SPAN + (ts - base), base)
        return hit

    def head_duplicates(self, sid: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Mask of the (sid, ts) pairs already in head: a binary search in each segment's sorted keys
        (``_segment_key``, cached per view), so the cost grows with the pairs asked and the log of the
        head, not with the head (a ``np.isin`` over the whole head made late samples cost more the
        larger the head grew, issue 18)."""
        dup = np.zeros(ts.size, dtype=bool)
        if ts.size == 0:
            return dup
        s64 = sid.astype(np.int64)
        for i, (h_sid, h_ts, _) in enumerate(self.head):
            if h_ts.size == 0:
                continue
            if int(h_ts.max()) - int(h_ts.min()) >= _SPAN or int(h_sid.max()) >= 1 << 22:  # too wide for keys
                t0 = min(int(h_ts.min()), int(ts.min()))
                span = max(int(h_ts.max()), int(ts.max())) - t0 + 1
                dup |= np.isin(s64 * span + (ts - t0), h_sid.astype(np.int64) * span + (h_ts - t0))
                continue
            key, base = self._segment_key(i)
            rel = ts - base
            fits = (rel >= 0) & (rel < _SPAN) & (s64 < 1 << 22)
            wanted = np.where(fits, s64, 0) * _SPAN + np.where(fits, rel, 0)
            at = np.minimum(np.searchsorted(key, wanted), key.size - 1)
            dup |= fits & (key[at] == wanted)
        return dup

    def head_samples(self) -> int:
        """How many samples head holds."""
        return sum(int(s[1].size) for s in self.head)


class Generation:
    """A sequence lock: odd while a write that changes sealed chunks commits."""

    def __init__(self) -> None:
        self.value = 0
        self.lock = threading.Lock()

    def begin_write(self) -> None:
        with self.lock:
            self.value += 1

    def end_write(self) -> None:
        with self.lock:
            self.value += 1

    def stable(self) -> int:
        """The current even generation (waits while a write is in progress)."""
        while True:
            g = self.value
            if g % 2 == 0:
                return g
            time.sleep(0.001)


class ChunkCache:
    """Decoded sealed chunks by (series id, start) for one generation, up to ``budget`` samples."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._gen = -1
        self._d: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int], gen: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The cached chunk (empty arrays: known not to exist), or ``None``."""
        return self._d.get(key) if gen == self._gen else None

    def put(self, items: list[tuple[tuple[int, int], tuple[np.ndarray, np.ndarray]]], gen: int) -> None:
        """Remember decoded chunks read in generation ``gen`` (the oldest go first when over budget)."""
        if self.budget <= 0:
            return
        with self._lock:
            if gen != self._gen:
                if gen < self._gen:
                    return
                self._gen, self._d, self._size = gen, {}, 0
            for key, arrays in items:
                self._d[key] = arrays
                self._size += arrays[0].size + 1
            while self._size > self.budget and self._d:
                old = self._d.pop(next(iter(self._d)))
                self._size -= old[0].size + 1
