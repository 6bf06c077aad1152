"""Issue 12 part 4: a series retention leaves without samples is dropped (100,000 one-off series stayed in
memory for good). The other series keep their ids and answers, on both local stores and, for DuckDB,
after a reopen (the ids of the dropped series stay holes); a dropped series appended again is new."""

from __future__ import annotations

from pathlib import Path

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Reducer, Selection, Store, ValueSet
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.types import labels_of
from tests.store.helpers import HOUR, T0, batch

GAUGE = "baseten_concurrent_requests"
D1 = frozenset({"d1"})


def _last(store: Store, replica: str, at_ms: int) -> float | None:
    sel = Selection(GAUGE, Reducer.LAST, (ValueSet(at_ms - 1, at_ms, D1),), matchers=(("replica", replica),))
    cells = store.select(sel).get((), [None])
    return None if cells[0] is None else cells[0].total


def _fill(store: Store, one_off: int) -> None:
    """``one_off`` series with one sample at ``T0`` (r0 …), then the steady ``keep`` sampled at ``T0`` and
    three hours later."""
    labels = [labels_of({"deployment_id": "d1", "replica": f"r{i}"}) for i in range(one_off)]
    store.append(SampleBatch.from_samples(Sample(GAUGE, lab, float(i), T0) for i, lab in enumerate(labels)))
    store.append(batch(GAUGE, {"deployment_id": "d1", "replica": "keep"}, [(T0, 1.0), (T0 + 3 * HOUR, 7.0)]))


def test_one_off_series_are_dropped_and_the_others_keep_their_answers(store: Store) -> None:
    _fill(store, 1000)
    assert store.stats().series == 1001
    assert store.delete_before(T0 + HOUR) == 1001
    assert store.stats().series == 1
    assert store.label_values(GAUGE, "replica") == ["keep"]
    assert _last(store, "keep", T0 + 3 * HOUR + 1) == 7.0
    assert _last(store, "r5", T0 + 1) is None
    store.append(batch(GAUGE, {"deployment_id": "d1", "replica": "r5"}, [(T0 + 3 * HOUR, 5.0)]))
    assert _last(store, "r5", T0 + 3 * HOUR + 1) == 5.0
    assert store.label_values(GAUGE, "replica") == ["keep", "r5"]
    assert store.stats().series == 2


def test_duckdb_ids_stay_stable_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    _fill(store, 50)
    store.delete_before(T0 + HOUR)
    store.append(batch(GAUGE, {"deployment_id": "d1", "replica": "new"}, [(T0 + 3 * HOUR, 3.0)]))
    store.close()
    reopened = DuckDBStore(path)
    try:
        assert reopened.stats().series == 2
        assert reopened.label_values(GAUGE, "replica") == ["keep", "new"]
        assert _last(reopened, "keep", T0 + 3 * HOUR + 1) == 7.0
        assert _last(reopened, "new", T0 + 3 * HOUR + 1) == 3.0
        reopened.append(batch(GAUGE, {"deployment_id": "d1", "replica": "r1"}, [(T0 + 3 * HOUR, 1.5)]))
        assert _last(reopened, "r1", T0 + 3 * HOUR + 1) == 1.5
        assert _last(reopened, "keep", T0 + 3 * HOUR + 1) == 7.0
    finally:
        reopened.close()
