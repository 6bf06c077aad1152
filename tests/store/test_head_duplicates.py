"""``View.head_duplicates`` (the first-write-wins check of late samples in head) against ``np.isin`` over
the whole head, on random segments: narrow ones (binary search in the segment keys) and ones too wide
for the keys (a span over 2**40 ms, a series id over 2**22)."""

from __future__ import annotations

import numpy as np
import pytest

from servemetrics.store.duckdb_rollups import RollupIndex
from servemetrics.store.duckdb_view import View, concat, sort_segment

T0 = 1_767_225_600_000


def _no_rollups() -> RollupIndex:
    return RollupIndex({c: np.zeros(0, np.int64) for c in RollupIndex.COLUMNS}, 60_000)


def _reference(head, sid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    h_sid, h_ts, _ = concat(head)
    have = set(zip(h_sid.tolist(), h_ts.tolist(), strict=True))
    return np.array([(s, t) in have for s, t in zip(sid.tolist(), ts.tolist(), strict=True)], dtype=bool)


@pytest.mark.parametrize("seed", range(8))
def test_head_duplicates_equal_a_search_of_the_whole_head(seed: int) -> None:
    rng = np.random.default_rng(seed)
    head = []
    for k in range(int(rng.integers(1, 6))):
        n = int(rng.integers(0, 300))
        sid = rng.integers(0, 40, n).astype(np.uint32)
        ts = T0 + rng.integers(0, 100, n) * 15_000 - (k == 2) * 10_000  # one segment starts earlier
        if seed % 4 == 3 and k == 0 and n:
            ts[0] = 5  # a segment spanning more than 2**40 ms: searched without keys
        if seed % 4 == 2 and k == 1 and n:
            sid[0] = (1 << 22) + 7  # a series id too large for the keys
        keep = np.unique(sid.astype(np.int64) * (1 << 44) + (ts - ts.min()), return_index=True)[1]
        head.append(sort_segment(sid[keep], ts[keep], rng.random(keep.size)))
    view = View(0, tuple(head), _no_rollups())
    q_sid = np.concatenate([concat(head)[0][:50], rng.integers(0, 45, 200).astype(np.uint32)])
    q_ts = np.concatenate([concat(head)[1][:50], T0 + rng.integers(-5, 105, 200) * 15_000])
    got = view.head_duplicates(q_sid, q_ts)
    assert got.tolist() == _reference(head, q_sid, q_ts).tolist()
    assert got[: min(50, concat(head)[1].size)].all()  # samples taken from the head are found
