"""``GET /v1/models/{model_id}/engines`` (api/routes/engines.py) and the catalog's ``group`` and
``engines`` fields: which engines a model's deployments expose and which engine metrics apply, with
the usual keys and tenancy (issue 13 part 4; docs/dashboard-api.md)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.catalog import CATALOG
from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import T0, at, series

KEY, INVOKE_KEY, OTHER_KEY = "sm-eng-key", "sm-eng-invoke", "sm-eng-other"
LLM = [n for n in CATALOG if n.startswith("baseten_llm_")]  # apply to vLLM and SGLang too (adapted)
VLLM = [n for n in CATALOG if n.startswith("vllm:") or n in LLM]
SGLANG = [n for n in CATALOG if n.startswith("sglang:") or n in LLM]


def _declarations() -> dict:
    promoted = {"name": "production", "promotions": [{"deployment": "d1", "at": "2025-12-31T00:00:00Z"}]}
    return {
        "organizations": [
            org("acme", {KEY: "WORKSPACE_MANAGE_ALL", INVOKE_KEY: "WORKSPACE_INVOKE"}),
            org("other", {OTHER_KEY: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {
                "id": "m1",
                "organization": "acme",
                "deployments": [{"id": "d1"}, {"id": "d2"}, {"id": "d3"}],
                "environments": [promoted],
            },
            {"id": "x1", "organization": "other", "deployments": [{"id": "xd"}]},
        ],
    }


def _batch() -> SampleBatch:
    return SampleBatch.from_samples(
        [
            *series("vllm:num_requests_running", [(0, 2)], deployment_id="d1", source="vllm"),
            *series("sglang:num_running_reqs", [(0, 1)], deployment_id="d2", source="sglang"),
            *series("baseten_replicas_active", [(0, 1)], deployment_id="d3"),
            *series("vllm:num_requests_running", [(0, 9)], model_id="x1", deployment_id="xd"),
        ]
    )


@pytest.fixture(params=["memory", "duckdb"])
def client(request, tmp_path, serve: Serve) -> TestClient:
    store: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "s.duckdb")
    store.append(_batch())
    return serve(_declarations(), gateway=False, clock=lambda: at(60), store=store)


def get(client: TestClient, path: str, key: str = KEY, **params):
    return client.get(path, params=params, headers={"Authorization": f"Api-Key {key}"})


def test_every_deployment_of_the_model_with_its_engines(client):
    resp = get(client, "/v1/models/m1/engines")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "model_id": "m1",
        "engines": ["vllm", "sglang"],
        "deployments": [
            {"deployment_id": "d1", "engines": ["vllm"]},
            {"deployment_id": "d2", "engines": ["sglang"]},
            {"deployment_id": "d3", "engines": []},
        ],
        "metrics": [n for n in CATALOG if n in VLLM or n in SGLANG],  # catalog order
        "checked_at_epoch_millis": T0 + 60_000,
        "refresh_seconds": 120,
    }


def test_one_deployment_or_one_environment(client):
    d1 = get(client, "/v1/models/m1/engines", deployment_id="d1").json()
    assert (d1["engines"], d1["metrics"]) == (["vllm"], VLLM)
    assert "vllm:decode_tokens_per_second" in d1["metrics"]  # derived metrics apply with their engine
    d3 = get(client, "/v1/models/m1/engines", deployment_id="d3").json()
    assert (d3["engines"], d3["deployments"], d3["metrics"]) == (
        [],
        [{"deployment_id": "d3", "engines": []}],
        [],
    )
    # production names d1 both as a deployment alias and as the environment it serves
    alias = get(client, "/v1/models/m1/engines", deployment_id="production").json()
    env = get(client, "/v1/models/m1/engines", environment="production").json()
    assert alias["deployments"] == env["deployments"] == [{"deployment_id": "d1", "engines": ["vllm"]}]


@pytest.mark.parametrize(
    ("path", "params", "key", "status", "error"),
    [
        ("/v1/models/x1/engines", {}, KEY, 404, "no model 'x1'; list your models with GET /v1/models"),
        ("/v1/models/nope/engines", {}, KEY, 404, "no model 'nope'; list your models with GET /v1/models"),
        (
            "/v1/models/m1/engines",
            {"deployment_id": "d9"},
            KEY,
            404,
            "model 'm1' has no deployment 'd9'; list them with GET /v1/models/m1/deployments",
        ),
        (
            "/v1/models/m1/engines",
            {"environment": "staging"},
            KEY,
            404,
            "model 'm1' has no environment 'staging'; list them with GET /v1/models/m1/environments",
        ),
        (
            "/v1/models/m1/engines",
            {"deployment_id": "d1", "environment": "production"},
            KEY,
            400,
            "give deployment_id or environment, not both (neither: every deployment of the model)",
        ),
        (
            "/v1/models/m1/engines",
            {"environment": " "},
            KEY,
            400,
            "environment is empty; name one or leave environment out for every deployment of the model",
        ),
        (
            "/v1/models/m1/engines",
            {"deployment": "d1"},
            KEY,
            400,
            "unknown query parameter(s): deployment; this endpoint takes deployment_id, environment",
        ),
    ],
)
def test_errors(client, path, params, key, status, error):
    resp = get(client, path, key, **params)
    assert (resp.status_code, resp.json()) == (status, {"error": error})


def test_keys(client):
    assert get(client, "/v1/models/m1/engines", INVOKE_KEY).status_code == 403
    assert client.get("/v1/models/m1/engines").status_code == 401
    # the other organization sees its own model, never m1 (404 as for a missing model)
    assert get(client, "/v1/models/x1/engines", OTHER_KEY).json()["engines"] == ["vllm"]
    other = get(client, "/v1/models/m1/engines", OTHER_KEY)
    assert other.status_code == 404 and other.json() == get(
        client, "/v1/models/nope/engines", OTHER_KEY
    ).json() | {"error": "no model 'm1'; list your models with GET /v1/models"}


def test_catalog_serves_group_and_engines(client):
    by_name = {m["name"]: m for m in get(client, "/v1/metrics_catalog").json()["metrics"]}
    running = by_name["vllm:num_requests_running"]
    assert (running["group"], running["engines"], running["default_visible"]) == ("Engine", ["vllm"], True)
    decode = by_name["sglang:decode_tokens_per_second"]
    assert (decode["group"], decode["engines"], decode["default_visible"]) == ("LLM", ["sglang"], False)
    assert (by_name["baseten_replicas_active"]["group"], by_name["baseten_replicas_active"]["engines"]) == (
        "",
        [],
    )


def test_remote_write_series_are_detected_after_the_cache_refresh(serve: Serve):
    now = [at(60)]
    client = serve(_declarations(), gateway=False, clock=lambda: now[0], store=MemoryStore())
    assert get(client, "/v1/models/m1/engines", deployment_id="d3").json()["engines"] == []  # cached at 60 s
    lab = labels_of({"model_id": "m1", "deployment_id": "d3", "replica": "r1"})
    body = encode_write_request([Sample("sglang:num_running_reqs", lab, 4.0, at(70))])
    assert (
        client.post("/api/v1/write", content=body, headers={"Authorization": f"Bearer {KEY}"}).status_code
        == 204
    )
    now[0] = at(60 + 119.999)  # the answer of 60 s is reused for 2 minutes
    assert get(client, "/v1/models/m1/engines", deployment_id="d3").json()["engines"] == []
    now[0] = at(180)
    fresh = get(client, "/v1/models/m1/engines", deployment_id="d3").json()
    assert (fresh["engines"], fresh["checked_at_epoch_millis"]) == (["sglang"], at(180))
