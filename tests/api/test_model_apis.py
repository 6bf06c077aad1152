"""``GET /v1/model_apis`` and ``GET /v1/model_apis/{name}``: the organization's Model APIs, the limits of
the caller's team, pages, and 404 for another organization's or an unknown name."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Serve
from tests.apptools import auth

DECLARATIONS: dict[str, Any] = {
    "organizations": [
        {
            "name": "acme",
            "teams": [{"id": "team-a"}, {"id": "team-b"}],
            "api_keys": [
                {"key": "admin", "type": "WORKSPACE_MANAGE_ALL"},
                {"key": "a-key", "type": "WORKSPACE_INVOKE", "team": "team-a"},
                {"key": "b-key", "type": "WORKSPACE_EXPORT_METRICS", "team": "team-b"},
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
        {
            "name": "chat",
            "organization": "acme",
            "model": "m1",
            "display_name": "Chat",
            "description": "the shared chat model",
            "context_length": 4096,
            "limits": {"requests_per_minute": 60, "tokens_per_minute": 10000},
            "team_limits": {"team-a": {"requests_per_minute": 5}},
        },
        {"name": "embed", "organization": "acme", "model": "m1", "deployment": "d1"},
        {"name": "zeta", "organization": "acme", "model": "m1"},
        {"name": "secret", "organization": "other", "model": "m9"},
    ],
}


@pytest.fixture
def client(serve: Serve) -> TestClient:
    return serve(DECLARATIONS)


def test_get_answers_the_limits_of_the_callers_team(client: TestClient) -> None:
    team_a = client.get("/v1/model_apis/chat", headers=auth("a-key"))
    assert team_a.status_code == 200, team_a.text
    body = team_a.json()
    assert body["rate_limits"] == [{"type": "REQUEST", "unit": "MINUTE", "threshold": 5}]
    assert (body["name"], body["display_name"], body["description"]) == (
        "chat",
        "Chat",
        "the shared chat model",
    )
    assert (body["context_length"], body["model_family"], body["invoke_url"]) == (
        4096,
        None,
        "http://testserver",
    )
    assert body["org_details"]["last_used_at"] is None
    assert body["release_date"] == body["org_details"]["added_at"][:10]
    admin = client.get("/v1/model_apis/chat", headers=auth("admin")).json()
    assert admin["rate_limits"] == [
        {"type": "REQUEST", "unit": "MINUTE", "threshold": 60},
        {"type": "TOKEN", "unit": "MINUTE", "threshold": 10000},
    ]
    assert client.get("/v1/model_apis/embed", headers=auth("b-key")).json()["rate_limits"] == []


@pytest.mark.parametrize("name", ["secret", "nope"])
def test_another_organizations_or_an_unknown_name_is_a_404(client: TestClient, name: str) -> None:
    resp = client.get(f"/v1/model_apis/{name}", headers=auth("admin"))
    assert resp.status_code == 404
    assert resp.json() == {
        "error": f"no Model API {name!r}; list your organization's with GET /v1/model_apis"
    }
    assert client.get("/v1/model_apis/secret", headers=auth("other")).status_code == 200


def test_list_pages_by_name_with_a_cursor(client: TestClient) -> None:
    first = client.get("/v1/model_apis?limit=2", headers=auth("admin")).json()
    assert [a["name"] for a in first["items"]] == ["chat", "embed"]
    assert first["pagination"]["has_more"] is True
    cursor = first["pagination"]["cursor"]
    rest = client.get("/v1/model_apis", params={"limit": 2, "cursor": cursor}, headers=auth("admin")).json()
    assert [a["name"] for a in rest["items"]] == ["zeta"]
    assert rest["pagination"] == {"has_more": False, "cursor": None}
    other = client.get("/v1/model_apis", headers=auth("other")).json()
    assert [a["name"] for a in other["items"]] == ["secret"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("cursor=%25%25", "cursor is not one this service gave"),
        ("page=2", "page"),
    ],
)
def test_bad_list_parameters_are_400s(client: TestClient, query: str, message: str) -> None:
    resp = client.get(f"/v1/model_apis?{query}", headers=auth("admin"))
    assert resp.status_code == 400
    assert message in resp.json()["error"]


def test_a_key_is_needed(client: TestClient) -> None:
    assert client.get("/v1/model_apis").status_code == 401
    assert client.get("/v1/model_apis/chat", headers=auth("wrong")).status_code == 401
