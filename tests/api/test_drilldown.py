"""Drill-down (``group_by``, our extension) over HTTP on both stores: hand-computed parts, parts that add
up to the ungrouped answer for sum metrics, clear 400s and unchanged tenancy.

Data (seconds after T0, SUMMARY windows [0, 60] s unless said): deployment d1 with replicas r1 and r2;
environment production switches instantly from d1 to d2 at 30 s.

- requests (per replica, as Knative's queue-proxy reports them): r1 ``200`` 0, 10, 20 and ``503`` 0, 0, 2;
  r2 ``200`` 0, 6, 12 (at 0, 30, 60 s). d2 (no replica label, as our gateway meters it) ``200`` 0, 5 at
  30, 60 s. Another organization's model m2 has a replica r1 too, with 1000 requests.
- GPU utilisation (mean across GPUs): r1 GPU 0 0.2, GPU 1 0.4; r2 GPU 0 0.9. Total power (sum):
  r1 100 W + 150 W, r2 200 W.
- end-to-end latency, buckets 0.1 / 0.5 / +Inf, samples at 0 and 60 s: r1 10 requests in (0.1, 0.5]
  taking 3 s in all; r2 4 requests in (0, 0.1] taking 0.2 s.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import at, series

KEY, OTHER_KEY = "sm-drill-key", "sm-drill-other"
REQ = "baseten_inference_requests_total"
UTIL, POWER = "baseten_gpu_utilization", "baseten_gpu_power_total_watts"
E2E = "baseten_end_to_end_response_time_seconds"
ACTIVE = "baseten_replicas_active"
T3 = (0, 30, 60)


def _histogram(replica: str, buckets: dict[str, float], total_s: float) -> list[Sample]:
    out: list[Sample] = []
    for le, n in buckets.items():
        out += series(E2E + "_bucket", [(0, 0), (60, n)], deployment_id="d1", replica=replica, le=le)
    count = buckets["+Inf"]
    out += series(E2E + "_sum", [(0, 0), (60, total_s)], deployment_id="d1", replica=replica)
    out += series(E2E + "_count", [(0, 0), (60, count)], deployment_id="d1", replica=replica)
    return out


def _samples() -> list[Sample]:
    d1 = {"deployment_id": "d1"}
    out = [
        *series(REQ, list(zip(T3, (0, 10, 20), strict=True)), **d1, replica="r1", status_code="200"),
        *series(REQ, list(zip(T3, (0, 0, 2), strict=True)), **d1, replica="r1", status_code="503"),
        *series(REQ, list(zip(T3, (0, 6, 12), strict=True)), **d1, replica="r2", status_code="200"),
        *series(REQ, [(30, 0), (60, 5)], deployment_id="d2", status_code="200"),
        *series(
            REQ, [(0, 0), (60, 1000)], model_id="m2", deployment_id="x1", replica="r1", status_code="200"
        ),
        *series(ACTIVE, [(t, 2) for t in T3], **d1),
        *_histogram("r1", {"0.1": 0, "0.5": 10, "+Inf": 10}, 3.0),
        *_histogram("r2", {"0.1": 4, "0.5": 4, "+Inf": 4}, 0.2),
    ]
    for replica, gpu, util, watts in (("r1", "0", 0.2, 100), ("r1", "1", 0.4, 150), ("r2", "0", 0.9, 200)):
        labels = {**d1, "replica": replica, "gpu": gpu}
        out += series(UTIL, [(t, util) for t in T3], **labels)
        out += series(POWER, [(t, watts) for t in T3], **labels)
    return out


def declarations() -> dict:
    return {
        "organizations": [
            org("acme", {KEY: "WORKSPACE_EXPORT_METRICS"}),
            org("other", {OTHER_KEY: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {
                "id": "m1",
                "organization": "acme",
                "deployments": [{"id": "d1"}, {"id": "d2"}],
                "environments": [
                    {
                        "name": "production",
                        "promotions": [
                            {"deployment": "d1", "at": "2025-12-31T00:00:00Z"},
                            {"deployment": "d2", "at": "2026-01-01T00:00:30Z"},
                        ],
                    }
                ],
            },
            {"id": "m2", "organization": "other", "deployments": [{"id": "x1"}]},
        ],
    }


@pytest.fixture(params=["memory", "duckdb"])
def client(request, tmp_path, serve: Serve) -> TestClient:
    store: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "s.duckdb")
    store.append(SampleBatch.from_samples(_samples()))
    return serve(declarations(), gateway=False, clock=lambda: at(120), store=store)


def _get(client: TestClient, path: str, key: str = KEY, **params):
    window = {"mode": "SUMMARY", "start_epoch_millis": at(0), "end_epoch_millis": at(60)}
    query = {k: v for k, v in {**window, **params}.items() if v is not None}
    return client.get(path, params=query, headers={"Authorization": f"Api-Key {key}"})


def _answer(client: TestClient, path: str, **params) -> dict[str, dict[tuple, list]]:
    """name -> {label set as sorted pairs: [value per value set]}."""
    resp = _get(client, path, **params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    out: dict[str, dict[tuple, list]] = {}
    for j, d in enumerate(body["metric_descriptors"]):
        keys = [tuple(sorted(ls.items())) for ls in d["label_sets"]]
        out[d["name"]] = {
            k: [row["values"][j][i] for row in body["metric_values"]] for i, k in enumerate(keys)
        }
    return out


D1 = "/v1/models/m1/deployments/d1/metrics"
ENV = "/v1/models/m1/environments/production/metrics"


def _status(**lead: str) -> list[tuple]:
    return [tuple(sorted({**lead, "status": c}.items())) for c in ("2xx", "4xx", "5xx")]


def test_requests_by_replica_are_each_replicas_own_and_add_up(client):
    got = _answer(client, D1, metrics=REQ, group_by="replica")[REQ]
    r1, r2 = _status(replica="r1"), _status(replica="r2")
    assert got == {r1[0]: [20.0], r1[1]: [0.0], r1[2]: [2.0], r2[0]: [12.0], r2[1]: [0.0], r2[2]: [0.0]}
    whole = _answer(client, D1, metrics=REQ)[REQ]
    assert whole == {k: [v] for k, v in zip(_status(), (32.0, 0.0, 2.0), strict=True)}
    for a, b, w in zip(r1, r2, _status(), strict=True):
        assert got[a][0] + got[b][0] == whole[w][0]


def test_exact_status_codes_instead_of_classes(client):
    got = _answer(client, D1, metrics=REQ, group_by="status_code")[REQ]
    assert got == {(("status_code", "200"),): [32.0], (("status_code", "503"),): [2.0]}


def test_gpu_metrics_by_replica_and_by_gpu(client):
    by_replica = _answer(client, D1, metrics=[UTIL, POWER], group_by="replica")
    assert by_replica[UTIL] == {(("replica", "r1"),): [pytest.approx(0.3)], (("replica", "r2"),): [0.9]}
    assert by_replica[POWER] == {(("replica", "r1"),): [250.0], (("replica", "r2"),): [200.0]}
    whole = _answer(client, D1, metrics=[UTIL, POWER])
    assert whole[UTIL] == {(): [pytest.approx(0.5)]} and whole[POWER] == {(): [450.0]}
    by_gpu = _answer(client, D1, metrics=UTIL, group_by="gpu")[UTIL]
    assert by_gpu == {
        (("gpu", "0"), ("replica", "r1")): [0.2],
        (("gpu", "1"), ("replica", "r1")): [0.4],
        (("gpu", "0"), ("replica", "r2")): [0.9],
    }


def test_current_mode_splits_too(client):
    got = _answer(
        client,
        D1,
        metrics=POWER,
        group_by="replica",
        mode="CURRENT",
        start_epoch_millis=None,
        end_epoch_millis=None,
    )
    assert got[POWER] == {(("replica", "r1"),): [250.0], (("replica", "r2"),): [200.0]}


def test_histogram_by_replica_gives_per_replica_quantiles(client):
    got = _answer(client, D1, metrics=E2E, group_by="replica")[E2E]
    # r1: 10 in (0.1, 0.5], quantile q at 0.1 + 0.4 q; r2: 4 in (0, 0.1], at 0.1 q; avg = sum / count
    want = {
        "r1": {"0.5": 0.3, "0.9": 0.46, "0.95": 0.48, "0.99": 0.496, "avg": 0.3},
        "r2": {"0.5": 0.05, "0.9": 0.09, "0.95": 0.095, "0.99": 0.099, "avg": 0.05},
    }
    for replica, values in want.items():
        for q, v in values.items():
            ls = {"replica": replica, **({"stat": "avg"} if q == "avg" else {"quantile": q})}
            assert got[tuple(sorted(ls.items()))] == [pytest.approx(v)], (replica, q)
    assert len(got) == 10


def test_deployment_split_across_a_promotion_adds_up(client):
    summary = _answer(client, ENV, metrics=REQ, group_by="deployment")[REQ]
    d1, d2 = _status(deployment_id="d1"), _status(deployment_id="d2")
    assert [summary[k] for k in d1 + d2] == [[32.0], [0.0], [2.0], [5.0], [0.0], [0.0]]
    series_ = _answer(client, ENV, metrics=REQ, group_by="deployment", mode="SERIES")[REQ]
    # [0, 30) s: d1 serves (r1 10 + r2 6 requests); [30, 60) s: d2 serves (5)
    assert [series_[k] for k in d1] == [[16.0, None], [0.0, None], [0.0, None]]
    assert [series_[k] for k in d2] == [[None, 5.0], [None, 0.0], [None, 0.0]]
    whole = _answer(client, ENV, metrics=REQ, mode="SERIES")[REQ]
    for a, b, w in zip(d1, d2, _status(), strict=True):
        parts = [sum(v for v in pair if v is not None) for pair in zip(series_[a], series_[b], strict=True)]
        assert parts == whole[w]


def test_a_group_by_a_metric_does_not_accept_is_a_400_naming_it(client):
    resp = _get(client, D1, metrics=[REQ, ACTIVE], group_by="gpu")
    assert resp.status_code == 400
    assert resp.json() == {
        "error": f"group_by=gpu does not apply to {REQ}, which accepts group_by=replica, deployment, "
        f"status_code; {ACTIVE}, which accepts group_by=deployment; request those metrics without "
        "group_by or with a value they accept (docs/query-semantics.md, Drill-down)"
    }


def test_an_unknown_group_by_is_a_400_listing_the_values(client):
    upper = _answer(client, D1, metrics=REQ, group_by="REPLICA")
    assert upper == _answer(client, D1, metrics=REQ, group_by="replica")
    resp = _get(client, D1, metrics=REQ, group_by="pod")
    assert resp.status_code == 400
    message = resp.json()["error"]
    assert "group_by" in message
    for value in ("replica", "gpu", "deployment", "status_code"):
        assert value in message


def test_tenancy_is_unchanged(client):
    assert _get(client, D1, key=OTHER_KEY, metrics=REQ, group_by="replica").status_code == 404
    got = _answer(client, D1, metrics=REQ, group_by="replica")[REQ]
    assert got[(("replica", "r1"), ("status", "2xx"))] == [20.0]  # not m2's r1 (another organization)


def test_the_openapi_schema_names_the_parameter(client):
    spec = client.get("/openapi.json").json()
    for path in (D1, ENV):
        template = path.replace("m1", "{model_id}").replace("d1", "{deployment_id}")
        template = template.replace("production", "{env_name}")
        params = {p["name"]: p for p in spec["paths"][template]["get"]["parameters"]}
        assert "Drill-down" in params["group_by"]["description"]
