"""Every route of the app, called without a key: only the liveness probe, the dashboard's static files,
the OpenAPI document and docs, and the service's own metrics (free of tenant data) answer 2xx (issue 14,
"How we will know")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from servemetrics.samples import SampleBatch
from tests.api.conftest import Serve
from tests.apptools import auth, org
from tests.query.helpers import series, store_with

KEY = "sm-walk-key"
OPEN = {
    "/healthz",
    "/service/metrics",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/",  # the dashboard's page (a static file)
    "/gpu-usage",  # a redirect to it
    "/dashboard/{path:path}",  # the dashboard's static files
}
VALUES = {"model_id": "m1", "deployment_id": "d1", "env_name": "production", "replica_id": "r1"}
TARGET = "http://10.9.8.7:8000/metrics"


def declarations() -> dict:
    replica = {"id": "r1", "targets": [TARGET]}
    return {
        "organizations": [org("acme", {KEY: "WORKSPACE_MANAGE_ALL"})],
        "models": [
            {
                "id": "m1",
                "name": "secret-model",
                "organization": "acme",
                "deployments": [{"id": "d1", "replicas": [replica]}],
                "environments": [
                    {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
                ],
            }
        ],
    }


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route, those of included routers too (FastAPI keeps them as ``_IncludedRouter``)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from _routes(included.routes) if included is not None else (route,)


def _path(template: str) -> str:
    return re.sub(r"{(\w+)(:path)?}", lambda m: VALUES.get(m.group(1), "x"), template)


@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")  # the sync paths' methods share one
def test_no_route_but_the_open_ones_answers_2xx_without_a_key(serve: Serve):
    client = serve(
        declarations(), store=store_with(series("baseten_replicas_active", [(0, 1)], deployment_id="d1"))
    )
    calls = [
        (method, route.path)
        for route in _routes(client.app.routes)
        for method in sorted(getattr(route, "methods", None) or ())
    ]
    assert len(calls) > 50 and ("GET", "/metrics") in calls and ("GET", "/gateway/metrics") in calls
    answered = {}
    for method, template in calls:
        body = {} if method in ("POST", "PUT", "PATCH") else None
        resp = client.request(method, _path(template), json=body, follow_redirects=False)
        answered[(method, template)] = resp.status_code
    open_ones = {call for call, status in answered.items() if 200 <= status < 300}
    assert {path for _, path in open_ones} <= OPEN, sorted(open_ones)
    assert answered[("GET", "/metrics")] == answered[("GET", "/gateway/metrics")] == 401
    assert {answered[("GET", p)] for p in ("/healthz", "/service/metrics", "/openapi.json")} == {200}
    # every API route was called (the walk covers what the OpenAPI document lists)
    documented = {
        (m.upper(), p) for p, ops in client.get("/openapi.json").json()["paths"].items() for m in ops
    }
    assert documented <= {(m, p.replace(":path}", "}")) for m, p in answered}


def test_the_service_metrics_hold_no_tenant_data(serve: Serve):
    client = serve(declarations())
    own = client.app.state.service.metrics
    own.target_up.labels("m1", "d1", "r1", TARGET).set(1.0)
    own.target_up.labels("m1", "d1", "r2", TARGET + "2").set(0.0)
    own.scrape_duplicates.labels(TARGET).inc(2)
    own.refused_samples.labels("acme").inc(3)
    client.app.state.service.append(SampleBatch.from_samples(series("x", [(0, 1)], deployment_id="d1")))
    assert client.get("/metrics", headers=auth(KEY)).status_code == 200  # a tenant's export, meanwhile
    text = client.get("/service/metrics").text
    assert "servemetrics_target_up 1.0" in text  # targets up, summed over the targets
    assert "servemetrics_scrape_duplicate_samples_total 2.0" in text
    assert "servemetrics_series_limit_refused_samples_total 3.0" in text
    for tenant in ("m1", "d1", "r1", "10.9.8.7", "acme", "secret-model", "model_id", "deployment_id"):
        assert tenant not in text, tenant
