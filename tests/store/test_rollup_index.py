"""``RollupIndex.merged`` inserts new rows at their places: the same index as one built from all rows."""

from __future__ import annotations

import numpy as np

from servemetrics.store.duckdb_rollups import RollupIndex

ROLLUP_MS = 1_800_000


def _rows(rng: np.random.Generator, keys: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """Rows for (series id, bucket number) ``keys`` with random values (some without a previous sample)."""
    n = len(keys)
    cols = {c: rng.integers(0, 1000, n).astype(np.float64) for c in RollupIndex.COLUMNS}
    cols["series_id"] = np.array([k[0] for k in keys], dtype=np.int64)
    cols["bucket"] = np.array([k[1] * ROLLUP_MS for k in keys], dtype=np.int64)
    cols["prev_age"] = rng.integers(-1, 2, n)  # -1: no previous sample, so first_inc counts 0
    return cols


def test_merged_rows_land_where_a_full_sort_puts_them() -> None:
    rng = np.random.default_rng(7)
    every = [(s, b) for s in range(40) for b in range(30)]
    order = rng.permutation(len(every))
    old_keys = [every[i] for i in order[:1000]]
    new_keys = [every[i] for i in order[1000:]]  # 200 rows between, before and after the old ones
    old, new = _rows(rng, old_keys), _rows(rng, new_keys)
    merged = RollupIndex(old, ROLLUP_MS).merged(new)
    reference = RollupIndex({c: np.concatenate([old[c], new[c]]) for c in RollupIndex.COLUMNS}, ROLLUP_MS)
    assert np.all(np.diff(merged.key) > 0)
    for name in RollupIndex._ARRAYS:
        assert np.array_equal(getattr(merged, name), getattr(reference, name)), name
        assert getattr(merged, name).dtype == getattr(reference, name).dtype, name
    empty = RollupIndex.empty(ROLLUP_MS).merged(new)
    assert np.array_equal(empty.key, RollupIndex(new, ROLLUP_MS).key)
    assert empty.n.dtype == np.int64 and empty.sum.dtype == np.float64
