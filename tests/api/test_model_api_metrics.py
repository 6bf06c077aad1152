"""``GET /v1/model_apis/{name}/metrics``: the model metrics response of a Model API's series, one label
set per team, team scoping, the default metrics, and the errors (values computed by hand from the
counters stored below)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.apptools import auth
from tests.conftest import schema_validator

T0 = 1_800_000_000_000
END = T0 + 120_000
DECLARATIONS: dict[str, Any] = {
    "organizations": [
        {
            "name": "acme",
            "teams": [{"id": "team-a"}, {"id": "team-b"}],
            "api_keys": [
                {"key": "admin", "type": "WORKSPACE_MANAGE_ALL"},
                {"key": "b-metrics", "type": "WORKSPACE_EXPORT_METRICS", "team": "team-b"},
                {"key": "a-invoke", "type": "WORKSPACE_INVOKE", "team": "team-a"},
                {"key": "export", "type": "WORKSPACE_EXPORT_METRICS"},
            ],
        },
        {"name": "other", "api_keys": [{"key": "other", "type": "WORKSPACE_MANAGE_ALL"}]},
    ],
    "models": [
        {
            "id": "m1",
            "organization": "acme",
            "deployments": [{"id": "d1"}],
            "environments": [
                {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
            ],
        },
        {
            "id": "m9",
            "organization": "other",
            "deployments": [{"id": "x1"}],
            "environments": [{"name": "production"}],
        },
    ],
    "model_apis": [
        {"name": "chat", "organization": "acme", "model": "m1"},
        {"name": "embed", "organization": "acme", "model": "m1"},
        {"name": "theirs", "organization": "other", "model": "m9"},
    ],
}
P = "baseten_model_api_"


def _counter(name: str, labels: dict[str, str], end_value: float) -> list[Sample]:
    """A counter at 0 at T0 and ``end_value`` 60 s later, of d1 of m1."""
    full = labels_of({"model_id": "m1", "deployment_id": "d1", **labels})
    return [Sample(name, full, 0.0, T0), Sample(name, full, end_value, T0 + 60_000)]


def _store() -> MemoryStore:
    rows: list[Sample] = []
    chat = {"model_api": "chat"}
    for team, n in (("team-a", 10), ("team-b", 4), ("", 1)):
        rows += _counter(P + "incoming_inference_requests_total", {**chat, "team_id": team}, n)
    rows += _counter(
        P + "incoming_inference_requests_total", {"model_api": "embed", "team_id": "team-a"}, 100
    )
    for team, status, n in (("team-a", "200", 8), ("team-a", "429", 2), ("team-b", "200", 4)):
        rows += _counter(P + "inference_requests_total", {**chat, "team_id": team, "status_code": status}, n)
    for team, kind, n in (
        ("team-a", "input_uncached", 30),
        ("team-a", "output", 50),
        ("team-b", "output", 7),
    ):
        rows += _counter(P + "tokens_total", {**chat, "team_id": team, "token_type": kind}, n)
    rows += [
        Sample("up", labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1"}), 1.0, t)
        for t in (T0, T0 + 60_000)
    ]
    store = MemoryStore()
    store.append(SampleBatch.from_samples(rows))
    return store


@pytest.fixture
def client(serve: Serve) -> TestClient:
    return serve(DECLARATIONS, store=_store(), clock=lambda: END)


def _get(client: TestClient, key: str, name: str = "chat", **params: Any) -> Any:
    query = {"mode": "SUMMARY", "start_epoch_millis": T0, "end_epoch_millis": END, **params}
    return client.get(f"/v1/model_apis/{name}/metrics", params=query, headers=auth(key))


def _values(body: dict[str, Any]) -> dict[str, list[tuple[dict[str, str], float | None]]]:
    [row] = body["metric_values"]
    return {
        d["name"]: list(zip(d["label_sets"], row["values"][i], strict=True))
        for i, d in enumerate(body["metric_descriptors"])
    }


def test_the_default_metrics_per_team_validate_against_the_model_metrics_schema(client: TestClient) -> None:
    resp = _get(client, "admin")
    assert resp.status_code == 200, resp.text
    schema_validator("GetModelMetricsResponseV1").validate(resp.json())
    got = _values(resp.json())
    assert list(got) == [
        P + "inference_requests_total",
        P + "incoming_inference_requests_total",
        P + "tokens_total",
    ]
    assert got[P + "inference_requests_total"] == [
        ({"team_id": "team-a", "status": "2xx"}, 8.0),
        ({"team_id": "team-a", "status": "4xx"}, 2.0),
        ({"team_id": "team-a", "status": "5xx"}, 0.0),
        ({"team_id": "team-b", "status": "2xx"}, 4.0),
        ({"team_id": "team-b", "status": "4xx"}, 0.0),
        ({"team_id": "team-b", "status": "5xx"}, 0.0),
    ]
    assert got[P + "incoming_inference_requests_total"] == [  # embed's 100 are not chat's
        ({"team_id": ""}, 1.0),
        ({"team_id": "team-a"}, 10.0),
        ({"team_id": "team-b"}, 4.0),
    ]
    assert got[P + "tokens_total"] == [
        ({"team_id": "team-a", "token_type": "input_cached"}, 0.0),
        ({"team_id": "team-a", "token_type": "input_uncached"}, 30.0),
        ({"team_id": "team-a", "token_type": "output"}, 50.0),
        ({"team_id": "team-b", "token_type": "input_cached"}, 0.0),
        ({"team_id": "team-b", "token_type": "input_uncached"}, 0.0),
        ({"team_id": "team-b", "token_type": "output"}, 7.0),
    ]


def test_a_team_key_sees_only_its_team_and_an_admin_may_filter(client: TestClient) -> None:
    mine = _values(_get(client, "b-metrics").json())
    assert mine[P + "incoming_inference_requests_total"] == [({"team_id": "team-b"}, 4.0)]
    assert {ls["team_id"] for ls, _ in mine[P + "tokens_total"]} == {"team-b"}
    assert _get(client, "b-metrics", **{"team_ids[]": "team-b"}).status_code == 200
    denied = _get(client, "b-metrics", **{"team_ids[]": "team-a"})
    assert denied.status_code == 403 and "reads only its team's series" in denied.json()["error"]
    picked = _values(_get(client, "admin", **{"team_ids[]": ["team-a", "team-b"]}).json())
    assert [v for _, v in picked[P + "incoming_inference_requests_total"]] == [10.0, 4.0]
    export = _values(_get(client, "export", team_ids="team-a").json())  # no team: the organization's view
    assert export[P + "incoming_inference_requests_total"] == [({"team_id": "team-a"}, 10.0)]


def test_series_mode_and_the_rate_limited_metric_without_data_is_omitted(client: TestClient) -> None:
    resp = _get(
        client,
        "admin",
        mode="SERIES",
        start_epoch_millis=T0,
        end_epoch_millis=T0 + 3_600_000,
        metrics=[P + "incoming_inference_requests_total", P + "rate_limited_requests_total"],
    )
    body = resp.json()
    assert body["step_seconds"] == 30 and len(body["metric_values"]) == 120
    assert [d["name"] for d in body["metric_descriptors"]] == [P + "incoming_inference_requests_total"]
    first_minute = [row["values"][0] for row in body["metric_values"][:2]]
    assert first_minute == [[0.5, 5.0, 2.0], [0.5, 5.0, 2.0]]  # 60 s of increase spread over two steps


@pytest.mark.parametrize(
    ("key", "name", "params", "status", "message"),
    [
        ("other", "chat", {}, 404, "no Model API 'chat'; list your organization's with GET /v1/model_apis"),
        ("admin", "theirs", {}, 404, "no Model API 'theirs'"),
        ("a-invoke", "chat", {}, 403, "cannot read Model API metrics"),
        (
            "admin",
            "chat",
            {"team_ids": "team-z"},
            400,
            "no team 'team-z' in your organization; use some of: team-a, team-b",
        ),
        ("admin", "chat", {"metrics": "baseten_replicas_active"}, 400, "not Model API metrics"),
        ("admin", "chat", {"metrics": "nope"}, 400, "unknown metric name(s): nope"),
        ("admin", "chat", {"group_by": "replica"}, 400, "group_by"),
    ],
)
def test_errors_say_what_to_fix(
    client: TestClient, key: str, name: str, params: dict[str, str], status: int, message: str
) -> None:
    resp = _get(client, key, name, **params)
    assert resp.status_code == status, resp.text
    assert message in resp.json()["error"]


def test_current_mode_takes_no_window(client: TestClient) -> None:
    resp = client.get("/v1/model_apis/chat/metrics?mode=CURRENT&start_epoch_millis=1", headers=auth("admin"))
    assert resp.status_code == 400


def test_a_team_key_reads_no_other_teams_series_through_the_model_routes_or_the_exports(
    client: TestClient,
) -> None:
    """The model routes answer every team's Model API series and the team split, so a team's key gets a
    403 naming the Model API route there; the export sums them over every team, so a team's key gets
    none (the review of issue 17 found both open)."""
    window = {"mode": "SUMMARY", "start_epoch_millis": T0, "end_epoch_millis": END}
    for path in ("environments/production", "deployments/d1"):
        url = f"/v1/models/m1/{path}/metrics"
        for more in ({"metrics": P + "tokens_total"}, {"group_by": "team", "metrics": P + "tokens_total"}):
            resp = client.get(url, params={**window, **more}, headers=auth("b-metrics"))
            assert resp.status_code == 403, resp.text
            assert "GET /v1/model_apis/{name}/metrics" in resp.json()["error"]
        resp = client.get(
            url, params={**window, "group_by": "team", "metrics": P + "tokens_total"}, headers=auth("admin")
        )
        assert resp.status_code == 200, resp.text
    export = client.get("/metrics", headers=auth("b-metrics"))
    assert export.status_code == 200, export.text
    everyone = client.get("/metrics", headers=auth("export")).text  # a key without a team: all of them
    assert "# TYPE baseten_model_api_tokens_total counter" in everyone
    assert "baseten_model_api_" not in export.text  # summed over every team there: left out
