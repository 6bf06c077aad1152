"""Hand-computed answers of the query layer over the reference store (DESIGN "Query semantics")."""

from __future__ import annotations

import pytest

from servemetrics.catalog import CATALOG
from servemetrics.catalog.model import Aggregation, Kind, MetricDef, Unit
from servemetrics.query.execute import execute as query_execute
from servemetrics.query.plan import Plan, build_plan
from servemetrics.query.windows import Mode, Window
from servemetrics.store.base import ValueSet
from tests.query.helpers import T0, at, series, store_with, wire

D1 = frozenset({"d1"})
E2E = "baseten_end_to_end_response_time_seconds"
REQ = "baseten_inference_requests_total"


def execute(plan, store):
    """``query.execute`` as the JSON object the API answers."""
    return wire(query_execute(plan, store))


def run(store, names, mode, start_s, end_s, timeline=None, now_s=None):
    timeline = timeline if timeline is not None else [(at(-86400), D1)]
    plan = build_plan(
        "m1",
        mode,
        None if start_s is None else at(start_s),
        None if end_s is None else at(end_s),
        names,
        lambda _s, _e: timeline,
        at(now_s if now_s is not None else end_s or 0),
    )
    return execute(plan, store)


def values_of(resp, name):
    idx = [d["name"] for d in resp["metric_descriptors"]].index(name)
    return [vs["values"][idx] for vs in resp["metric_values"]]


def hist_series(points_by_le, sum_points, count_points, **labels):
    out = []
    for le, pts in points_by_le.items():
        out += series(E2E + "_bucket", pts, le=le, deployment_id="d1", **labels)
    out += series(E2E + "_sum", sum_points, deployment_id="d1", **labels)
    out += series(E2E + "_count", count_points, deployment_id="d1", **labels)
    return out


def test_c1_no_observations_is_no_value():
    les = ["-8192", "-1", "0", "8", "+Inf"]
    store = store_with(
        hist_series({le: [(10, 5), (40, 5)] for le in les}, [(10, 3), (40, 3)], [(10, 5), (40, 5)])
    )
    summary = run(store, [E2E], Mode.SUMMARY, 0, 60)
    assert values_of(summary, E2E) == [[None, None, None, None, None]]
    steps = run(store, [E2E], Mode.SERIES, 0, 60)
    assert steps["step_seconds"] == 30
    assert values_of(steps, E2E)[1] == [None, None, None, None, None]


def test_c2_inf_bucket_smaller_than_lower_bucket_is_made_monotonic():
    store = store_with(
        hist_series(
            {"0.1": [(0, 0), (20, 2)], "0.2": [(0, 0), (20, 4)], "+Inf": [(0, 0), (20, 0)]},
            [(0, 0), (20, 0.5)],
            [(0, 0), (20, 4)],
        )
    )
    [row] = values_of(run(store, [E2E], Mode.SUMMARY, 1, 30), E2E)
    assert row[0] == pytest.approx(0.1)
    assert row[1] == pytest.approx(0.18)


def test_c3_every_request_slower_than_top_finite_bucket():
    store = store_with(
        hist_series(
            {"30": [(0, 0), (20, 0)], "60": [(0, 0), (20, 0)], "+Inf": [(0, 0), (20, 10)]},
            [(0, 0), (20, 1500)],
            [(0, 0), (20, 10)],
        )
    )
    [row] = values_of(run(store, [E2E], Mode.SUMMARY, 1, 30), E2E)
    assert row == [60, 60, 60, 60, 150]


def _c4_store():
    return store_with(series("c4_total", [(15, 100), (30, 200), (45, 199.9), (60, 300)], deployment_id="d1"))


def _plan(metric, start_ms, end_ms, vs_list, mode=Mode.SUMMARY):
    return Plan("m1", mode, Window(start_ms, end_ms, None), tuple(vs_list), (metric,))


def test_c4_tiny_dip_is_a_reset_count_and_per_second():
    vs = [ValueSet(T0, at(61), D1)]
    count = MetricDef("c4_total", Kind.COUNTER, Unit.COUNT, Aggregation.SUM, "test counter")
    [[total]] = values_of(execute(_plan(count, T0, at(61), vs), _c4_store()), "c4_total")
    assert total == pytest.approx(400.0)
    rate = MetricDef("c4_total", Kind.COUNTER, Unit.PER_SECOND, Aggregation.SUM, "test rate")
    [[per_s]] = values_of(execute(_plan(rate, T0, at(61), vs), _c4_store()), "c4_total")
    assert per_s == pytest.approx(400.0 / 61)


