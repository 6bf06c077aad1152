"""Histogram quantiles across bucket layouts on every store: a replica with buckets 0.1, 0.2, +Inf and one
with 0.15, +Inf (a vLLM and an SGLang layout) give the quantiles of all their observations on DuckDB, a real
Prometheus and a real VictoriaMetrics, not a per-``le`` sum (the engines answer the per-view reads that
``query/histograms.py`` makes when the layouts differ; ``tests/scrape/test_llm_set.py`` derives the
values)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.prometheus import PrometheusStore
from servemetrics.types import labels_of
from tests.engines import golden as g

E2E = "baseten_end_to_end_response_time_seconds"
STEPS = {  # replica -> per 5 s: (le, increase) of its buckets, then _sum and _count increases
    "r1": ((("0.1", 2), ("0.2", 4), ("+Inf", 4)), 0.5, 4),
    "r2": ((("0.15", 2), ("+Inf", 2)), 0.2, 2),
}


@pytest.fixture(params=["duckdb", "prometheus", "victoriametrics"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    if request.param == "duckdb":
        yield request.param, DuckDBStore(tmp_path / "samples.duckdb")
        return
    engine = request.getfixturevalue(f"{request.param}_engine")
    yield request.param, PrometheusStore(engine.options(tmp_path / "buffer"))


def _samples(model_id: str, b_ms: int) -> list[Sample]:
    out = []
    for replica, (buckets, s, n) in STEPS.items():
        base = {"model_id": model_id, "deployment_id": "d1", "replica": replica}
        for t in g.TIMES:
            k, at = (t + 60) // g.STEP_S, b_ms + t * 1000
            out += [
                Sample(E2E + "_bucket", labels_of({**base, "le": le}), inc * k, at) for le, inc in buckets
            ]
            out += [
                Sample(E2E + "_sum", labels_of(base), s * k, at),
                Sample(E2E + "_count", labels_of(base), n * k, at),
            ]
    return out


def test_quantiles_across_layouts_on_every_store(request, backend) -> None:
    name, store = backend
    b_ms, model_id = g.base_ms(), f"layouts-{uuid.uuid4().hex[:8]}"
    samples = _samples(model_id, b_ms)
    store.append(SampleBatch.from_samples(samples))
    if isinstance(store, PrometheusStore):
        assert store.flush(30), "the engine did not take the samples"
        engine = request.getfixturevalue(f"{name}_engine")
        engine.wait_for(model_id, len(samples), b_ms - 3_600_000, b_ms + 3_600_000)
    end = b_ms + 60_000
    plan = build_plan(
        model_id, Mode.SUMMARY, b_ms, end, [E2E], lambda _s, _e: [(b_ms - 3_600_000, frozenset({"d1"}))], end
    )
    (row,) = execute(plan, store).rows
    expect = [0.09, 0.15 + 0.05 * 0.4, 0.15 + 0.05 * 0.7, 0.15 + 0.05 * 0.94, 0.7 / 6]
    assert list(row.values[0]) == [pytest.approx(v, rel=1e-9) for v in expect]
    store.close()
