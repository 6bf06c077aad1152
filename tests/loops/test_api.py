"""The trainer endpoints over HTTP (in-process app, DuckDB store file, YAML ``loops`` section): the
metrics POST against the hand-computed data set, listing, the sampler link, auth, 404 and 400s."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.app import create_app
from servemetrics.config import parse_config
from servemetrics.store.duckdb import DuckDBStore
from tests.conftest import schema_validator
from tests.loops import data
from tests.query.helpers import T0, at

KEY, SCOPED, OTHER_SCOPE, INVOKE, OTHER_ORG = "k-manage", "k-export-m1", "k-export-m9", "k-invoke", "k-other"
URL = "/v1/loops/deployments/t1/metrics"
WINDOW = {"start_epoch_millis": T0, "end_epoch_millis": at(120), "step_seconds": 30}
VALIDATOR = schema_validator("GetLoopsDeploymentMetricsResponseV1")


def trainer(trainer_id: str, org: str, sampler: dict | None) -> dict:
    target = {"url": data.REQUEST_URL, "kind": "requests"}
    return {
        "id": trainer_id,
        "name": f"trainer {trainer_id}",
        "organization": org,
        "sampler": sampler,
        "nodes": [
            {"id": "worker-1", "role": "worker", "gpu_ranks": [0, 1]},
            {
                "id": "leader-0",
                "role": "leader",
                "gpu_ranks": [0, 1],
                "pod": "trainer-0",
                "namespace": "loops",
                "targets": [target, {"url": "http://10.0.0.1:9400/metrics", "kind": "dcgm"}],
            },
        ],
    }


def config(tmp_path):
    keys = [
        {"key": KEY, "type": "WORKSPACE_MANAGE_ALL"},
        {"key": SCOPED, "type": "WORKSPACE_EXPORT_METRICS", "model_ids": ["m1"]},
        {"key": OTHER_SCOPE, "type": "WORKSPACE_EXPORT_METRICS", "model_ids": ["m9"]},
        {"key": INVOKE, "type": "WORKSPACE_INVOKE"},
    ]
    return parse_config(
        {
            "data_dir": str(tmp_path),
            "organizations": [
                {"name": "acme", "api_keys": keys},
                {"name": "other", "api_keys": [{"key": OTHER_ORG, "type": "WORKSPACE_MANAGE_ALL"}]},
            ],
            "models": [
                {"id": "m1", "organization": "acme", "deployments": [{"id": "sampler-d1"}]},
                {"id": "m9", "organization": "acme"},
                {"id": "mx", "organization": "other"},
            ],
            "loops": [
                trainer("t1", "acme", {"model": "m1", "deployment": "sampler-d1"}),
                trainer("t2", "acme", None),
                trainer("tx", "other", {"model": "mx"}),
            ],
        }
    )


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    store = data.load(DuckDBStore(tmp_path / "samples.duckdb"))
    app = create_app(config(tmp_path), scrape=False, gateway=False, clock=lambda: at(120), store=store)
    with TestClient(app) as c:
        yield c


def post(client, url=URL, body=None, key=KEY, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.post(url, json=body, headers=headers, **kw)


def test_metrics_match_the_hand_computed_data_and_the_spec(client):
    resp = post(client, body={**WINDOW, "time_divisor_seconds": 60})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    VALIDATOR.validate(body)
    m = body["metrics"]
    assert body["deployment_id"] == "t1"
    assert [p["value"] for p in m["inference_volume"]] == pytest.approx([138.0, 0, 0, 0])  # 2.3/s x 60
    assert m["response_time_stats"][0]["p50"] == pytest.approx(245.0)
    assert [p["value"] for p in m["cpu_usage"]] == pytest.approx([3.5] * 4)  # the leader's pod
    # nodes: the leader first although the config lists the worker first; the worker has gaps
    assert [n["node_id"] for n in m["per_node_metrics"]] == ["leader-0", "worker-1"]
    assert len(m["per_node_metrics"][1]["cpu_usage"]) == 2
    assert m["gpu_memory_usage_bytes"]["1"][0] == {"value": 536870912.0, "timestamp": "2026-01-01T00:00:00Z"}


def test_no_body_means_the_last_hour_per_second(client):
    body = post(client, body=None).json()
    VALIDATOR.validate(body)
    # now = T0 + 120 s: window [T0 - 3480 s, T0 + 120 s), 30 s steps = 120 points of latency stats
    stats = body["metrics"]["response_time_stats"]
    assert len(stats) == 120 and stats[0]["timestamp"] == "2025-12-31T23:02:00Z"
    # volumes start where the request series do: T0 - 15 s (value 0) lies in [T0 - 30 s, T0): 0 req/s,
    # then [T0, T0 + 30 s): 69 requests / 30 s
    volume = body["metrics"]["inference_volume"]
    assert volume[:2] == [
        {"value": 0.0, "timestamp": "2025-12-31T23:59:30Z"},
        {"value": pytest.approx(2.3), "timestamp": "2026-01-01T00:00:00Z"},
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"step_seconds": 0}, "step_seconds: Input should be greater than or equal to 1"),
        ({"time_divisor_seconds": -60}, "time_divisor_seconds: Input should be greater than or equal to 1"),
        ({"step_seconds": "30s"}, "step_seconds: Input should be a valid integer"),
        (
            {"step_seconds": 1, "start_epoch_millis": T0, "end_epoch_millis": T0 + 86_400_000},
            "gives 86400 points",
        ),
        ({"start_epoch_millis": at(120), "end_epoch_millis": T0}, "must be earlier than end_epoch_millis"),
        ({"start_epoch_millis": T0 // 1000}, "looks like seconds"),
        ({"step": 30}, "step: unknown field; remove it"),
    ],
)
def test_bad_values_are_400_saying_what_to_fix(client, body, message):
    resp = post(client, body=body)
    assert resp.status_code == 400
    assert message in resp.json()["error"]


def test_the_body_is_json_whatever_its_content_type(client):
    # the spec's curl example sends the body with --data: application/x-www-form-urlencoded
    form = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/x-www-form-urlencoded"}
    resp = client.post(
        URL,
        content=b'{"step_seconds": 30, "start_epoch_millis": %d, "end_epoch_millis": %d}' % (T0, at(120)),
        headers=form,
    )
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["metrics"]["response_time_stats"]) == 4
    for body, message in (
        (b"null", None),
        (b"", None),
        (b"[]", "must be a JSON object"),
        (b"{x", "not valid JSON"),
    ):
        resp = client.post(URL, content=body, headers=form)
        assert resp.status_code == (200 if message is None else 400), body
        if message:
            assert message in resp.json()["error"]


def test_unknown_trainer_is_404_before_the_body_is_read(client):
    assert post(client, url=URL.replace("t1", "nope"), body={"step_seconds": 0}).status_code == 404


def test_unknown_or_other_organizations_trainer_is_404(client):
    for url in (URL.replace("t1", "nope"), URL.replace("t1", "tx")):
        resp = post(client, url=url, body=WINDOW)
        assert resp.status_code == 404
        assert "GET /v1/loops/deployments" in resp.json()["error"]
    assert post(client, url=URL.replace("t1", "t1"), key=OTHER_ORG).status_code == 404


def test_auth(client):
    assert post(client, key=None).status_code == 401
    assert post(client, key="wrong").status_code == 401
    assert post(client, key=INVOKE).status_code == 403
    assert post(client, key=SCOPED, body=WINDOW).status_code == 200  # scoped to the sampler's model
    assert post(client, key=OTHER_SCOPE, body=WINDOW).status_code == 404
    resp = client.post(URL, json=WINDOW, headers={"Authorization": f"Api-Key {KEY}"})
    assert resp.status_code == 200


def test_list_shows_the_organizations_trainers_with_nodes_and_sampler(client):
    body = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {KEY}"}).json()
    assert [d["id"] for d in body["deployments"]] == ["t1", "t2"]
    t1 = body["deployments"][0]
    assert t1["sampler"] == {
        "model_id": "m1",
        "deployment_id": "sampler-d1",
        "metrics_url": "/v1/models/m1/deployments/sampler-d1/metrics",
    }
    assert t1["metrics_url"] == URL
    assert [(n["node_id"], n["role"], n["gpu_ranks"]) for n in t1["nodes"]] == [
        ("leader-0", "leader", [0, 1]),
        ("worker-1", "worker", [0, 1]),
    ]
    assert t1["nodes"][0]["targets"][0] == {"url": data.REQUEST_URL, "kind": "requests"}
    scoped = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {SCOPED}"}).json()
    assert [d["id"] for d in scoped["deployments"]] == ["t1"]  # t2 has no sampler model in scope
    other = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {OTHER_ORG}"}).json()
    assert [d["id"] for d in other["deployments"]] == ["tx"]


def test_the_sampler_model_links_back_to_its_trainers(client):
    headers = {"Authorization": f"Api-Key {KEY}"}
    body = client.get("/v1/models/m1/loops_deployments", headers=headers).json()
    assert [d["id"] for d in body["deployments"]] == ["t1"]
    assert client.get("/v1/models/m9/loops_deployments", headers=headers).json() == {"deployments": []}
    assert client.get("/v1/loops/deployments/t1", headers=headers).json()["sampler"]["model_id"] == "m1"


def test_openapi_documents_the_per_rank_shape_and_the_body(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/v1/loops/deployments/{deployment_id}/metrics"]["post"]
    assert 'Keyed by GPU rank as a string ("0", "1"' in op["description"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {
        "start_epoch_millis",
        "end_epoch_millis",
        "step_seconds",
        "time_divisor_seconds",
    }
