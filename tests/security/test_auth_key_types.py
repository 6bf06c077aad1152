"""Issue 12 part 12: every route against every key type, as docs/management.md, docs/registry.md "API
keys", docs/dashboard-api.md and docs/gateway.md say.

One fresh app per key (the routes change state), the routes in ``ROUTES`` order (reads, then inference,
then changes). Each route has an access class; ``expected`` gives the status of a key of each type from
it: a key that may act gets the route's ``ok`` status (the answer of a permitted call, e.g. 409 for
promotion control with no promotion running), one that may never act a 403, another organization's or an
out-of-scope key a 404, no key or a wrong one a 401. Every route of the app is in the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample
from servemetrics.types import labels_of
from tests.apptools import auth, build_app, org
from tests.query.helpers import T0

KEYS = {
    "PERSONAL": "k-personal",
    "WORKSPACE_MANAGE_ALL": "k-manage-all",
    "WORKSPACE_EXPORT_METRICS": "k-export",
    "WORKSPACE_INVOKE": "k-invoke",
    "WORKSPACE_MANAGE_API_KEYS": "k-manage-keys",
}
EXPORT_OUT_OF_SCOPE, INVOKE_OUT_OF_SCOPE, OTHER_ORG = "k-export-m9", "k-invoke-m9", "k-other-org"
CALLERS = [*KEYS, "EXPORT_OUT_OF_SCOPE", "INVOKE_OUT_OF_SCOPE", "OTHER_ORG", "NO_KEY", "WRONG_KEY"]
READERS = {"PERSONAL", "WORKSPACE_MANAGE_ALL", "WORKSPACE_EXPORT_METRICS"}
MANAGERS = {"PERSONAL", "WORKSPACE_MANAGE_ALL"}
INVOKERS = {"PERSONAL", "WORKSPACE_MANAGE_ALL", "WORKSPACE_INVOKE"}
M = "/v1/models/m1"
STARTUP_WINDOW = {"start_epoch_millis": 0, "end_epoch_millis": 1}


def _write_body() -> bytes:
    lab = labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1"})
    return encode_write_request([Sample("baseten_inference_requests_total", lab, 1.0, T0)])


@dataclass(frozen=True)
class Route:
    """One request and who may make it: ``access`` is public, any (every valid key), read (the model's
    state and metrics), read_org (the organization's, an out-of-scope key sees only its models), in_org
    (any key of the organization whose model scope covers it), manage,
    manage_org (ingest, creating models) or invoke; ``ok`` the status of a permitted call."""

    method: str
    path: str
    access: str
    ok: int
    body: Any = None
    params: dict[str, Any] | None = None
    raw: bytes | None = None


ROUTES = [
    Route("GET", "/healthz", "public", 200),
    Route("GET", "/v1/metrics_catalog", "any", 200),
    Route("GET", "/v1/models", "read_org", 200),
    Route("GET", M, "read", 200),
    Route("GET", f"{M}/deployments", "read", 200),
    Route("GET", f"{M}/deployments/d1", "read", 200),
    Route("GET", f"{M}/deployments/d1/replicas", "read", 200),
    Route("GET", f"{M}/environments", "read", 200),
    Route("GET", f"{M}/environments/production", "read", 200),
    Route("GET", f"{M}/environments/production/metrics", "read", 200),
    Route("GET", f"{M}/deployments/d1/metrics", "read", 200),
    Route("GET", f"{M}/events", "read", 200),
    Route("GET", f"{M}/histogram_bounds", "read", 200),
    Route("GET", f"{M}/engines", "read", 200),
    *(
        Route("GET", f"{M}/{scope}/startups{tail}", "read", 200, params=STARTUP_WINDOW)
        for scope in ("deployments/d1", "environments/production")
        for tail in ("", "/summary")
    ),
    Route("GET", f"{M}/loops_deployments", "read", 200),
    Route("GET", "/v1/organization/gpu_usage", "read_org", 200),
    Route("GET", "/v1/loops/deployments", "read_org", 200),
    Route("GET", "/v1/loops/deployments/t1", "read_trainer", 200),
    Route("POST", "/v1/loops/deployments/t1/metrics", "read_trainer", 200, body={}),
    Route("GET", "/v1/service_discovery/targets", "read_org", 200),
    # Model APIs (docs/model-apis.md): "chat" is served by m1, whose production has no replica
    Route("GET", "/v1/model_apis", "any", 200),
    Route("GET", "/v1/model_apis/chat", "in_org", 200),
    Route("GET", "/v1/model_apis/chat/metrics", "read", 200),
    Route("GET", "/v1/model_apis/usage", "read_org", 200, params={"start_time": "2026-01-01T00:00:00Z"}),
    Route("POST", "/v1/chat/completions", "invoke", 503, body={"model": "chat", "messages": []}),
    Route("POST", "/v1/completions", "invoke", 503, body={"model": "chat", "prompt": "hi"}),
    Route("GET", "/metrics", "read_org", 200),  # the export (docs/export.md): once per caller, under 6/min
    Route("GET", "/gateway/metrics", "read_org", 200),
    # inference: production serves d2, which has no replica, so a permitted call is the gateway's 503
    Route("POST", f"{M}/environments/production/predict", "invoke", 503, body={}),
    Route("POST", f"{M}/deployment/d2/predict", "invoke", 503, body={}),
    Route("GET", f"{M}/environments/production/sync/health", "invoke", 503),
    Route("POST", f"{M}/environments/production/async_predict", "invoke", 201, body={"model_input": {}}),
    Route("GET", f"{M}/async_requests/nope", "invoke", 404),
    Route("DELETE", f"{M}/async_requests/nope", "invoke", 404),
    # changes
    Route("POST", "/v1/models", "manage_org", 201, body={"name": "new"}),
    Route("POST", f"{M}/deployments", "manage", 201, body={"name": "new"}),
    Route("POST", f"{M}/deployments/d1/replicas", "manage", 201, body={"id": "r9"}),
    Route("POST", "/api/v1/write", "manage_org", 204, raw=_write_body()),
    Route(
        "POST",
        "/v1/import",
        "manage_org",
        200,
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        raw=b"# EOF\n",
    ),
    Route("PATCH", f"{M}/deployments/d1/autoscaling_settings", "manage", 200, body={"min_replica": 0}),
    Route("PATCH", f"{M}/deployments/d1/request_backpressure_settings", "manage", 200, body={"policy": None}),
    Route("POST", f"{M}/environments", "manage", 200, body={"name": "staging"}),
    Route("PATCH", f"{M}/environments/staging", "manage", 200, body={"promotion_settings": {}}),
    Route("POST", f"{M}/environments/staging/promote", "manage", 200, body={"deployment_id": "d1"}),
    Route("POST", f"{M}/environments/production/pause_promotion", "manage", 409),
    Route("POST", f"{M}/environments/production/resume_promotion", "manage", 409),
    Route("POST", f"{M}/environments/production/promotion_percent", "manage", 409, body={"percent": 50}),
    Route("POST", f"{M}/environments/production/force_roll_forward_promotion", "manage", 409),
    Route("POST", f"{M}/environments/production/cancel_promotion", "manage", 409),
    Route("POST", f"{M}/environments/production/force_cancel_promotion", "manage", 409),
    Route("POST", f"{M}/environments/staging/deactivate", "manage", 200),
    Route("POST", f"{M}/environments/staging/activate", "manage", 200),
    Route("POST", f"{M}/deployments/d2/deactivate", "manage", 200),
    Route("POST", f"{M}/deployments/d2/activate", "manage", 200),
    Route("DELETE", f"{M}/deployments/d1/replicas/r1", "manage", 200),
]


def expected(route: Route, caller: str) -> int:
    """The status ``caller`` gets from ``route`` (the docs' rules, module docstring)."""
    if route.access == "public":
        return route.ok
    if caller in ("NO_KEY", "WRONG_KEY"):
        return 401
    if route.access == "any":
        return route.ok
    if route.access == "in_org":  # any key of the organization whose scope covers it
        return 404 if caller in ("OTHER_ORG", "EXPORT_OUT_OF_SCOPE", "INVOKE_OUT_OF_SCOPE") else route.ok
    if route.access in ("read", "read_trainer", "read_org"):
        if caller == "OTHER_ORG" or caller == "EXPORT_OUT_OF_SCOPE":
            return route.ok if route.access == "read_org" else 404
        if caller == "INVOKE_OUT_OF_SCOPE":
            return 403 if route.access == "read_org" else 404
        return route.ok if caller in READERS else 403
    if route.access == "invoke":
        if caller in ("OTHER_ORG", "INVOKE_OUT_OF_SCOPE", "EXPORT_OUT_OF_SCOPE"):
            return 404
        return route.ok if caller in INVOKERS else 403
    if caller in MANAGERS:
        return route.ok
    if caller == "OTHER_ORG":  # its own new model; another organization's model or deployment: 404
        return route.ok if route.path == "/v1/models" else 404
    return 403


def _key(caller: str) -> str | None:
    return {
        **KEYS,
        "EXPORT_OUT_OF_SCOPE": EXPORT_OUT_OF_SCOPE,
        "INVOKE_OUT_OF_SCOPE": INVOKE_OUT_OF_SCOPE,
        "OTHER_ORG": OTHER_ORG,
        "NO_KEY": None,
        "WRONG_KEY": "k-not-stored",
    }.get(caller, caller)


def declarations() -> dict[str, Any]:
    keys = {raw: key_type for key_type, raw in KEYS.items()}
    scoped = {EXPORT_OUT_OF_SCOPE: ["m9"], INVOKE_OUT_OF_SCOPE: ["m9"]}
    keys |= {EXPORT_OUT_OF_SCOPE: "WORKSPACE_EXPORT_METRICS", INVOKE_OUT_OF_SCOPE: "WORKSPACE_INVOKE"}
    replica = {"id": "r1", "targets": ["http://127.0.0.1:9/metrics"]}
    production = {"name": "production", "promotions": [{"deployment": "d2", "at": "2026-01-01T00:00:00Z"}]}
    return {
        "auth_rate_limit": {"failures": 0},  # the WRONG_KEY row sends one wrong key per route
        "organizations": [
            org("acme", keys, scoped=scoped),
            org("other", {OTHER_ORG: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {
                "id": "m1",
                "organization": "acme",
                "deployments": [{"id": "d1", "replicas": [replica]}, {"id": "d2"}],
                "environments": [production],
            },
            {"id": "m9", "organization": "acme"},
            {"id": "mx", "organization": "other"},
        ],
        "model_apis": [{"name": "chat", "organization": "acme", "model": "m1"}],
        "loops": [
            {
                "id": "t1",
                "organization": "acme",
                "sampler": {"model": "m1"},
                "nodes": [{"id": "n0", "role": "leader"}],
            }
        ],
    }


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path, declarations())) as c:
        yield c


@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")  # the sync paths' methods share one
def test_every_route_of_the_app_is_in_the_table(client: TestClient) -> None:
    """Every path of the OpenAPI document (the ``Host``-header forms of the inference paths aside: the
    same endpoints) matches a row, so a new route fails here until it is given its access class."""
    operations = {
        (method.upper(), path)
        for path, ops in client.app.openapi()["paths"].items()
        for method in ops
        if not path.startswith(("/environments/", "/deployment/"))
    }
    missing = sorted(
        (method, path)
        for method, path in operations
        if not any(r.method == method and _same_route(path, r.path) for r in ROUTES)
        and not (path.endswith("/sync/{path}") and method != "GET")  # one method stands for all
    )
    assert missing == []


def _same_route(template: str, path: str) -> bool:
    """Whether ``path`` is an instance of ``template`` (``{…}`` segments match anything)."""
    a, b = template.split("/"), path.split("/")
    return len(a) == len(b) and all(x == y or x.startswith("{") for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("caller", CALLERS)
def test_each_key_type_gets_the_documented_status_from_every_route(client: TestClient, caller: str) -> None:
    key = _key(caller)
    got = []
    for r in ROUTES:
        headers = auth(key) if key else {}
        if r.raw is not None:
            resp = client.request(r.method, r.path, content=r.raw, params=r.params, headers=headers)
        else:
            resp = client.request(r.method, r.path, json=r.body, params=r.params, headers=headers)
        got.append((r.method, r.path, resp.status_code, resp.text[:200]))
    wrong = [
        (m, p, status, expected(r, caller), text)
        for r, (m, p, status, text) in zip(ROUTES, got, strict=True)
        if status != expected(r, caller)
    ]
    assert wrong == []


def test_a_key_that_may_read_nothing_gets_403_from_the_model_list(client: TestClient) -> None:
    for key_type in ("WORKSPACE_INVOKE", "WORKSPACE_MANAGE_API_KEYS"):
        resp = client.get("/v1/models", headers=auth(KEYS[key_type]))
        assert (resp.status_code, resp.json()) == (
            403,
            {
                "error": f"a {key_type} key cannot read models; use a WORKSPACE_EXPORT_METRICS, "
                "WORKSPACE_MANAGE_ALL or PERSONAL key"
            },
        )
    listed = client.get("/v1/models", headers=auth(EXPORT_OUT_OF_SCOPE)).json()["models"]
    assert [m["id"] for m in listed] == ["m9"]
