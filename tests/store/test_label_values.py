"""``Store.label_values``: hand cases on every backend, and DuckDB against MemoryStore on random data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.store.helpers import HOUR, T0, batch, random_batches, random_series

BUCKET = "baseten_end_to_end_response_time_seconds_bucket"
M1D1 = {"model_id": "m1", "deployment_id": "d1"}


def test_values_of_one_label_sorted_distinct_and_matched(store: Store) -> None:
    for labels, le in [
        (M1D1, "0.5"),
        (M1D1, "+Inf"),
        ({**M1D1, "replica": "r2"}, "0.5"),  # a second series with the same le: listed once
        ({"model_id": "m1", "deployment_id": "d2"}, "10"),
        ({"model_id": "m2", "deployment_id": "x"}, "99"),  # another model
    ]:
        store.append(batch(BUCKET, {**labels, "le": le}, [(T0, 1.0)]))
    store.append(batch("other_bucket", {**M1D1, "le": "7"}, [(T0, 1.0)]))  # another name
    store.append(batch(BUCKET, M1D1, [(T0, 1.0)]))  # no le label: skipped
    store.append(batch(BUCKET, {**M1D1, "le": ""}, [(T0, 1.0)]))  # empty value = absent: skipped
    # string order (the caller parses the bounds)
    assert store.label_values(BUCKET, "le", (("model_id", "m1"),)) == ["+Inf", "0.5", "10"]
    assert store.label_values(BUCKET, "le", (("model_id", "m1"), ("deployment_id", "d1"))) == ["+Inf", "0.5"]
    assert store.label_values(BUCKET, "le") == ["+Inf", "0.5", "10", "99"]
    assert store.label_values(BUCKET, "deployment_id") == ["d1", "d2", "x"]
    assert store.label_values(BUCKET, "le", (("model_id", "m9"),)) == []
    assert store.label_values("never_stored", "le") == []


def test_series_emptied_by_retention_are_dropped(store: Store) -> None:
    store.append(batch(BUCKET, {**M1D1, "le": "2.5"}, [(T0, 1.0)]))
    store.append(batch(BUCKET, {**M1D1, "le": "5"}, [(T0, 1.0), (T0 + 2 * HOUR, 2.0)]))
    assert store.delete_before(T0 + HOUR) == 2
    assert store.label_values(BUCKET, "le", (("model_id", "m1"),)) == ["5"]
    assert store.stats().series == 1


LABELS = ("le", "status_code", "deployment_id", "replica", "model_id", "absent")
NAMES = ("req_total", "lat_bucket", "util", "no_dep", "never")


def _compare(duck: DuckDBStore, mem: MemoryStore) -> int:
    checked = 0
    for name in NAMES:
        for label in LABELS:
            for matchers in ((), (("model_id", "m1"),), (("deployment_id", "d1"),), (("model_id", "m9"),)):
                assert duck.label_values(name, label, matchers) == mem.label_values(name, label, matchers)
                checked += bool(mem.label_values(name, label, matchers))
    return checked


@pytest.mark.parametrize("seed", range(3))
def test_duckdb_matches_memory(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = random_series(rng, n_deps=int(rng.integers(1, 4)), n_rep=int(rng.integers(1, 3)))
    duck, mem = DuckDBStore(tmp_path / "s.duckdb"), MemoryStore()
    for b in random_batches(rng, keys, T0, 3.0, 3):
        duck.append(b)
        mem.append(b)
    assert _compare(duck, mem) > 10
    duck.delete_before(T0 + HOUR)
    mem.delete_before(T0 + HOUR)
    _compare(duck, mem)
    duck.close()
    reopened = DuckDBStore(tmp_path / "s.duckdb")  # the series index is rebuilt from the file
    assert _compare(reopened, mem) > 10
    reopened.close()