def test_c6_lower_case_inf_bucket_arithmetic():
    store = store_with(
        hist_series(
            {"0.5": [(0, 0), (15, 3)], "1.0": [(0, 0), (15, 8)], "+Inf": [(0, 0), (15, 10)]},
            [(0, 0), (15, 7.2)],
            [(0, 0), (15, 10)],
        )
    )
    [row] = values_of(run(store, [E2E], Mode.SUMMARY, 1, 30), E2E)
    assert row[0] == pytest.approx(0.7)
    assert row[4] == pytest.approx(0.72)


def test_counter_reset_inside_a_step_and_status_classes():
    store = store_with(
        series(REQ, [(0, 10), (15, 20), (30, 5), (45, 9)], deployment_id="d1", status_code="200"),
        series(REQ, [(0, 1), (15, 1), (30, 1), (45, 3)], deployment_id="d1", status_code="201"),
        series(REQ, [(0, 0), (15, 4), (30, 4), (45, 4)], deployment_id="d1", status_code="503"),
    )
    [row] = values_of(run(store, [REQ], Mode.SUMMARY, 0, 60), REQ)
    # 200: +10, reset -> +5, +4 = 19; 201: +2; 503: +4; no 4xx series but data -> 0
    assert row == [21.0, 0.0, 4.0]
    # from 1 s: the first pair (0, 15 s] is spread evenly, 14 s of it inside (rule 5): 10 * 14 / 15
    [row] = values_of(run(store, [REQ], Mode.SUMMARY, 1, 60), REQ)
    assert row == [pytest.approx(10 * 14 / 15 + 9 + 2), 0.0, pytest.approx(4 * 14 / 15)]


def test_no_sample_is_null_but_live_replica_with_no_traffic_is_zero():
    up = series("up", [(s, 1) for s in range(0, 120, 15)], deployment_id="d1", replica="r1")
    reqs = series(REQ, [(0, 5), (15, 6)], deployment_id="d1", status_code="200")
    live = run(store_with(up, reqs), [REQ], Mode.SERIES, 0, 120)
    steps = values_of(live, REQ)
    assert steps[0] == [1.0, 0.0, 0.0]
    assert steps[2] == [0.0, 0.0, 0.0]  # live, no request
    dead = run(store_with(reqs), [REQ], Mode.SERIES, 0, 120)
    assert values_of(dead, REQ)[2] == [None, None, None]


def test_quantile_inside_bucket_and_avg():
    store = store_with(
        hist_series(
            {"0.1": [(0, 0), (15, 20)], "0.5": [(0, 0), (15, 80)], "+Inf": [(0, 0), (15, 100)]},
            [(0, 0), (15, 25.0)],
            [(0, 0), (15, 100)],
        )
    )
    [row] = values_of(run(store, [E2E], Mode.SUMMARY, 1, 30), E2E)
    # p50: rank 50 in (0.1, 0.5]: 0.1 + 0.4 * 30/60 = 0.3; p90: rank 90 in +Inf -> 0.5
    assert row[0] == pytest.approx(0.3)
    assert row[1] == pytest.approx(0.5)
    assert row[4] == pytest.approx(0.25)


def test_promotion_inside_a_step_splits_it_with_the_right_deployments():
    gauge = "baseten_replicas_active"
    store = store_with(
        series(gauge, [(s, 2) for s in range(0, 120, 10)], deployment_id="d1"),
        series(gauge, [(s, 5) for s in range(0, 120, 10)], deployment_id="d2"),
    )
    timeline = [(at(-3600), D1), (at(45), frozenset({"d2"}))]
    resp = run(store, [gauge], Mode.SERIES, 0, 120, timeline)
    starts = [vs["start_epoch_millis"] - T0 for vs in resp["metric_values"]]
    assert starts == [0, 30_000, 45_000, 60_000, 90_000]
    assert values_of(resp, gauge) == [[2.0], [2.0], [5.0], [5.0], [5.0]]


