"""Drill-down at the query layer (``Plan.group_by``) on both stores: each part runs its metric's own
rules on its series alone (one container source per replica, derived ratios per replica, a live
replica's 0), parts come sorted with the catalog's label sets, and a metric without parts is omitted."""

from __future__ import annotations

import pytest

from servemetrics.catalog.splits import Split
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.query.helpers import at, series, wire

D1 = {"deployment_id": "d1"}
CPU = "baseten_container_cpu_usage_seconds_total"
HIT_RATE = "vllm:prefix_cache_hit_rate"
REQ = "baseten_inference_requests_total"
UTIL = "baseten_gpu_utilization"


def _samples() -> list[Sample]:
    r1, r2 = {**D1, "replica": "r1"}, {**D1, "replica": "r2"}
    return [
        # CPU: r1's cAdvisor 60 cpu-s in 60 s (1 core) beside its process collector's 120 (not used);
        # r2 has only its process collector, 30 cpu-s (0.5 core)
        *series(CPU, [(0, 0), (60, 60)], **r1, source="cadvisor"),
        *series(CPU, [(0, 0), (60, 120)], **r1, source="process"),
        *series(CPU, [(0, 0), (60, 30)], **r2, source="process"),
        # prefix cache: r1 30 hits of 60 queries, r2 10 of 40
        *series("vllm:prefix_cache_hits_total", [(0, 0), (60, 30)], **r1),
        *series("vllm:prefix_cache_queries_total", [(0, 0), (60, 60)], **r1),
        *series("vllm:prefix_cache_hits_total", [(0, 0), (60, 10)], **r2),
        *series("vllm:prefix_cache_queries_total", [(0, 0), (60, 40)], **r2),
        # requests: r1 10 in (0, 30] s and none after, its target up throughout
        *series(REQ, [(0, 0), (30, 10)], **r1, status_code="200"),
        *series("up", [(0, 1), (30, 1), (45, 1)], **r1),
    ]


@pytest.fixture(params=["memory", "duckdb"])
def store(request, tmp_path) -> Store:
    out: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "s.duckdb")
    out.append(SampleBatch.from_samples(_samples()))
    return out


def _run(store: Store, names: list[str], group_by: Split | None, mode: Mode = Mode.SUMMARY) -> dict:
    plan = build_plan(
        "m1", mode, at(0), at(60), names, lambda _s, _e: [(at(-3600), frozenset({"d1"}))], at(120), group_by
    )
    return wire(execute(plan, store))


def _by_label_set(body: dict, name: str) -> dict[tuple, list]:
    j = [d["name"] for d in body["metric_descriptors"]].index(name)
    sets = [tuple(sorted(ls.items())) for ls in body["metric_descriptors"][j]["label_sets"]]
    return {k: [row["values"][j][i] for row in body["metric_values"]] for i, k in enumerate(sets)}


def test_replica_scope_takes_one_source_per_replica(store):
    got = _by_label_set(_run(store, [CPU], Split.REPLICA), CPU)
    assert got == {(("replica", "r1"),): [pytest.approx(1.0)], (("replica", "r2"),): [pytest.approx(0.5)]}
    assert _by_label_set(_run(store, [CPU], None), CPU) == {(): [pytest.approx(0.75)]}


def test_a_derived_ratio_is_each_replicas_own(store):
    got = _by_label_set(_run(store, [HIT_RATE], Split.REPLICA), HIT_RATE)
    assert got == {(("replica", "r1"),): [0.5], (("replica", "r2"),): [0.25]}
    assert _by_label_set(_run(store, [HIT_RATE], None), HIT_RATE) == {(): [0.4]}


def test_a_live_replica_without_traffic_reads_zero_and_label_sets_are_in_order(store):
    body = _run(store, [REQ], Split.REPLICA, Mode.SERIES)
    [descriptor] = body["metric_descriptors"]
    assert descriptor["label_sets"] == [
        {"replica": "r1", "status": "2xx"},
        {"replica": "r1", "status": "4xx"},
        {"replica": "r1", "status": "5xx"},
    ]
    assert [row["values"][0] for row in body["metric_values"]] == [[10.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    codes = _run(store, [REQ], Split.STATUS_CODE, Mode.SERIES)
    assert _by_label_set(codes, REQ) == {(("status_code", "200"),): [10.0, 0.0]}


def test_a_metric_without_parts_is_omitted(store):
    body = _run(store, [UTIL, CPU], Split.DEPLOYMENT)
    assert [d["name"] for d in body["metric_descriptors"]] == [CPU]
    assert _by_label_set(body, CPU) == {(("deployment_id", "d1"),): [pytest.approx(0.75)]}
