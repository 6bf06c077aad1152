"""``GET /v1/model_apis/usage``: token usage in buckets from the stored counters (hand-computed), groups,
filters, team scoping, limits and the cursor."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.memory import MemoryStore
from servemetrics.timeutil import iso_ms
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.api.test_model_api_metrics import DECLARATIONS
from tests.apptools import auth

T0 = 20834 * 86_400_000  # a UTC midnight
M = 60_000
P = "baseten_model_api_"


def _counter(name: str, labels: dict[str, str], values: tuple[float, float, float]) -> list[Sample]:
    full = labels_of({"model_id": "m1", "deployment_id": "d1", **labels})
    return [Sample(name, full, v, T0 + i * M) for i, v in enumerate(values)]


def _store() -> MemoryStore:
    a = {"model_api": "chat", "api_key": "kA", "team_id": "team-a"}
    b = {"model_api": "chat", "api_key": "kB", "team_id": "team-b"}
    rows = [
        *_counter(P + "tokens_total", {**a, "token_type": "output"}, (0, 10, 30)),
        *_counter(P + "tokens_total", {**a, "token_type": "input_uncached"}, (0, 5, 5)),
        *_counter(P + "tokens_total", {**b, "token_type": "output"}, (0, 0, 7)),
        *_counter(P + "tokens_total", {**b, "token_type": "input_cached"}, (0, 0, 3)),
        *_counter(P + "inference_requests_total", {**a, "status_code": "200"}, (0, 2, 3)),
        *_counter(P + "inference_requests_total", {**b, "status_code": "200"}, (0, 0, 1)),
        *_counter(P + "tokens_total", {**a, "model_api": "embed", "token_type": "output"}, (0, 100, 100)),
    ]
    store = MemoryStore()
    store.append(SampleBatch.from_samples(rows))
    return store


@pytest.fixture
def client(serve: Serve) -> TestClient:
    return serve(DECLARATIONS, store=_store(), clock=lambda: T0 + 3 * M)


def _usage(client: TestClient, key: str = "admin", **params: Any) -> Any:
    query = {"start_time": iso_ms(T0), "bucket_width": "1m", **params}
    return client.get("/v1/model_apis/usage", params=query, headers=auth(key))


def _row(
    model: str | None = None, key: str | None = None, team: str | None = None, **v: int
) -> dict[str, Any]:
    cached, uncached = v.get("cached", 0), v.get("uncached", 0)
    return {
        "api_key_prefix": key,
        "user_id": None,
        "model": model,
        "team_id": team,
        "input_tokens": cached + uncached,
        "cached_input_tokens": cached,
        "uncached_input_tokens": uncached,
        "output_tokens": v.get("output", 0),
        "request_count": v.get("requests", 0),
    }


def test_buckets_by_model_most_tokens_first(client: TestClient) -> None:
    body = _usage(client).json()  # end: now = T0 + 3 min
    assert [(b["start_time"], b["end_time"]) for b in body["items"]] == [
        (iso_ms(T0 + i * M), iso_ms(T0 + (i + 1) * M)) for i in range(3)
    ]
    assert [b["results"] for b in body["items"]] == [
        [_row("embed", output=100), _row("chat", uncached=5, output=10, requests=2)],
        [_row("chat", cached=3, output=27, requests=2)],
        [],
    ]
    assert body["pagination"] == {"has_more": False, "cursor": None}


def test_group_by_api_key_and_team_with_filters(client: TestClient) -> None:
    body = _usage(client, group_by=["api_key", "team"], models="chat").json()
    assert body["items"][1]["results"] == [
        _row(key="kA", team="team-a", output=20, requests=1),
        _row(key="kB", team="team-b", cached=3, output=7, requests=1),
    ]
    only_b = _usage(client, **{"group_by": "api_key", "api_keys[]": "kB"}).json()
    assert [b["results"] for b in only_b["items"]] == [
        [],
        [_row(key="kB", cached=3, output=7, requests=1)],
        [],
    ]


def test_a_team_key_reads_only_its_teams_usage(client: TestClient) -> None:
    body = _usage(client, "b-metrics", group_by="team").json()
    assert [b["results"] for b in body["items"]] == [
        [],
        [_row(team="team-b", cached=3, output=7, requests=1)],
        [],
    ]
    assert _usage(client, "b-metrics", team_ids="team-a").status_code == 403


def test_pages_follow_the_cursor(client: TestClient) -> None:
    first = _usage(client, limit=2).json()
    assert len(first["items"]) == 2 and first["pagination"]["has_more"] is True
    rest = client.get(
        "/v1/model_apis/usage",
        params={"bucket_width": "1m", "cursor": first["pagination"]["cursor"]},
        headers=auth("admin"),
    ).json()
    assert [b["start_time"] for b in rest["items"]] == [iso_ms(T0 + 2 * M)]
    assert rest["pagination"]["has_more"] is False


def test_a_start_inside_a_bucket_is_snapped_down_and_days_default_to_7(client: TestClient) -> None:
    body = _usage(
        client, start_time=iso_ms(T0 + 30_000), bucket_width="1d", end_time=iso_ms(T0 + 8 * 86_400_000)
    ).json()
    assert body["items"][0]["start_time"] == iso_ms(T0) and len(body["items"]) == 7
    assert body["pagination"]["has_more"] is True


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"bucket_width": "5m"}, "bucket_width: '5m'; use one of 1m, 1h, 1d"),
        ({"bucket_width": "1d", "limit": "32"}, "with bucket_width=1d give 1 to 31 buckets (default 7)"),
        ({"limit": "1441"}, "give 1 to 1440 buckets (default 60)"),
        ({"start_time": "yesterday"}, "start_time: 'yesterday' is not an ISO 8601 time"),
        ({"group_by": "user"}, "group_by: user: use some of api_key, model, team"),
        (
            {"start_time": "0001-01-01T00:00:00+00:00"},
            "start_time: '0001-01-01T00:00:00+00:00' is outside 1970-01-01",
        ),
        ({"models": "nope"}, "models: no Model API 'nope'; use some of: chat, embed"),
        ({"cursor": "%%"}, "cursor is not one this service gave"),
        ({"end_time": iso_ms(T0 - M)}, f"start_time {iso_ms(T0)} is after end_time {iso_ms(T0 - M)};"),
        ({"start_time": iso_ms(T0 + 9 * M)}, f"is after end_time {iso_ms(T0 + 3 * M)} (now); give a"),
        ({"page": "2"}, "page"),
    ],
)
def test_bad_parameters_say_what_to_fix(client: TestClient, params: dict[str, str], message: str) -> None:
    resp = _usage(client, **params)
    assert resp.status_code == 400
    assert message in resp.json()["error"]


def test_start_time_is_needed_and_keys_that_cannot_read_metrics_are_refused(client: TestClient) -> None:
    resp = client.get("/v1/model_apis/usage", headers=auth("admin"))
    assert resp.status_code == 400 and "start_time is required" in resp.json()["error"]
    assert _usage(client, "a-invoke").status_code == 403
    assert [b["results"] for b in _usage(client, "other").json()["items"]] == [[], [], []]


def test_a_scoped_keys_unknown_name_lists_only_the_model_apis_it_may_read(serve: Serve) -> None:
    """A key scoped to m1 asking for m2's Model API gets the 400 of an unknown name, naming only m1's
    Model APIs (before, the 400 listed every Model API of the organization, m2's "secret" too)."""
    declarations = copy.deepcopy(DECLARATIONS)
    acme = declarations["organizations"][0]
    acme["api_keys"].append({"key": "m1-metrics", "type": "WORKSPACE_EXPORT_METRICS", "model_ids": ["m1"]})
    declarations["models"].append(
        {
            "id": "m2",
            "organization": "acme",
            "deployments": [{"id": "d2"}],
            "environments": [{"name": "production"}],
        }
    )
    declarations["model_apis"].append({"name": "secret", "organization": "acme", "model": "m2"})
    client = serve(declarations, store=_store(), clock=lambda: T0 + 3 * M)
    resp = _usage(client, "m1-metrics", models="secret")
    assert resp.status_code == 400
    assert resp.json()["error"] == "models: no Model API 'secret'; use some of: chat, embed"
    admin = _usage(client, "admin", models="nope")
    assert "use some of: chat, embed, secret" in admin.json()["error"]
