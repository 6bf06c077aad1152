"""Store defects found in review: a seal with nothing to seal, and values that leave the codec's range."""

from __future__ import annotations

import numpy as np
import pytest

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store import duckdb_codec as codec
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of

T0 = 1_767_225_600_000  # a 2-hour chunk boundary
MIN = 60_000
LAB = labels_of({"model_id": "m1", "deployment_id": "d1"})


def _batch(points: list[tuple[int, float]]) -> SampleBatch:
    return SampleBatch.from_samples([Sample("g", LAB, v, t) for t, v in points])


def test_ingest_resumes_after_a_gap_longer_than_a_chunk(tmp_path):
    """Down from T0-3h to T0+5min: the next seal finds nothing to seal and must not fail (it did, forever)."""
    times = [T0 - 180 * MIN] + [T0 + 5 * MIN + k * 15_000 for k in range(80)]
    store = DuckDBStore(tmp_path / "s.duckdb")
    for t in times:
        store.append(_batch([(t, 1.0)]))
    assert store.stats().samples == 81
    store.close()
    again = DuckDBStore(tmp_path / "s.duckdb")
    assert again.append(_batch([(T0 + 60 * MIN, 1.0)])) == 1
    again.close()


@pytest.mark.parametrize("big", [1.5e13, 9.3e12, 1_581_724_929_802.0])
def test_a_chunk_mixing_big_values_and_decimals_round_trips_exactly(big):
    values = np.array([big, 0.123456, big + 1, 2.5])
    decimals = int(codec.decimals_needed(values).max())
    assert np.array_equal(codec.decode_values(codec.encode_values(values, decimals)), values)


def test_big_and_fine_values_give_the_same_answers_in_both_stores(tmp_path):
    points = [(T0, 1.5e13), (T0 + 15_000, 0.123456), (T0 + 4 * 3_600_000, 1.0)]  # the last one seals
    duck, mem = DuckDBStore(tmp_path / "s.duckdb"), MemoryStore()
    for store in (duck, mem):
        store.append(_batch(points))
    vs = (ValueSet(T0, T0 + 60_000, frozenset({"d1"})),)
    for reducer in (Reducer.MEAN, Reducer.INCREASE):
        sel = Selection("g", reducer, vs)
        assert duck.select(sel) == mem.select(sel), reducer
    duck.close()
