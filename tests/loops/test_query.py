"""``execute_loops`` over the hand-computed data set of ``tests/loops/data.py``, on both store backends.

Every expected number is derived in data.py next to the samples; here: four points of 30 s at T0 + 0, 30,
60, 90 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servemetrics.api.loops_schemas import loops_metrics
from servemetrics.query.loops import LoopsResult
from servemetrics.query.loops import execute_loops as query_execute_loops
from servemetrics.query.loops_plan import LoopsNode, build_loops_plan
from servemetrics.samples import SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.conftest import schema_validator
from tests.loops import data
from tests.loops.data import MIB, NODES, STAMPS, TRAINER
from tests.query.helpers import T0, at

END = at(120)


def execute_loops(plan, store: Store) -> dict:
    """``query.loops.execute_loops`` as the ``metrics`` JSON object the API answers."""
    result: LoopsResult = query_execute_loops(plan, store)
    return loops_metrics(result).model_dump(mode="json")


@pytest.fixture(params=["memory", "duckdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "samples.duckdb")
    data.load(s)
    yield s
    s.close()


def run(store: Store, divisor: int | None = None, nodes: tuple[LoopsNode, ...] = NODES) -> dict:
    plan = build_loops_plan(TRAINER, nodes, T0, END, 30, divisor, now_ms=END, scrape_interval_s=15)
    return execute_loops(plan, store)


def points(actual: list[dict]) -> list[tuple[str, float]]:
    """A series of ``{value, timestamp}`` as ``(timestamp, value)`` pairs, to compare with ``expect``."""
    return [(p["timestamp"], p["value"]) for p in actual]


def expect(values: list[float], stamps: list[str] = STAMPS) -> list:
    """The pairs a series should have: ``values`` at ``stamps``, values compared to 1e-12 relative."""
    return [(t, pytest.approx(v, rel=1e-12)) for t, v in zip(stamps, values, strict=True)]


def test_leader_gpu_fields_are_keyed_by_rank_in_bytes_and_ratio(store):
    m = run(store)
    assert list(m["gpu_memory_usage_bytes"]) == ["0", "1"]
    # 1500, 3000, 4000, 4000 MiB
    assert points(m["gpu_memory_usage_bytes"]["0"]) == expect(
        [1500 * MIB, 3000 * MIB, 4000 * MIB, 4000 * MIB]
    )
    assert points(m["gpu_memory_usage_bytes"]["1"]) == expect([512 * MIB] * 4)  # 536,870,912 B
    assert points(m["gpu_utilization"]["0"]) == expect([0.6, 0.9, 0.9, 0.9])
    assert points(m["gpu_utilization"]["1"]) == expect([0.25] * 4)
    assert m["per_node_metrics"][0]["node_id"] == "leader-0"
    assert m["per_node_metrics"][0]["gpu_utilization"] == m["gpu_utilization"]


def test_leader_cpu_memory_and_storage_of_its_pod_only(store):
    m = run(store)
    # 3 + 0.5 cores, pod "other" (10 cores) excluded; [90, 120): pair (90, 105] only (no sample at 120):
    # 15 s of 3.5 cores / 30 s = 1.75 (nothing extrapolated past the last sample)
    assert points(m["cpu_usage"]) == expect([3.5, 3.5, 3.5, 1.75])
    assert points(m["cpu_memory_usage_bytes"]) == expect([2.1e9] * 4)
    assert points(m["ephemeral_storage"]["usage_bytes"]) == expect([1e9] * 4)
    assert points(m["ephemeral_storage"]["utilization"]) == expect([0.01] * 4)  # 1e9 / 1e11


def test_worker_that_stopped_half_way_has_gaps_not_zeros(store):
    worker = run(store)["per_node_metrics"][1]
    half = STAMPS[:2]
    assert worker["node_id"] == "worker-1"
    assert points(worker["gpu_memory_usage_bytes"]["0"]) == expect([400 * MIB] * 2, half)  # MIG 100 + 300 MiB
    assert points(worker["gpu_memory_usage_bytes"]["1"]) == expect([100 * MIB] * 2, half)
    assert points(worker["gpu_utilization"]["0"]) == expect([0.3] * 2, half)  # mean(0.2, 0.4)
    assert points(worker["gpu_utilization"]["1"]) == expect([0.5] * 2, half)
    # [0, 30): pairs (0, 15], (15, 30] = 30 CPU-s / 30 = 1.0; [30, 60): pair (30, 45] only (the last
    # sample): 15 CPU-s / 30 = 0.5, the covered half; [60, 90), [90, 120): no sample, no pair: gaps
    assert points(worker["cpu_usage"]) == expect([1.0, 0.5], half)
    assert points(worker["cpu_memory_usage_bytes"]) == expect([4e9] * 2, half)
    assert points(worker["ephemeral_storage"]["usage_bytes"]) == expect([5e10] * 2, half)  # 2e11 - 1.5e11
    assert points(worker["ephemeral_storage"]["utilization"]) == expect([0.25] * 2, half)


def test_requests_per_second_by_status_and_concurrency(store):
    m = run(store)
    # [0, 30): the pair (0, 15] holds all 69 requests / 30 s; [30, 60): pair (30, 45] flat; then up but
    # gone (no pair covers [60, 120))
    assert points(m["inference_volume"]) == expect([2.3, 0.0, 0.0, 0.0])
    assert points(m["concurrent_requests"]) == expect([3.0, 1.0, 1.0, 1.0])
    by = m["inference_volume_by_status"]
    assert [p["timestamp"] for p in by] == STAMPS
    assert [p["status_2xx"] for p in by] == pytest.approx([2.0, 0, 0, 0])  # 60 / 30
    assert [p["status_4xx"] for p in by] == pytest.approx([0.1, 0, 0, 0])  # 3 / 30
    assert [p["status_5xx"] for p in by] == pytest.approx([0.2, 0, 0, 0])  # 6 / 30


def test_divisor_60_multiplies_request_rates_by_60(store):
    m = run(store, divisor=60)
    assert points(m["inference_volume"]) == expect([138.0, 0.0, 0.0, 0.0])  # 2.3 x 60 requests per minute
    first = m["inference_volume_by_status"][0]
    assert (first["status_2xx"], first["status_4xx"], first["status_5xx"]) == pytest.approx((120, 6, 12))
    assert points(m["concurrent_requests"]) == expect([3.0, 1.0, 1.0, 1.0])  # not a rate: unchanged


def test_latency_percentiles_in_ms_and_null_without_requests(store):
    stats = run(store)["response_time_stats"]
    assert [p["timestamp"] for p in stats] == STAMPS
    assert (stats[0]["p50"], stats[0]["p95"], stats[0]["p99"]) == pytest.approx((245.0, 962.5, 1000.0))
    for p in stats[1:]:  # flat buckets (point 1) and no buckets (points 2, 3): no requests
        assert (p["p50"], p["p95"], p["p99"]) == (None, None, None)


def test_volumes_are_gaps_when_no_request_source_was_up(store):
    # the request target is down (no `up` = 1) from 60 s: points 2 and 3 have no volume entries
    store.append(SampleBatch.from_samples(data.s("up", "leader-0", [(60, 0), (75, 0)], instance="http://x")))
    leader = LoopsNode("leader-0", True, (0, 1), "trainer-0", "loops", ("http://x",))
    m = run(store, nodes=(leader,))
    assert points(m["inference_volume"]) == expect([2.3, 0.0], STAMPS[:2])
    assert [p["timestamp"] for p in m["inference_volume_by_status"]] == STAMPS[:2]
    assert len(m["response_time_stats"]) == 4


def test_declared_ranks_without_data_are_empty_series(store):
    node = LoopsNode("leader-0", True, (0, 1, 2, 3), "trainer-0", "loops")
    m = run(store, nodes=(node,))
    assert list(m["gpu_utilization"]) == ["0", "1", "2", "3"]
    assert m["gpu_utilization"]["2"] == [] and m["gpu_memory_usage_bytes"]["3"] == []


def test_undeclared_ranks_come_from_the_data(store):
    node = LoopsNode("worker-1", True)
    assert list(run(store, nodes=(node,))["gpu_memory_usage_bytes"]) == ["0", "1"]


def test_unknown_trainer_has_empty_series_and_null_latencies(store):
    plan = build_loops_plan("nobody", NODES, T0, END, 30, None, now_ms=END, scrape_interval_s=15)
    m = execute_loops(plan, store)
    assert m["inference_volume"] == [] and m["cpu_usage"] == [] and m["gpu_utilization"] == {"0": [], "1": []}
    assert [p["p50"] for p in m["response_time_stats"]] == [None] * 4


def test_every_answer_validates_against_the_spec(store):
    validator = schema_validator("GetLoopsDeploymentMetricsResponseV1")
    for divisor in (None, 60):
        body = {"deployment_id": TRAINER, "metrics": run(store, divisor)}
        assert [e.message for e in validator.iter_errors(body)] == []
