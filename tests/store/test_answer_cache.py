"""The answer cache of ``DuckDBStore.select`` (``store.answer_cache``): answers put together from kept
value sets and fresh computation equal the answers computed whole, on the same data, with the cache
warm and after the writes that must invalidate it (a late sample into sealed chunks, a new series).
The reference is the same store kind with the cache off (``answer_entries=0``) fed the same batches."""

from __future__ import annotations

import numpy as np
import pytest

from servemetrics.samples import SampleBatch
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.types import labels_of
from tests.store.helpers import HOUR, MIN, T0, assert_same

KEYS = [
    ("req_total", labels_of({"model_id": "m1", "deployment_id": d, "replica": f"{d}-r{r}", "status_code": c}))
    for d in ("d1", "d2")
    for r in range(2)
    for c in ("200", "500")
]
HOURS = 7  # three sealed chunks of 2 h and an open head


def _batch(keys: list, start: int, n: int) -> SampleBatch:
    ts = start + 15_000 * np.arange(n, dtype=np.int64)
    k = len(keys)
    vals = np.repeat((ts - T0) / 15_000, k) * np.tile(np.arange(1, k + 1), n)  # each series its own rate
    return SampleBatch(keys, np.tile(np.arange(k, dtype=np.uint32), n), np.repeat(ts, k), vals)


@pytest.fixture
def pair(tmp_path):
    cached, plain = DuckDBStore(tmp_path / "a.duckdb"), DuckDBStore(tmp_path / "b.duckdb", answer_entries=0)
    batch = _batch(KEYS, T0, HOURS * 240)
    assert cached.append(batch) == plain.append(batch)
    assert cached._view.sealed_until == T0 + 6 * HOUR  # the newest sample is 7 h in: 3 chunks sealed
    yield cached, plain
    cached.close()
    plain.close()


def _questions(end: int) -> list[Selection]:
    """SERIES-like questions ending at ``end``: 5-minute steps over 6 h, a promotion from d1 to d2 at
    T0 + 3 h (value sets naming d1, then d2, then both across the hour of the ramp)."""
    cuts = list(range(end - 6 * HOUR, end + 1, 5 * MIN))
    sets = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        deps = {"d1"} if hi <= T0 + 3 * HOUR else {"d2"} if lo >= T0 + 4 * HOUR else {"d1", "d2"}
        sets.append(ValueSet(lo, hi, frozenset(deps)))
    out = []
    for reducer in (Reducer.INCREASE, Reducer.LAST, Reducer.MEAN):
        for group_by in ((), ("status_code",), ("replica",)):
            out.append(
                Selection("req_total", reducer, tuple(sets), group_by, (("model_id", "m1"),), 10 * MIN)
            )
    return out


def _agree(cached: DuckDBStore, plain: DuckDBStore, end: int) -> None:
    for sel in _questions(end):
        assert_same(cached.select(sel), plain.select(sel), rel=0)


def test_warm_answers_equal_fresh_ones_as_the_window_slides(pair):
    cached, plain = pair
    for end in (T0 + 7 * HOUR - 7_777, T0 + 7 * HOUR - 7_777 + 5 * MIN, T0 + 7 * HOUR):
        _agree(cached, plain, end)  # cold for the new edge
        _agree(cached, plain, end)  # warm
    answers = cached._answers
    assert answers is not None and answers.hits > 0 and len(answers) > 0
    # only value sets that end at or before the sealed boundary are kept
    assert all(vs.end_ms <= cached._view.sealed_until for (_, vs) in answers._entries)


def test_a_late_sample_into_a_sealed_chunk_is_seen(pair):
    cached, plain = pair
    end = T0 + 7 * HOUR
    sel = _questions(end)[0]  # INCREASE, no grouping
    before = cached.select(sel)
    _agree(cached, plain, end)
    # a counter reset in r0's 200 series 2 h in (sealed): the increase of its value set changes
    late = SampleBatch(KEYS[:1], np.zeros(1, np.uint32), np.array([T0 + 2 * HOUR + 7_000]), np.array([0.0]))
    assert cached.append(late) == plain.append(late) == 1
    after = cached.select(sel)
    assert after != before
    _agree(cached, plain, end)


def test_a_new_series_joins_the_groups_of_past_value_sets(pair):
    cached, plain = pair
    end = T0 + 7 * HOUR
    _agree(cached, plain, end)
    new = [
        (
            "req_total",
            labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "d1-r9", "status_code": "200"}),
        )
    ]
    batch = _batch(new, T0 + 6 * HOUR + 30 * MIN, 10)  # only in head: no sample in the sealed past
    assert cached.append(batch) == plain.append(batch) == 10
    by_replica = next(s for s in _questions(end) if s.group_by == ("replica",))
    got = cached.select(by_replica)
    assert ("d1-r9",) in got and got[("d1-r9",)][
        0
    ] is None  # d1 serves the first value set: the group is there
    _agree(cached, plain, end)
