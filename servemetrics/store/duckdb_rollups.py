"""``RollupIndex``: the ``rollups`` table of ``DuckDBStore`` in memory (one row per series per 30-minute
bucket of sealed samples: count, sum, increases, last sample), sorted by (series, bucket), which answers
the aligned middle of a long window without decoding a chunk (``duckdb_eval``; docs/store.md).
Times are epoch ms.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class RollupIndex:
    """The ``rollups`` table in memory, sorted by (series, bucket); ``key`` = series << 32 | bucket number."""

    COLUMNS = (
        "series_id",
        "bucket",
        "n",
        "sum",
        "inc",
        "first_inc",
        "prev_age",
        "last_off",
        "last_val",
        "first_off",
        "pairs",
    )

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
        self.first_ts = self.bucket + np.asarray(cols["first_off"], dtype=np.int64)[order]
        self.pairs = np.asarray(cols["pairs"], dtype=np.int64)[order]

    @classmethod
    def empty(cls, rollup_ms: int) -> RollupIndex:
        """An index without rows, for buckets of ``rollup_ms``."""
        return cls({c: np.zeros(0) for c in cls.COLUMNS}, rollup_ms, presorted=True)

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as the ``rollups`` table's columns (``COLUMNS``)."""
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
            "first_off": self.first_ts - self.bucket,
            "pairs": self.pairs,
        }

    _ARRAYS = (
        "key",
        "bucket",
        "n",
        "sum",
        "inc",
        "prev_age",
        "first_inc",
        "full_inc",
        "last_ts",
        "last_val",
        "first_ts",
        "pairs",
    )
    """The per-row arrays, all in key order."""

    def merged(self, cols: dict[str, np.ndarray]) -> RollupIndex:
        """A new index with the rows ``cols`` (keys not present yet, any order) added: the new rows are
        sorted on their own and inserted at their places, O(index + new rows) rather than a sort of the
        whole index (a late write adds a few rows to an index of millions)."""
        if len(cols["bucket"]) == 0:
            return self
        new = RollupIndex(cols, self.rollup_ms)
        at = np.searchsorted(self.key, new.key)
        out = RollupIndex.__new__(RollupIndex)
        out.rollup_ms = self.rollup_ms
        for name in self._ARRAYS:
            setattr(out, name, np.insert(getattr(self, name), at, getattr(new, name)))
        return out

    def without_chunks(self, keys: Iterable[tuple[int, int]], chunk_ms: int) -> RollupIndex:
        """A new index without the rows of the chunks ``keys`` ((series id, chunk start ms) pairs; a chunk
        is ``chunk_ms`` long, a multiple of the buckets): what ``delete_chunks`` leaves of the table."""
        pairs = np.array(sorted(keys), dtype=np.int64).reshape(-1, 2)
        if not pairs.size or not self.key.size:
            return self
        base = pairs[:, 0] << 32
        lo = np.searchsorted(self.key, base | (pairs[:, 1] // self.rollup_ms))
        hi = np.searchsorted(self.key, base | ((pairs[:, 1] + chunk_ms) // self.rollup_ms))
        depth = np.zeros(self.key.size + 1, dtype=np.int64)
        np.add.at(depth, lo, 1)
        np.add.at(depth, hi, -1)
        keep = np.cumsum(depth[:-1]) == 0
        if keep.all():
            return self
        cols = self.columns()
        return RollupIndex({c: v[keep] for c, v in cols.items()}, self.rollup_ms, presorted=True)

    def ranges(self, sids: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row ranges ``[i0, i1)`` of series ``sids`` with buckets in ``[lo, hi)`` (multiples of the step)."""
        base = sids.astype(np.int64) << 32
        r = self.rollup_ms
        return np.searchsorted(self.key, base | (lo // r)), np.searchsorted(self.key, base | (hi // r))

    def last_before(self, sids: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (series id, ts ms): the last sealed sample that is not a marker in a bucket wholly before
        the bucket holding ``ts``, as (found, its ts, its value); exact when ``ts`` is a bucket boundary."""
        if not self.key.size:
            return np.zeros(sids.size, bool), np.zeros(sids.size, np.int64), np.zeros(sids.size)
        sid = sids.astype(np.int64)
        row = np.searchsorted(self.key, (sid << 32) | (ts.astype(np.int64) // self.rollup_ms)) - 1
        at = np.maximum(row, 0)
        found: np.ndarray = (row >= 0) & (self.key[at] >> 32 == sid)
        return found, self.last_ts[at], self.last_val[at]
