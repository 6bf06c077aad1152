"""The metrics endpoints over HTTP (in-process): auth, errors, scopes, promotions, spec validation."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.store.memory import MemoryStore
from tests.api.conftest import Serve
from tests.apptools import org
from tests.query.helpers import T0, at, series, store_with

KEY, OTHER_KEY, INVOKE_KEY = "sm-test-key-1", "sm-other-org-key", "sm-invoke-key"
REQ = "baseten_inference_requests_total"
GAUGE = "baseten_replicas_active"


def declarations():
    return {
        "organizations": [
            org("acme", {KEY: "WORKSPACE_EXPORT_METRICS", INVOKE_KEY: "WORKSPACE_INVOKE"}),
            org("other", {OTHER_KEY: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {
                "id": "m1",
                "name": "llama",
                "organization": "acme",
                "deployments": [{"id": "d1", "name": "v1"}, {"id": "d2", "name": "v2"}],
                "environments": [
                    {
                        "name": "production",
                        "promotions": [
                            {"deployment": "d1", "at": "2025-12-31T00:00:00Z"},
                            {"deployment": "d2", "at": "2026-01-01T00:00:45Z"},
                        ],
                    }
                ],
            },
            {"id": "m2", "name": "other-model", "organization": "other", "deployments": [{"id": "x1"}]},
        ],
    }


def _data() -> MemoryStore:
    return store_with(
        series(GAUGE, [(s, 2) for s in range(0, 120, 10)], deployment_id="d1"),
        series(GAUGE, [(s, 5) for s in range(0, 120, 10)], deployment_id="d2"),
        series(REQ, [(0, 0), (30, 10), (60, 20), (90, 30)], deployment_id="d1", status_code="200"),
        series(REQ, [(0, 0), (30, 1), (60, 4), (90, 4)], deployment_id="d2", status_code="500"),
    )


@pytest.fixture
def client(serve: Serve) -> TestClient:
    return serve(declarations(), clock=lambda: at(120), store=_data())


def get(client, path, key=KEY, scheme="Api-Key", **params):
    headers = {"Authorization": f"{scheme} {key}"} if key else {}
    return client.get(path, params=params, headers=headers)


ENV = "/v1/models/m1/environments/production/metrics"


def test_series_split_at_promotion_validates_against_spec(client, metrics_response_validator):
    resp = get(
        client, ENV, mode="SERIES", start_epoch_millis=T0, end_epoch_millis=at(120), metrics=[GAUGE, REQ]
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    metrics_response_validator.validate(body)
    assert body["step_seconds"] == 30
    assert [v["start_epoch_millis"] - T0 for v in body["metric_values"]] == [
        0,
        30_000,
        45_000,
        60_000,
        90_000,
    ]
    gauges = [v["values"][0] for v in body["metric_values"]]
    assert gauges == [[2.0], [2.0], [5.0], [5.0], [5.0]]
    reqs = [v["values"][1] for v in body["metric_values"]]
    # each delta spread over its pair (rule 5). d1 serves [0, 45): (0, 30] +10 whole, then 15 s of the 30 s
    # of (30, 60] +10 = 5; d2 from 45 s: 15 s of its (30, 60] +3 = 1.5, (60, 90] +0; [90, 120): no pair
    # after the last samples at 90 s (nothing extrapolated) and no up series: null
    assert reqs == [[10.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 0.0, 1.5], [0.0, 0.0, 0.0], [None, None, None]]


def test_bearer_and_api_key_both_work(client, metrics_response_validator):
    a = get(client, ENV, scheme="Bearer", mode="SUMMARY", start_epoch_millis=T0, end_epoch_millis=at(120))
    b = get(client, ENV, scheme="Api-Key", mode="SUMMARY", start_epoch_millis=T0, end_epoch_millis=at(120))
    assert a.status_code == b.status_code == 200
    metrics_response_validator.validate(a.json())
    assert a.json() == b.json()
    # d1 (2 replicas) served [0, 45 s), d2 (5) from 45 s: SUMMARY counts both, each at its mean
    assert a.json()["metric_values"][0]["values"][0] == [7.0]


def test_deployment_scope_reads_one_deployment(client, metrics_response_validator):
    resp = get(
        client,
        "/v1/models/m1/deployments/d2/metrics",
        mode="SUMMARY",
        start_epoch_millis=T0,
        end_epoch_millis=at(120),
        metrics=REQ,
    )
    body = resp.json()
    metrics_response_validator.validate(body)
    assert body["metric_values"][0]["values"] == [[0.0, 0.0, 4.0]]


def test_current_mode(client, metrics_response_validator):
    body = get(client, ENV, mode="CURRENT").json()
    metrics_response_validator.validate(body)
    assert body["start_epoch_millis"] == at(120) - 300_000 and body["step_seconds"] is None
    assert body["metric_values"][0]["values"][0] == [5.0]  # only d2 serves now


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"mode": "CURRENT", "start_epoch_millis": T0}, "CURRENT takes no start_epoch_millis"),
        ({"mode": "SERIES", "start_epoch_millis": T0, "end_epoch_millis": T0 + 8 * 86_400_000}, "7 days"),
        ({"mode": "SERIES", "start_epoch_millis": at(60), "end_epoch_millis": at(0)}, "must be earlier"),
        ({"mode": "SUMMARY", "metrics": ["baseten_nope", REQ, "also_bad"]}, "baseten_nope, also_bad"),
        ({"mode": "WEEKLY"}, "mode"),
        ({"mode": "SERIES", "start_epoch_millis": "yesterday"}, "start_epoch_millis"),
    ],
)
def test_bad_input_is_400_saying_what_to_fix(client, params, needle):
    resp = get(client, ENV, **params)
    assert resp.status_code == 400
    assert needle in resp.json()["error"]


def test_missing_and_bad_keys_are_401(client):
    assert get(client, ENV, key=None).status_code == 401
    assert "Authorization" in get(client, ENV, key=None).json()["error"]
    assert get(client, ENV, key="not-a-key").status_code == 401


def test_other_organizations_model_is_404(client):
    resp = get(client, "/v1/models/m2/environments/production/metrics")
    assert resp.status_code == 404 and "m2" in resp.json()["error"]
    assert get(client, ENV, key=OTHER_KEY).status_code == 404


def test_unknown_environment_and_deployment_are_404(client):
    assert get(client, "/v1/models/m1/environments/staging/metrics").status_code == 404
    assert get(client, "/v1/models/m1/deployments/d9/metrics").status_code == 404


def test_invoke_key_cannot_read_metrics(client):
    assert get(client, ENV, key=INVOKE_KEY).status_code == 403


def test_own_metrics_count_queries(client):
    get(client, ENV, mode="SUMMARY")
    text = client.get("/service/metrics").text
    assert 'servemetrics_query_duration_seconds_count{mode="SUMMARY"} 1.0' in text


def test_lower_case_mode_is_accepted(client, metrics_response_validator):
    lower = get(client, ENV, mode="summary", start_epoch_millis=T0, end_epoch_millis=at(120))
    upper = get(client, ENV, mode="SUMMARY", start_epoch_millis=T0, end_epoch_millis=at(120))
    assert lower.status_code == 200 and lower.json() == upper.json()
    metrics_response_validator.validate(lower.json())
    assert lower.json()["mode"] == "SUMMARY"


def test_epoch_seconds_are_rejected_with_a_hint(client):
    resp = get(client, ENV, mode="SUMMARY", start_epoch_millis=1_767_225_600, end_epoch_millis=at(120))
    assert resp.status_code == 400
    assert "looks like seconds" in resp.json()["error"] and "1767225600000" in resp.json()["error"]


def test_unknown_query_parameter_is_400_naming_it(client):
    resp = get(client, ENV, mode="SUMMARY", start_ms=T0)
    assert resp.status_code == 400
    assert "start_ms" in resp.json()["error"] and "start_epoch_millis" in resp.json()["error"]


def test_unknown_metric_error_is_bounded(client):
    names = ["x" * 5000] + [f"bad_{i}" for i in range(30)]
    resp = get(client, ENV, mode="SUMMARY", metrics=names)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert "and 21 more" in error and len(error) < 2000
