"""A series' last real sample before a time, for ``DuckDBStore`` (``duckdb_eval.PreviousReader``): the
counter rule needs the true previous sample of a sample after a gap longer than any fetched range
(``store.base`` INCREASE: a counter re-created during a gap counts its value). Rare: only series with
such gaps ask. Times are epoch ms.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from servemetrics.store.duckdb_rollups import RollupIndex

SegmentReader = Callable[[np.ndarray, list[tuple[int, int]]], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""``read(sids, ranges)``: samples of ``sids`` in ``ranges`` as (index into ``sids``, ts, value), sorted."""


def last_real_before(
    rollups: RollupIndex,
    sealed_until: int,
    read: SegmentReader,
    sids: np.ndarray,
    before: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (series id ``sids[k]``, ``before[k]``): the last sample that is not a stale marker with ts
    before ``before[k]``, as (found, ts, value). Raw samples between the last bucket boundary (the sealed
    boundary, for head times) and ``before``, else the rollups' last sample of an earlier bucket."""
    n = sids.size
    found, ts, val = np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n)
    for b in np.unique(before).tolist():
        at = np.flatnonzero(before == b)
        ids, where = np.unique(sids[at], return_inverse=True)
        floor = sealed_until if b > sealed_until else b // rollups.rollup_ms * rollups.rollup_ms
        f, t, v = rollups.last_before(ids, np.full(ids.size, floor, np.int64))
        if floor < b:
            idx, r_ts, r_val = read(ids, [(floor, b)])
            real = ~np.isnan(r_val)
            idx, r_ts, r_val = idx[real], r_ts[real], r_val[real]
            last = np.flatnonzero(np.append(idx[1:] != idx[:-1], True)) if idx.size else idx
            f[idx[last]], t[idx[last]], v[idx[last]] = True, r_ts[last], r_val[last]
        found[at], ts[at], val[at] = f[where], t[where], v[where]
    return found, ts, val


def sealed_previous(
    rollups: RollupIndex, sid: np.ndarray, before: int | list[int]
) -> tuple[dict[int, int], dict[int, float]]:
    """Per series id of ``sid``: its last sealed real sample before ``before`` (one chunk boundary, or one
    per distinct id in order), as ``build_rows`` takes it (absent when none)."""
    ids = np.unique(sid) if isinstance(before, int) else sid
    at = np.full(ids.size, before, np.int64) if isinstance(before, int) else np.asarray(before, np.int64)
    found, ts, val = rollups.last_before(ids, at)
    keep = ids[found].tolist()
    return dict(zip(keep, ts[found].tolist(), strict=True)), dict(zip(keep, val[found].tolist(), strict=True))