def test_rolling_promotion_counts_both_deployments():
    gauge = "baseten_replicas_active"
    store = store_with(
        series(gauge, [(s, 2) for s in range(0, 120, 10)], deployment_id="d1"),
        series(gauge, [(s, 1) for s in range(0, 120, 10)], deployment_id="d2"),
    )
    timeline = [(at(-3600), D1), (at(60), frozenset({"d1", "d2"}))]
    resp = run(store, [gauge], Mode.SERIES, 0, 120, timeline)
    assert values_of(resp, gauge) == [[2.0], [2.0], [3.0], [3.0]]


def test_deployment_gauge_reported_twice_is_not_summed():
    gauge = "baseten_replicas_active"
    store = store_with(
        series(gauge, [(0, 4), (15, 4)], deployment_id="d1", source="gateway"),
        series(gauge, [(0, 4), (15, 4)], deployment_id="d1", source="knative"),
        series(gauge, [(0, 1), (15, 3)], deployment_id="d2"),
    )
    [[v]] = values_of(run(store, [gauge], Mode.SUMMARY, 0, 30, [(at(-60), frozenset({"d1", "d2"}))]), gauge)
    assert v == 6.0  # 4 (one value for d1) + mean(1, 3) for d2


def test_deployment_gauge_per_replica_series_of_one_source_add_up():
    gauge = "baseten_concurrent_requests"
    store = store_with(
        series(gauge, [(0, 2), (15, 2)], deployment_id="d1", replica="r1", source="knative"),
        series(gauge, [(0, 3), (15, 5)], deployment_id="d1", replica="r2", source="knative"),
        series(gauge, [(0, 6), (15, 6)], deployment_id="d1", source="gateway"),
    )
    [[v]] = values_of(run(store, [gauge], Mode.SUMMARY, 0, 30), gauge)
    assert v == 6.0  # knative: 2 + 4 = 6 over its replicas; gateway: 6; one value for d1


def test_cpu_cores_per_replica_mean():
    cpu = "baseten_container_cpu_usage_seconds_total"
    store = store_with(
        series(cpu, [(0, 0), (30, 30), (60, 60)], deployment_id="d1", replica="r1"),
        series(cpu, [(0, 0), (30, 90), (60, 180)], deployment_id="d1", replica="r2"),
    )
    [[cores]] = values_of(run(store, [cpu], Mode.SUMMARY, 0, 60), cpu)
    # [0, 60) holds the pairs (0, 30] and (30, 60] whole: r1 +60 cpu-s -> 1 core, r2 +180 -> 3; mean 2
    assert cores == pytest.approx(2.0)
    [[cores]] = values_of(run(store, [cpu], Mode.SUMMARY, 0, 45), cpu)
    # [0, 45): (0, 30] and half of (30, 60]: r1 45 cpu-s / 45 s = 1 core, r2 135 / 45 = 3; mean 2
    assert cores == pytest.approx(2.0)


@pytest.mark.parametrize(("hours", "step"), [(1, 30), (6, 60), (24, 300), (168, 1800)])
def test_series_step_ladder(hours, step):
    store = store_with(series("baseten_replicas_active", [(0, 1)], deployment_id="d1"))
    resp = run(store, ["baseten_replicas_active"], Mode.SERIES, -hours * 3600, 0)
    assert resp["step_seconds"] == step
    assert len(resp["metric_values"]) <= 361


def test_current_uses_latest_sample_within_five_minutes():
    gauge = "baseten_replicas_active"
    store = store_with(
        series(gauge, [(0, 3), (100, 4)], deployment_id="d1"), series(gauge, [(0, 9)], deployment_id="d0")
    )
    plan = build_plan(
        "m1",
        Mode.CURRENT,
        None,
        None,
        [gauge],
        lambda _s, _e: [(at(-3600), frozenset({"d1", "d0"}))],
        at(200),
    )
    resp = execute(plan, store)
    assert resp["start_epoch_millis"] == at(200) - 300_000 and resp["end_epoch_millis"] == at(200)
    assert resp["step_seconds"] is None
    assert values_of(resp, gauge) == [[13.0]]
    later = execute(
        build_plan(
            "m1", Mode.CURRENT, None, None, [gauge], lambda _s, _e: [(at(-3600), frozenset({"d1"}))], at(500)
        ),
        store,
    )
    assert values_of(later, gauge) == [[None]]  # the series exists, no sample in the last 5 min


