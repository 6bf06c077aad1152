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


def test_increase_spreads_each_pair_over_its_interval(store: Store) -> None:
    """Rule 5: each delta is spread evenly over (t0, t1]; a reset's delta is the new value."""
    pts = [(0, 10), (60, 20), (120, 5), (180, 8)]
    store.append(batch(REQ, D1, [(T0 + s * 1000, v) for s, v in pts]))
    got = store.select(sel(REQ, Reducer.INCREASE, vs(0, 100), vs(100, 200)))
    # [0, 100): 10 of (0, 60] and 40/60 of the reset's 5 of (60, 120]; [100, 200): 20/60 of 5, then 3
    assert got[()] == [Cell(pytest.approx(10 + 5 * 40 / 60), 1), Cell(pytest.approx(5 * 20 / 60 + 3), 1)]
    # the pair decides, not where a value set starts: the same alone, and the whole window is the sum
    assert store.select(sel(REQ, Reducer.INCREASE, vs(100, 200)))[()] == [Cell(pytest.approx(5 / 3 + 3), 1)]
    assert store.select(sel(REQ, Reducer.INCREASE, vs(0, 200)))[()] == [Cell(pytest.approx(18.0), 1)]


def test_increase_of_a_step_between_two_sparse_samples(store: Store) -> None:
    """Rule 5: a 60 s scrape on 30 s steps gives every step half of each delta, not 2x / null / 2x."""
    store.append(batch(REQ, D1, [(T0 + s * 1000, s / 6) for s in range(0, 301, 60)]))  # +10 a minute
    got = store.select(sel(REQ, Reducer.INCREASE, *(vs(a, a + 30) for a in range(0, 300, 30))))
    assert got[()] == [Cell(pytest.approx(5.0), 1)] * 10


def test_a_gap_longer_than_the_pair_limit_counts_only_a_re_created_counter(store: Store) -> None:
    """C16 at the store: (0, 5) (15, 6) (30, 7), 15 minutes without samples, (930, 1) (945, 2): the drop
    after the gap is a counter re-created meanwhile and counts its 1 at 930 s; a rise after such a gap
    counts nothing and gives no data (what happened in the gap is unknown). SUMMARY 4 = the sum of the
    30 s steps; a step that only holds a sample whose next one is beyond the gap has no data either."""
    pts = [(0, 5), (15, 6), (30, 7), (930, 1), (945, 2)]
    store.append(batch(REQ, D1, [(T0 + s * 1000, v) for s, v in pts]))
    assert store.select(sel(REQ, Reducer.INCREASE, vs(0, 1000)))[()] == [Cell(4.0, 1)]
    steps = store.select(sel(REQ, Reducer.INCREASE, *(vs(a, a + 30) for a in range(0, 990, 30))))[()]
    assert sum(c.total for c in steps if c is not None) == pytest.approx(4.0)
    assert steps[0] == Cell(pytest.approx(2.0), 1) and steps[31] == Cell(pytest.approx(2.0), 1)
    assert all(c is None for c in steps[1:31])  # nothing covers 30 s .. 930 s: null, not 0
    other = "other_total"
    store.append(batch(other, D1, [(T0, 5.0), (T0 + 900_000, 9.0)]))
    assert store.select(sel(other, Reducer.INCREASE, vs(0, 1000)))[()] == [None]


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


def test_a_series_whose_only_samples_in_the_window_are_stale_markers(store: Store) -> None:
    """A replica that left its target has nothing but its stale marker in the window: it gives no data to
    any reducer, and the other series' answer is unchanged (INCREASE raised IndexError here, a 500 on
    the demo's production graphs right after a replica stopped)."""
    store.append(batch(REQ, D1, [(T0 + 30_000, float("nan"))]))
    alone = vs(0, 60, frozenset({"d1"}))
    for reducer in Reducer:
        assert store.select(sel(REQ, reducer, alone, lookback_ms=5 * MIN)) == {(): [None]}, reducer
    store.append(
        batch(REQ, {**D1, "deployment_id": "d2", "replica": "d2-r0"}, [(T0, 0.0), (T0 + 30_000, 6.0)])
    )
    got = store.select(sel(REQ, Reducer.INCREASE, alone, vs(0, 60), vs(60, 120)))
    assert got[()] == [None, Cell(pytest.approx(6.0), 1), None]


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
