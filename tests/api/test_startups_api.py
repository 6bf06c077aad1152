"""The startup routes (``api/routes/startups.py``): filters, sort, paging and the summary over attempts
written to the registry at hand-picked times, with every expectation computed by hand; auth and errors.

The attempts (``T`` + seconds; now = ``NOW``, stall timeout 15 min):

====  ===========  =======  =================================  ===========  ===========
name  deployment   replica  marks                              outcome      duration ms
====  ===========  =======  =================================  ===========  ===========
A     d1 (v-one)   r1       registered 100, healthy 103        SUCCESS      3,000
B     d1           r2       registered 200, healthy 210        SUCCESS      10,000
C     d1           r3       registered 300, FAILED 301         FAILED       1,000
D     d1           r4       registered 400, never healthy      STALLED      905,000 (NOW - 400)
E     d1           p1       pod created 500, scheduled 502,    SUCCESS      30,000
                            containers 520, ready 530
F     d1           r5       registered 1,300 (5 s before NOW)  (starting)   not listed
G     d2 (v-two)   r1       registered 600, healthy 601        SUCCESS      1,000
====  ===========  =======  =================================  ===========  ===========
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.registry import Registry
from tests.api.conftest import Serve
from tests.apptools import auth, org

T = 1_780_000_000_000
NOW = T + 1_305_000
KEY, OTHER = "startups-key", "other-key"
D1 = "/v1/models/m1/deployments/d1/startups"
ENV = "/v1/models/m1/environments/production/startups"
WINDOW = {"start_epoch_millis": T, "end_epoch_millis": T + 2_000_000}


def _seed(registry: Registry) -> None:
    deps = registry.deployments
    for replica, registered, healthy in (("r1", 100, 103), ("r2", 200, 210)):
        deps.register_replica("m1", "d1", replica, [], at_ms=T + registered * 1000)
        registry.startups.healthy("d1", replica, at_ms=T + healthy * 1000)
    deps.register_replica("m1", "d1", "r3", [], at_ms=T + 300_000)
    deps.set_replica_status("m1", "d1", "r3", "FAILED", "crashed", at_ms=T + 301_000)
    deps.register_replica("m1", "d1", "r4", [], at_ms=T + 400_000)
    marks = {"created": 500, "scheduled": 502, "containers_started": 520, "ready": 530}
    registry.startups.record_pod("d1", "p1", "uid-p1", {k: T + v * 1000 for k, v in marks.items()}, None)
    deps.register_replica("m1", "d1", "r5", [], at_ms=NOW - 5_000)
    deps.register_replica("m1", "d2", "r1", [], at_ms=T + 600_000)
    registry.startups.healthy("d2", "r1", at_ms=T + 601_000)


@pytest.fixture
def client(serve: Serve) -> TestClient:
    model = {
        "id": "m1",
        "name": "llama",
        "organization": "acme",
        "deployments": [{"id": "d1", "name": "v-one"}, {"id": "d2", "name": "v-two"}],
        "environments": [
            {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
        ],
    }
    organizations = [
        org("acme", {KEY: "WORKSPACE_EXPORT_METRICS"}),
        org("other", {OTHER: "WORKSPACE_MANAGE_ALL"}),
    ]
    c = serve({"organizations": organizations, "models": [model]}, clock=lambda: NOW, gateway=False)
    _seed(c.app.state.service.registry)  # type: ignore[attr-defined]
    return c


def _get(client: TestClient, path: str, **params: Any) -> Any:
    resp = client.get(path, params={**WINDOW, **params}, headers=auth(KEY))
    assert resp.status_code == 200, resp.text
    return resp.json()


def _replicas(body: dict[str, Any]) -> list[str]:
    return [i["replica_id"] for i in body["items"]]


def test_default_listing_newest_first_with_shapes(client: TestClient) -> None:
    body = _get(client, D1)
    assert _replicas(body) == ["p1", "r4", "r3", "r2", "r1"]  # r5 is still starting
    assert (body["total_count"], body["pagination"]) == (5, {"has_more": False, "cursor": None})
    pod, stalled, failed = body["items"][:3]
    assert pod == {
        "model_id": "m1",
        "deployment_id": "d1",
        "deployment_name": "v-one",
        "environment_name": None,
        "replica_id": "p1",
        "started_at_epoch_millis": T + 500_000,
        "ready_at_epoch_millis": T + 530_000,
        "duration_ms": 30_000,
        "outcome": "SUCCESS",
        "phase_summary": [
            {"phase": "SCHEDULING", "status": "COMPLETED", "offset_ms": 0, "duration_ms": 2_000},
            {"phase": "CONTAINER_CREATE", "status": "COMPLETED", "offset_ms": 2_000, "duration_ms": 18_000},
            {"phase": "READINESS", "status": "COMPLETED", "offset_ms": 20_000, "duration_ms": 10_000},
        ],
    }
    assert (stalled["outcome"], stalled["duration_ms"], stalled["ready_at_epoch_millis"]) == (
        "STALLED",
        905_000,
        None,
    )
    assert stalled["phase_summary"] == [
        {"phase": "READINESS", "status": "FAILED", "offset_ms": 0, "duration_ms": None}
    ]
    assert (failed["outcome"], failed["duration_ms"]) == ("FAILED", 1_000)


def test_pages_follow_the_cursor_to_the_end(client: TestClient) -> None:
    first = _get(client, D1, limit=2)
    second = _get(client, D1, limit=2, cursor=first["pagination"]["cursor"])
    third = _get(client, D1, limit=2, cursor=second["pagination"]["cursor"])
    assert [_replicas(p) for p in (first, second, third)] == [["p1", "r4"], ["r3", "r2"], ["r1"]]
    assert [p["pagination"]["has_more"] for p in (first, second, third)] == [True, True, False]
    assert third["pagination"]["cursor"] is None and third["total_count"] == 5
    by_duration = _get(client, D1, limit=3, sort_by="DURATION", direction="asc")
    rest = _get(
        client, D1, limit=3, sort_by="DURATION", direction="asc", cursor=by_duration["pagination"]["cursor"]
    )
    assert (_replicas(by_duration), _replicas(rest)) == (["r3", "r1", "r2"], ["p1", "r4"])


@pytest.mark.parametrize(
    ("params", "replicas"),
    [
        ({"outcomes": ["SUCCESS", "FAILED"]}, ["p1", "r3", "r2", "r1"]),
        ({"outcomes": "STALLED"}, ["r4"]),
        ({"phase": "SCHEDULING"}, ["p1"]),
        ({"phase": "READINESS"}, ["p1", "r4", "r3", "r2", "r1"]),  # ended in it counts (r3, r4)
        ({"min_duration_ms": 10_000}, ["p1", "r4", "r2"]),
        ({"search": "r3"}, ["r3"]),
        ({"search": "ONE"}, ["p1", "r4", "r3", "r2", "r1"]),  # deployment name v-one, any case
        ({"search": "r"}, []),  # no replica is exactly "r"; "v-one" has no "r"
        ({"sort_by": "READY_AT"}, ["p1", "r2", "r1", "r4", "r3"]),  # never ready: last
        ({"sort_by": "READY_AT", "direction": "asc"}, ["r1", "r2", "p1", "r3", "r4"]),
        ({"sort_by": "OUTCOME", "direction": "asc"}, ["r3", "r4", "r1", "r2", "p1"]),
        ({"sort_by": "DURATION"}, ["r4", "p1", "r2", "r1", "r3"]),
    ],
)
def test_filters_and_sorts(client: TestClient, params: dict[str, Any], replicas: list[str]) -> None:
    body = _get(client, D1, **params)
    assert (_replicas(body), body["total_count"]) == (replicas, len(replicas))


def test_summary_of_the_deployment(client: TestClient) -> None:
    body = _get(client, D1 + "/summary")
    # successes: 3,000 (r1), 10,000 (r2), 30,000 (p1): mean 14,333.3; p50 = 2nd of 3, p90..p99 = 3rd
    total = {"sample_count": 3, "mean_ms": 14_333, "p50_ms": 10_000, "p90_ms": 30_000, "p95_ms": 30_000}
    assert body["total_duration_ms"] == {**total, "p99_ms": 30_000}
    assert (body["start_epoch_millis"], body["end_epoch_millis"]) == (T, T + 2_000_000)
    phases = {p["phase"]: p["duration_ms"] for p in body["phase_duration_ms"]}
    assert list(phases) == ["SCHEDULING", "CONTAINER_CREATE", "READINESS"]
    assert phases["SCHEDULING"] == {"sample_count": 1, "mean_ms": 2_000, **dict.fromkeys(PCTS, 2_000)}
    # completed READINESS: 3,000, 10,000, 10,000 (r3 and r4 never finished it): mean 7,666.7
    readiness = {"sample_count": 3, "mean_ms": 7_667, "p50_ms": 10_000, "p90_ms": 10_000}
    assert phases["READINESS"] == {**readiness, "p95_ms": 10_000, "p99_ms": 10_000}


PCTS = ("p50_ms", "p90_ms", "p95_ms", "p99_ms")


def test_summary_min_duration_and_an_empty_window(client: TestClient) -> None:
    body = _get(client, D1 + "/summary", min_duration_ms=5_000)  # r2, r4 (stalled), p1
    assert body["total_duration_ms"] == {
        "sample_count": 2,
        "mean_ms": 20_000,
        "p50_ms": 10_000,
        **dict.fromkeys(PCTS[1:], 30_000),
    }
    readiness = next(p["duration_ms"] for p in body["phase_duration_ms"] if p["phase"] == "READINESS")
    assert readiness == {"sample_count": 2, "mean_ms": 10_000, **dict.fromkeys(PCTS, 10_000)}
    empty = _get(client, D1 + "/summary", start_epoch_millis=T + 1_400_000)
    assert empty["total_duration_ms"] == {"sample_count": 0, "mean_ms": None, **dict.fromkeys(PCTS, None)}
    assert empty["phase_duration_ms"] == []


def test_environment_form_holds_the_deployments_that_served_it(client: TestClient) -> None:
    body = _get(client, ENV)
    assert _replicas(body) == ["p1", "r4", "r3", "r2", "r1"]  # d2 never served production
    assert {i["environment_name"] for i in body["items"]} == {"production"}
    summary = _get(client, ENV + "/summary")
    assert summary["total_duration_ms"]["sample_count"] == 3
    d2 = _get(client, "/v1/models/m1/deployments/d2/startups")
    assert [(i["replica_id"], i["duration_ms"]) for i in d2["items"]] == [("r1", 1_000)]
    alias = _get(client, "/v1/models/m1/deployments/production/startups")
    assert _replicas(alias) == _replicas(body)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"end_epoch_millis": None}, "end_epoch_millis"),
        ({"end_epoch_millis": T}, "end_epoch_millis must be after start_epoch_millis"),
        ({"outcomes": "DONE"}, "outcomes DONE is not one of SUCCESS, FAILED, STALLED"),
        ({"phase": "LOADING"}, "phase LOADING is not one of"),
        ({"sort_by": "NAME"}, "sort_by NAME is not one of"),
        ({"direction": "up"}, "direction up is not one of asc, desc"),
        ({"limit": 0}, "limit"),
        ({"cursor": "nonsense!"}, "cursor is not one this endpoint returned"),
        ({"step": 1}, "unknown query parameter(s): step"),
    ],
)
def test_bad_input_is_a_400_saying_what(client: TestClient, params: dict[str, Any], message: str) -> None:
    query = {k: v for k, v in {**WINDOW, **params}.items() if v is not None}
    resp = client.get(D1, params=query, headers=auth(KEY))
    assert resp.status_code == 400 and message in resp.json()["error"], resp.text


def test_a_cursor_of_another_sort_is_a_400(client: TestClient) -> None:
    cursor = _get(client, D1, limit=1)["pagination"]["cursor"]
    resp = client.get(D1, params={**WINDOW, "cursor": cursor, "sort_by": "DURATION"}, headers=auth(KEY))
    assert resp.status_code == 400 and "sort_by=STARTED_AT&direction=desc" in resp.json()["error"]


def test_no_key_is_401_and_another_organizations_model_404(client: TestClient) -> None:
    assert client.get(D1, params=WINDOW).status_code == 401
    for path in (D1, D1 + "/summary", ENV, ENV + "/summary"):
        resp = client.get(path, params=WINDOW, headers=auth(OTHER))
        assert resp.status_code == 404 and "no model 'm1'" in resp.json()["error"]
    resp = client.get("/v1/models/m1/deployments/nope/startups", params=WINDOW, headers=auth(KEY))
    assert resp.status_code == 404
    resp = client.get("/v1/models/m1/environments/staging/startups/summary", params=WINDOW, headers=auth(KEY))
    assert resp.status_code == 404
