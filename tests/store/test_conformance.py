"""Hand-computed cases every ``Store`` backend must answer exactly (``store`` runs each backend)."""

from __future__ import annotations

import pytest

from servemetrics.store.base import Cell, Reducer, Selection, Store, ValueSet
from tests.store.helpers import MIN, T0, batch

REQ = "baseten_inference_requests_total"
D1 = {"model_id": "m1", "deployment_id": "d1", "replica": "d1-r0"}
ALL = frozenset({"d1", "d2"})


def vs(lo_s: float, hi_s: float, deps: frozenset[str] = ALL) -> ValueSet:
    return ValueSet(T0 + int(lo_s * 1000), T0 + int(hi_s * 1000), deps)


def sel(name: str, reducer: Reducer, *sets: ValueSet, **kw: object) -> Selection:
    return Selection(name, reducer, tuple(sets), **kw)  # type: ignore[arg-type]


def test_c4_tiny_dip_is_a_reset(store: Store) -> None:
    """Regression C4: (15,100) (30,200) (45,199.9) (60,300) -> increase 400 over [T0, T0+61 s)."""
    store.append(
        batch(REQ, D1, [(T0 + s * 1000, v) for s, v in [(15, 100), (30, 200), (45, 199.9), (60, 300)]])
    )
    got = store.select(sel(REQ, Reducer.INCREASE, vs(0, 61)))
    assert got == {(): [Cell(pytest.approx(400.0), 1)]}


def test_increase_reset_inside_step_and_lookback(store: Store) -> None:
    pts = [(0, 10), (60, 20), (120, 5), (180, 8)]
    store.append(batch(REQ, D1, [(T0 + s * 1000, v) for s, v in pts]))
    got = store.select(sel(REQ, Reducer.INCREASE, vs(0, 100), vs(100, 200), lookback_ms=MIN))
    assert got[()] == [Cell(10.0, 1), Cell(8.0, 1)]  # 10 | reset 5 + 3
    # the previous sample 60 s before the set counts only with enough lookback
    assert store.select(sel(REQ, Reducer.INCREASE, vs(100, 200), lookback_ms=30_000))[()] == [Cell(3.0, 1)]


def test_no_samples_is_none_but_zero_traffic_is_zero(store: Store) -> None:
    store.append(batch(REQ, D1, [(T0 + s * 1000, 7.0) for s in range(0, 120, 15)]))
    got = store.select(sel(REQ, Reducer.INCREASE, vs(0, 60), vs(60, 120), vs(120, 180)))
    assert got[()] == [Cell(0.0, 1), Cell(0.0, 1), None]


def test_mean_last_staleness_and_group_by(store: Store) -> None:
    store.append(batch("util", D1, [(T0, 1.0), (T0 + 30_000, 3.0)]))
    store.append(batch("util", {**D1, "deployment_id": "d2", "replica": "d2-r0"}, [(T0 + 10_000, 5.0)]))
    mean = store.select(sel("util", Reducer.MEAN, vs(0, 60), group_by=("deployment_id",)))
    assert mean == {("d1",): [Cell(2.0, 1)], ("d2",): [Cell(5.0, 1)]}
    last = store.select(sel("util", Reducer.LAST, vs(0, 60), vs(0, 400), lookback_ms=5 * MIN))
    assert last[()] == [Cell(8.0, 2), None]  # latest within 5 min of the end; stale -> None


def test_deployments_of_the_value_set_only(store: Store) -> None:
    store.append(batch("util", D1, [(T0, 1.0)]))
    store.append(batch("util", {"model_id": "m1"}, [(T0, 9.0)]))  # no deployment_id: never counted
    got = store.select(sel("util", Reducer.MEAN, vs(0, 60, frozenset({"d2"})), vs(0, 60)))
    assert got == {(): [None, Cell(1.0, 1)]}


def test_first_write_wins_and_missing_group_label(store: Store) -> None:
    assert store.append(batch("util", D1, [(T0, 1.0), (T0, 2.0)])) == 1
    assert store.append(batch("util", D1, [(T0, 3.0), (T0 + 1, 4.0)])) == 1
    got = store.select(
        sel("util", Reducer.MEAN, vs(0, 0.001), group_by=("le",), matchers=(("model_id", "m1"),))
    )
    assert got == {("",): [Cell(1.0, 1)]}
    assert store.select(sel("util", Reducer.MEAN, vs(0, 0.001), matchers=(("model_id", "m2"),))) == {}


def test_delete_before(store: Store) -> None:
    store.append(batch(REQ, D1, [(T0 + s * 1000, s) for s in range(0, 600, 15)]))
    assert store.delete_before(T0 + 300_000) == 20
    got = store.select(sel(REQ, Reducer.INCREASE, vs(0, 600)))
    assert got[()] == [Cell(285.0, 1)]  # the first kept sample has no previous one
    assert store.stats().samples == 20


def test_bad_value_set_is_rejected(store: Store) -> None:
    with pytest.raises(ValueError, match="start_ms < end_ms"):
        store.select(sel(REQ, Reducer.MEAN, vs(10, 10)))


def test_group_with_series_but_no_data_reads_none(store: Store) -> None:
    """A group whose series serve but have no sample in the window appears with ``None`` cells."""
    store.append(batch("util", D1, [(T0, 1.0)]))
    assert store.select(sel("util", Reducer.MEAN, vs(100, 200))) == {(): [None]}
    assert store.select(sel("util", Reducer.MEAN, vs(100, 200, frozenset({"d9"})))) == {}
