"""One set of golden query tests through the real API on every store: the embedded DuckDB file, a real
Prometheus and a real VictoriaMetrics (``golden.py`` has the data set).

Gauges and histogram quantiles equal the reference to 1e-9 relative on every store; counters (requests,
CPU) too on DuckDB and VictoriaMetrics; on Prometheus, whose ``increase`` extrapolates, requests stay
within the documented bound (docs/store.md) and CPU is not compared. The reference answers come from
``MemoryStore`` (the semantics' reference implementation) and are checked by hand below.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.app import create_app
from servemetrics.config import parse_config
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from servemetrics.store.prometheus import PrometheusStore
from tests.engines import golden as g

BACKENDS = ["duckdb", "prometheus", "victoriametrics"]


def _answers(store: Store, model_id: str, b_ms: int, tmp: Path) -> dict[str, dict[str, object]]:
    config = parse_config(g.config_data(model_id, b_ms, str(tmp)))
    app = create_app(config, scrape=False, gateway=False, clock=lambda: b_ms + 180_000, store=store)
    path = f"/v1/models/{model_id}/environments/production/metrics"
    headers = {"Authorization": f"Api-Key {g.KEY}"}
    windows = {
        "series": {"mode": "SERIES", "start_epoch_millis": b_ms + 10_000, "end_epoch_millis": b_ms + 180_000},
        "summary": {
            "mode": "SUMMARY",
            "start_epoch_millis": b_ms + 10_000,
            "end_epoch_millis": b_ms + 180_000,
        },
        "current": {"mode": "CURRENT"},
    }
    out = {}
    with TestClient(app) as client:
        for name, params in windows.items():
            resp = client.get(path, params={**params, "metrics": g.METRICS}, headers=headers)
            assert resp.status_code == 200, resp.text
            out[name] = resp.json()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, dict[str, object]]]:
    """``(B, answers)`` of the reference store on the data set."""
    b_ms = g.base_ms()
    store = MemoryStore()
    store.append(g.samples("gold", b_ms))
    return b_ms, _answers(store, "gold", b_ms, tmp_path_factory.mktemp("ref"))


def test_reference_answers_by_hand(reference, metrics_response_validator) -> None:
    _, answers = reference
    series = answers["series"]
    metrics_response_validator.validate(series)
    assert [d["name"] for d in series["metric_descriptors"]] == g.METRICS
    starts = [v["start_epoch_millis"] - series["start_epoch_millis"] for v in series["metric_values"]]
    assert starts == [0, 20_000, 50_000, 80_000, 90_000, 110_000, 140_000]  # 10 30 60 90 100 120 150 s
    rows = [v["values"] for v in series["metric_values"]]
    # replicas: d1's one series reads 2 until the promotion, d2's 1 after it
    assert [r[0] for r in rows] == [[2.0]] * 4 + [[1.0]] * 3
    # requests [30, 60): the six pairs (t0, t1] inside, t1 = 35..60 s (edges on sample times: no pair
    # straddles one). r1 +10 up to 50 s (4 x 10) and +40 at 55 and 60 s = 120; r2 6 x 5 = 30 -> 2xx
    # 150; 503: r1 and r2 +1 per 5 s, 6 pairs each = 12; no 4xx series while others have data -> 0
    assert rows[1][2] == [150.0, 0.0, 12.0]
    # [60, 90): r1 6 x 40 = 240; r2 +5 at 65 s, reset to 3 at 70 s (counts 3), +5 at 75..90 s:
    # 5 + 3 + 20 = 28 -> 268; 503: 12
    assert rows[2][2] == [268.0, 0.0, 12.0]
    # [100, 120): only r3 (d2): 4 samples x 20 = 80; 503: 4
    assert rows[4][2] == [80.0, 0.0, 4.0]
    # GPU utilization [30, 60): k = 18..23 -> r1 0.75 0.1 0.25 0.5 0.75 0.1 (mean 2.45 / 6), r2 the same
    # + 0.05; mean over series = (2.45 / 6 + 2.75 / 6) / 2 = 5.2 / 12
    assert math.isclose(rows[1][1][0], 5.2 / 12, rel_tol=1e-12)
    # latency [30, 60), 6 samples: buckets r1 +6 +18 +24 +24, r2 0 +12 +12 +12 -> cumulative 6 30 36 36;
    # p50 = rank 18 in (0.1, 0.5]: 0.1 + 0.4 * (18 - 6) / 24 = 0.3; avg = sum 0.5 x count / count = 0.5
    assert math.isclose(rows[1][3][0], 0.3, rel_tol=1e-12) and math.isclose(rows[1][3][4], 0.5, rel_tol=1e-12)
    # CPU and working set, one view per replica (C13): [30, 60) r1 cAdvisor 1 core (never + 0.8 from
    # kubelet_resource), r2 cAdvisor's 4 pairs of 3 (35..50 s; its samples end at 50 s) over 30 s = 0.4;
    # mean 0.7; working set 1e9, 0.6e9
    assert math.isclose(rows[1][4][0], 0.7, rel_tol=1e-12) and math.isclose(rows[1][5][0], 0.8e9)
    # [60, 90): r2's cAdvisor is gone, its process view answers: (1 + 0.4) / 2; (1e9 + 0.8e9) / 2
    assert math.isclose(rows[2][4][0], 0.7, rel_tol=1e-12) and math.isclose(rows[2][5][0], 0.9e9)
    # [100, 120): r3's process view alone: 2 cores, 2e9 bytes
    assert math.isclose(rows[4][4][0], 2.0, rel_tol=1e-12) and math.isclose(rows[4][5][0], 2.0e9)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """A fresh store of each backend (the engines are shared; each test uses its own model id)."""
    if request.param == "duckdb":
        yield request.param, DuckDBStore(tmp_path / "samples.duckdb")
        return
    engine = request.getfixturevalue(f"{request.param}_engine")
    yield request.param, PrometheusStore(engine.options(tmp_path / "buffer"))


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def test_golden_answers(request, backend, reference, tmp_path, metrics_response_validator) -> None:
    name, store = backend
    b_ms, want = reference
    model_id = f"gold-{uuid.uuid4().hex[:8]}"
    batch = g.samples(model_id, b_ms)
    store.append(batch)
    if isinstance(store, PrometheusStore):
        assert store.flush(30), "the engine did not take the samples"
        engine = request.getfixturevalue(f"{name}_engine")
        engine.wait_for(model_id, len(batch), b_ms - 3_600_000, b_ms + 3_600_000)
    got = _answers(store, model_id, b_ms, tmp_path)
    for mode in ("series", "summary", "current"):
        metrics_response_validator.validate(got[mode])
        w, h = want[mode], got[mode]
        assert h["metric_descriptors"] == w["metric_descriptors"], mode
        for vs_w, vs_h in zip(w["metric_values"], h["metric_values"], strict=True):  # type: ignore[arg-type]
            assert vs_h["start_epoch_millis"] == vs_w["start_epoch_millis"]
            for metric, col_w, col_h in zip(g.METRICS, vs_w["values"], vs_h["values"], strict=True):
                if metric in g.COUNTERS and name == "prometheus":
                    continue  # extrapolated; requests are bounded below
                assert all(_close(a, b) for a, b in zip(col_h, col_w, strict=True)), (
                    mode,
                    metric,
                    col_h,
                    col_w,
                )


def _series_values(model_id_values: list[int], replica: str) -> list[tuple[int, float]]:
    return [(t, g.requests_200(replica, t)) for t in model_id_values]


def test_prometheus_counters_within_the_documented_bound(prometheus_engine, reference, tmp_path) -> None:
    """Per SERIES value set, 2xx requests on Prometheus lie in ``[ours - sum d0, ours + sum I*(w-s)/s]``
    over the serving replicas (``golden.prometheus_increase_bound``), and differ from ours somewhere."""
    b_ms, want = reference
    store = PrometheusStore(prometheus_engine.options(tmp_path / "buffer"))
    model_id = f"gold-{uuid.uuid4().hex[:8]}"
    batch = g.samples(model_id, b_ms)
    store.append(batch)
    assert store.flush(30)
    prometheus_engine.wait_for(model_id, len(batch), b_ms - 3_600_000, b_ms + 3_600_000)
    got = _answers(store, model_id, b_ms, tmp_path)["series"]
    bounds = [(10, 30), (30, 60), (60, 90), (90, 100), (100, 120), (120, 150), (150, 180)]
    differs = False
    for (lo, hi), vs_w, vs_h in zip(
        bounds, want["series"]["metric_values"], got["metric_values"], strict=True
    ):
        replicas = ("r1", "r2") if lo < g.PROMOTION_S else ("r3",)
        low = high = 0.0
        for r in replicas:
            a, b = g.prometheus_increase_bound(_series_values(list(g.TIMES), r), lo, hi)
            low, high = low + a, high + b
        ours, theirs = vs_w["values"][2][0], vs_h["values"][2][0]
        assert ours + low - 1e-9 <= theirs <= ours + high + 1e-9, (lo, hi, ours, theirs, low, high)
        differs |= not math.isclose(ours, theirs)
    assert differs  # r1's rate change and r2's reset are extrapolated
