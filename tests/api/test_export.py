"""``GET /metrics``, the export endpoint (platform-facts §2), in-process over hand-built samples: values
and units, labels, key types and scoping, the 30 s snapshot, the 6-per-minute limit, OpenMetrics."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from servemetrics.api.app import create_app
from servemetrics.samples import SampleBatch
from tests.api.conftest import Serve
from tests.apptools import app_config, auth, org
from tests.query.helpers import at, series, store_with

EXPORT, SCOPED, MANAGE, PERSONAL = "sm-export-key", "sm-scoped-key", "sm-manage-key", "sm-personal-key"
INVOKE, OTHER = "sm-invoke-key", "sm-other-key"
REQ, E2E = "baseten_inference_requests_total", "baseten_end_to_end_response_time_seconds"
DEP = {"model_id": "m1", "model_name": "llama", "deployment_id": "d1", "environment": "", "rollout_phase": ""}


def declarations() -> dict:
    keys = {EXPORT: "WORKSPACE_EXPORT_METRICS", SCOPED: "WORKSPACE_EXPORT_METRICS"}
    keys |= {MANAGE: "WORKSPACE_MANAGE_ALL", PERSONAL: "PERSONAL", INVOKE: "WORKSPACE_INVOKE"}
    return {
        "organizations": [
            org("acme", keys, scoped={SCOPED: ["m3"]}),
            org("other", {OTHER: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {"id": "m1", "name": "llama", "organization": "acme", "deployments": [{"id": "d1"}]},
            {"id": "m3", "name": "whisper", "organization": "acme", "deployments": [{"id": "d3"}]},
            {"id": "m2", "name": "theirs", "organization": "other", "deployments": [{"id": "x1"}]},
        ],
    }


def samples() -> list:
    dep = {k: v for k, v in DEP.items() if k not in ("model_id", "environment", "rollout_phase")}
    req = {**dep, "is_async": "false"}
    return [
        # a DEPLOYMENT-scope gauge reported by the gateway and by the replica: the copies are averaged
        *series("baseten_replicas_active", [(90, 1), (100, 2)], source="gateway", **dep),
        *series("baseten_replicas_active", [(100, 4)], **dep),
        # stored as a 0-1 ratio, exported in percent
        *series("baseten_gpu_utilization", [(110, 0.25)], replica="r1", gpu="0", **dep),
        # a replica restart at 60 s (10 -> 5): 10 + 5 + 3 = 18
        *series(REQ, [(0, 0), (30, 10), (60, 5), (90, 8)], status_code="200", **req),
        *series(REQ, [(0, 0), (60, 2)], status_code="500", **req),
        *series(E2E + "_bucket", [(0, 0), (60, 3)], le="0.1", **req),
        *series(E2E + "_bucket", [(0, 0), (60, 5)], le="1.0", **req),
        *series(E2E + "_bucket", [(0, 0), (60, 6)], le="+Inf", **req),
        *series(E2E + "_sum", [(0, 0), (60, 2.5)], **req),
        *series(E2E + "_count", [(0, 0), (60, 6)], **req),
        *series(
            "baseten_concurrent_requests", [(100, 7)], model_id="m3", model_name="whisper", deployment_id="d3"
        ),
        *series(
            "baseten_replicas_active", [(100, 9)], model_id="m2", model_name="theirs", deployment_id="x1"
        ),
        # an engine counter keeps its data-parallel rank label (catalog ``Ranks``); vLLM's own model_name
        # was overridden by the registry's at ingest
        *series("vllm:prompt_tokens_total", [(0, 100), (60, 160)], replica="r1", engine="1", **dep),
        # older than the 5 minutes a gauge looks back at 120 s: not exported
        *series("baseten_replicas_starting", [(-400, 1)], **dep),
    ]


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def exported(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``(sample name, sorted labels) -> value`` of an exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def _client(serve: Serve, clock: Clock) -> TestClient:
    return serve(declarations(), clock=clock, store=store_with(samples()), gateway=False)


def test_an_export_key_reads_its_organization_in_export_units(serve):
    client = _client(serve, Clock(at(120)))
    resp = client.get("/metrics", headers=auth(EXPORT))
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    req = {**DEP, "is_async": "false"}
    assert exported(resp.text) == {
        key("baseten_replicas_active", **DEP): 3.0,  # (2 + 4) / 2
        key("baseten_gpu_utilization", **DEP, replica="r1", gpu="0"): 25.0,
        key(REQ, **req, status_code="200"): 18.0,
        key(REQ, **req, status_code="500"): 2.0,
        key(E2E + "_bucket", **req, le="0.1"): 3.0,
        key(E2E + "_bucket", **req, le="1.0"): 5.0,
        key(E2E + "_bucket", **req, le="+Inf"): 6.0,
        key(E2E + "_count", **req): 6.0,
        key(E2E + "_sum", **req): 2.5,
        key("vllm:prompt_tokens_total", **DEP, replica="r1", engine="1"): 60.0,  # from the first sample
        key(
            "baseten_concurrent_requests",
            **DEP | {"model_id": "m3", "model_name": "whisper", "deployment_id": "d3"},
        ): 7.0,
    }
    assert "# TYPE baseten_inference_requests_total counter" in resp.text
    assert "# TYPE baseten_end_to_end_response_time_seconds histogram" in resp.text
    assert "# TYPE vllm:prompt_tokens_total counter" in resp.text


def test_scopes_and_key_types(serve):
    client = _client(serve, Clock(at(120)))
    models = {
        k: {dict(labels)["model_id"] for _, labels in exported(client.get("/metrics", headers=auth(k)).text)}
        for k in (EXPORT, SCOPED, MANAGE, PERSONAL, OTHER)
    }
    assert models == {
        EXPORT: {"m1", "m3"},
        SCOPED: {"m3"},
        MANAGE: {"m1", "m3"},
        PERSONAL: {"m1", "m3"},
        OTHER: {"m2"},
    }
    assert client.get("/metrics", headers=auth(EXPORT, "Bearer")).status_code == 200
    invoke = client.get("/metrics", headers=auth(INVOKE))
    assert (invoke.status_code, invoke.json()["error"]) == (
        403,
        "a WORKSPACE_INVOKE key cannot read the metrics export; use a WORKSPACE_EXPORT_METRICS, "
        "WORKSPACE_MANAGE_ALL or PERSONAL key",
    )
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=auth("sm-no-such-key")).status_code == 401


def test_the_seventh_request_in_a_minute_is_a_429_per_organization(serve):
    clock = Clock(at(120))
    client = _client(serve, clock)
    for i in range(6):
        clock.ms = at(120 + i)  # 120 s .. 125 s
        assert client.get("/metrics", headers=auth(EXPORT if i % 2 else MANAGE)).status_code == 200
    clock.ms = at(170.5)
    refused = client.get("/metrics", headers=auth(SCOPED))  # another key of the same organization
    assert refused.status_code == 429
    # the oldest counted request (120 s) leaves the window at 180 s: 9.5 s from now, rounded up
    assert refused.headers["retry-after"] == "10"
    assert refused.json() == {
        "error": "Rate limit exceeded. Please try again later. GET /metrics answers 6 requests per minute "
        "per organization: scrape it every 60 s",
        "retry_after": 10,
    }
    assert client.get("/metrics", headers=auth(OTHER)).status_code == 200  # another organization
    clock.ms = at(180)
    assert client.get("/metrics", headers=auth(EXPORT)).status_code == 200  # the refused one not counted
    assert client.get("/metrics", headers=auth(EXPORT)).status_code == 429  # 121 s .. 125 s and 180 s


def test_one_snapshot_per_organization_for_30_seconds(serve):
    clock = Clock(at(120))
    client = _client(serve, clock)
    store = client.app.state.service.store
    gauge = key("baseten_replicas_active", **DEP)

    def active() -> float:
        return exported(client.get("/metrics", headers=auth(EXPORT)).text)[gauge]

    assert active() == 3.0
    replica = {"model_name": "llama", "deployment_id": "d1"}  # the labels of the replica's series
    store.append(SampleBatch.from_samples(series("baseten_replicas_active", [(125, 6)], **replica)))
    clock.ms = at(149.999)
    assert active() == 3.0  # built at 120 s
    clock.ms = at(150)
    assert active() == 4.0  # (2 + 6) / 2


def test_openmetrics_when_the_accept_header_asks(serve):
    client = _client(serve, Clock(at(120)))
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    resp = client.get("/metrics", headers={**auth(EXPORT), "Accept": accept})
    assert resp.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert resp.text.endswith("# EOF\n")
    assert 'baseten_inference_requests_total{deployment_id="d1",environment=""' in resp.text
    assert "# TYPE baseten_inference_requests counter" in resp.text


def test_counter_totals_survive_a_restart_of_the_service(tmp_path):
    config = app_config(tmp_path, declarations())
    clock = Clock(at(120))
    with TestClient(create_app(config, scrape=False, clock=clock, gateway=False)) as client:
        client.app.state.service.store.append(SampleBatch.from_samples(samples()))
        first = exported(client.get("/metrics", headers=auth(EXPORT)).text)
    with TestClient(create_app(config, scrape=False, clock=clock, gateway=False)) as client:
        again = exported(client.get("/metrics", headers=auth(EXPORT)).text)
    assert again == first and first[key(REQ, **DEP, is_async="false", status_code="200")] == 18.0


def test_a_deployments_requests_are_exported_from_one_source(serve):
    # d1: the gateway's 4 requests, and the custom server's own count of them (two handlers) and of 3
    # sent to it directly: only the gateway's is exported. d3: no gateway, its server's count is.
    dep = {k: v for k, v in DEP.items() if k not in ("model_id", "environment", "rollout_phase")}
    server = {**dep, "replica": "r1", "source": "http"}
    d3 = {"model_id": "m3", "model_name": "whisper", "deployment_id": "d3", "replica": "r9"}
    store = store_with(
        series(REQ, [(0, 0), (60, 4)], status_code="200", is_async="false", **dep),
        series(REQ, [(0, 0), (60, 5)], status_code="2xx", handler="/predict", **server),
        series(REQ, [(0, 0), (60, 2)], status_code="2xx", handler="/v1/chat", **server),
        series(REQ, [(0, 0), (60, 1)], status_code="5xx", handler="/predict", **server),
        series(REQ, [(0, 0), (60, 3)], status_code="2xx", handler="/a", source="http", **d3),
        series(REQ, [(0, 0), (60, 4)], status_code="2xx", handler="/b", source="http", **d3),
    )
    client = serve(declarations(), clock=Clock(at(120)), store=store, gateway=False)
    got = {
        k: v for k, v in exported(client.get("/metrics", headers=auth(EXPORT)).text).items() if k[0] == REQ
    }
    d3_labels = {**DEP, "model_id": "m3", "model_name": "whisper", "deployment_id": "d3", "replica": "r9"}
    assert got == {
        key(REQ, **DEP, is_async="false", status_code="200"): 4.0,
        key(REQ, **d3_labels, status_code="2xx"): 7.0,  # its two handlers summed
    }
