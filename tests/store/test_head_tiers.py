"""The head's segments (``store.duckdb_view.tiered``): each append adds a segment, merged into the ones
before it while sizes are close, so an append costs the same at any head size (issue 18 part 4). Checked
on exact contents: whatever the tiers, the head holds every sample once, each segment sorted."""

from __future__ import annotations

import math

import numpy as np

from servemetrics.store.duckdb_view import concat, merge_sorted, sort_segment, tiered


def _segment(rng: np.random.Generator, n: int, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` samples of 50 series at ts from ``t0`` on (distinct (series, ts)), sorted."""
    sid = rng.integers(0, 50, n).astype(np.uint32)
    ts = t0 + np.arange(n, dtype=np.int64) * 7
    return sort_segment(sid, ts, rng.random(n))


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_merge_sorted_is_the_sort_of_both():
    rng = np.random.default_rng(1)
    a, b = _segment(rng, 300, 0), _segment(rng, 200, 5)  # ts interleave: 0, 7, 14 ... and 5, 12 ...
    assert _same(merge_sorted(a, b), sort_segment(*concat([a, b])))
    wide = (np.array([3, 1], np.uint32), np.array([0, 2**41], np.int64), np.array([1.0, 2.0]))
    assert _same(merge_sorted(wide, _segment(rng, 0, 0)), sort_segment(*wide))  # keys too wide: lexsort


def test_tiers_shrink_geometrically_and_keep_every_sample():
    rng = np.random.default_rng(2)
    head: tuple = ()
    added = []
    for i in range(500):
        seg = _segment(rng, 100, i * 1_000_000)
        added.append(seg)
        head = tiered((*head, seg), cap=10_000)
        sizes = [s[1].size for s in head]
        below = [n for n in sizes if n < 10_000]
        # below the cap, each segment is more than twice the next: at most log2(total / 100) + 1 of them
        assert all(a > 2 * b for a, b in zip(below, below[1:], strict=False)), sizes
        assert len(below) <= math.log2(max(sum(below), 100) / 100) + 1
        assert all(n < 2 * 10_000 for n in sizes)  # no merge past twice the cap
    assert sum(s[1].size for s in head) == 50_000
    assert _same(sort_segment(*concat(list(head))), sort_segment(*concat(added)))
    for sid, ts, _ in head:
        assert np.all((sid[1:] > sid[:-1]) | ((sid[1:] == sid[:-1]) & (ts[1:] > ts[:-1])))