def test_metric_of_other_deployments_only_is_omitted():
    store = store_with(series("baseten_gpu_utilization", [(0, 0.5)], deployment_id="d9", gpu="0"))
    resp = run(store, ["baseten_gpu_utilization"], Mode.SUMMARY, -10, 60)
    assert resp["metric_descriptors"] == []
    assert resp["metric_values"] == [{"start_epoch_millis": at(-10), "values": []}]


def test_metric_without_series_is_omitted_and_default_set_is_used():
    store = store_with(series("baseten_replicas_active", [(0, 1)], deployment_id="d1"))
    resp = run(store, None, Mode.SUMMARY, -10, 60)
    assert [d["name"] for d in resp["metric_descriptors"]] == ["baseten_replicas_active"]
    assert resp["metric_descriptors"][0] == {
        "name": "baseten_replicas_active",
        "unit_hint": "COUNT",
        "kind": "GAUGE",
        "label_sets": [{}],
    }


def test_every_kind_has_a_recipe():
    from servemetrics.query.execute import _RECIPES

    assert {m.kind for m in CATALOG.values()} <= set(_RECIPES)


def test_a_stored_bucket_with_a_bad_bound_is_ignored():
    store = store_with(
        hist_series(
            {"0.5": [(0, 0), (15, 3)], "abc": [(0, 0), (15, 5)], "+Inf": [(0, 0), (15, 10)]},
            [(0, 0), (15, 5.0)],
            [(0, 0), (15, 10)],
        )
    )
    [row] = values_of(run(store, [E2E], Mode.SUMMARY, 1, 30), E2E)
    assert row[0] == 0.5 and row[4] == 0.5  # p50 rank 5 in +Inf -> 0.5; avg 5 / 10


def test_buckets_of_a_layout_without_data_in_the_step_do_not_take_part():
    """A replica restarted with other buckets: the old layout has no data in the window (B1)."""
    old = hist_series(
        {le: [(-600, 0), (-590, 7)] for le in ["0.05", "0.25", "0.5", "2.5", "+Inf"]},
        [(-600, 0), (-590, 1)],
        [(-600, 0), (-590, 7)],
        replica="old",
    )
    new = hist_series(
        {"0.1": [(0, 0), (15, 5)], "1.0": [(0, 0), (15, 10)], "+Inf": [(0, 0), (15, 10)]},
        [(0, 0), (15, 2.0)],
        [(0, 0), (15, 10)],
        replica="new",
    )
    [row] = values_of(run(store_with(old, new), [E2E], Mode.SUMMARY, 1, 30), E2E)
    # p50 rank 5 -> 0.1; p90 rank 9 in (0.1, 1.0]: 0.1 + 0.9 * 4/5 = 0.82 (PromQL on the new layout alone)
    assert row[0] == pytest.approx(0.1)
    assert row[1] == pytest.approx(0.82)
    assert row[4] == pytest.approx(0.2)


def test_a_series_relabelled_by_a_promotion_is_not_counted_twice():
    """rollout_phase stable -> promoting splits one gauge into two series: average them, never sum."""
    mem = "baseten_container_cpu_memory_working_set_bytes"
    active = "baseten_replicas_active"
    store = store_with(
        series(mem, [(0, 100), (15, 100)], deployment_id="d1", replica="r1", rollout_phase="stable"),
        series(mem, [(30, 100), (45, 100)], deployment_id="d1", replica="r1", rollout_phase="promoting"),
        series(mem, [(0, 300), (45, 300)], deployment_id="d1", replica="r2", rollout_phase="stable"),
        series(active, [(0, 2), (15, 2)], deployment_id="d1", source="gateway", rollout_phase="stable"),
        series(active, [(30, 2), (45, 2)], deployment_id="d1", source="gateway", rollout_phase="promoting"),
    )
    resp = run(store, [mem, active], Mode.SUMMARY, 0, 60)
    assert values_of(resp, mem) == [[200.0]]  # mean over replicas of (r1: 100, r2: 300)
    assert values_of(resp, active) == [[2.0]]
    current = execute(
        build_plan("m1", Mode.CURRENT, None, None, [active], lambda _s, _e: [(at(-60), D1)], at(50)), store
    )
    assert values_of(current, active) == [[2.0]]
