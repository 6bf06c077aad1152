"""The dashboard's API: the metrics catalog, histogram bounds and organization GPU usage over HTTP."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.catalog import CATALOG
from servemetrics.registry import EVENT_KINDS
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore
from tests.api.conftest import Serve
from tests.apptools import org
from tests.conftest import schema_validator
from tests.query.helpers import T0, at, series, store_with

KEY, SCOPED_KEY, INVOKE_KEY, OTHER_KEY = "sm-dash-key", "sm-dash-scoped", "sm-dash-invoke", "sm-dash-other"
ACTIVE = "baseten_replicas_active"
E2E = "baseten_end_to_end_response_time_seconds"
GPU_USAGE = "/v1/organization/gpu_usage"


def _declarations():
    def dep(id_, gpu_type=None, count=0):
        return {"id": id_, "name": f"v-{id_}", "instance_type": {"gpu_type": gpu_type, "gpu_count": count}}

    return {
        "organizations": [
            org(
                "acme",
                {
                    KEY: "WORKSPACE_MANAGE_ALL",
                    SCOPED_KEY: "WORKSPACE_EXPORT_METRICS",
                    INVOKE_KEY: "WORKSPACE_INVOKE",
                },
                scoped={SCOPED_KEY: ["m2"]},
            ),
            org("other", {OTHER_KEY: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {
                "id": "m1",
                "name": "llama",
                "organization": "acme",
                "deployments": [dep("d1", "A100", 2), dep("d3", "H100", 1)],
            },
            {
                "id": "m2",
                "name": "whisper",
                "organization": "acme",
                "deployments": [dep("d2", "H100", 1), dep("d4")],
            },
            {
                "id": "x1",
                "name": "theirs",
                "organization": "other",
                "deployments": [dep("x1d", "B200", 8)],
            },
        ],
    }


def _samples() -> list[Sample]:
    steady = [(0, 2), (10, 2), (20, 2), (30, 3), (40, 3), (50, 3)]
    return [s for group in _groups(steady) for s in group]


def _data() -> MemoryStore:
    return store_with(_samples())


def _batch() -> SampleBatch:
    return SampleBatch.from_samples(_samples())


def _groups(steady: list[tuple[float, float]]) -> tuple[list[Sample], ...]:
    return (
        # d1 (2 x A100): two sources report the same replica count: one value per deployment, not a sum
        series(ACTIVE, steady, deployment_id="d1", source="kube"),
        series(ACTIVE, steady, deployment_id="d1", source="gateway"),
        # d2 (m2, 1 x H100): 1 replica, then 2 and 4 (mean 3) in the second step
        series(ACTIVE, [(0, 1), (15, 1), (30, 2), (45, 4)], model_id="m2", deployment_id="d2"),
        # d3 (m1, 1 x H100): samples only in the second step
        series(ACTIVE, [(35, 5), (55, 5)], deployment_id="d3"),
        # d4 (m2, CPU): never counted
        series(ACTIVE, [(0, 7), (30, 7)], model_id="m2", deployment_id="d4"),
        # x1d: another organization's
        series(ACTIVE, [(0, 1), (30, 1)], model_id="x1", deployment_id="x1d"),
        # histogram buckets of two deployments of m1 with different layouts, and one of m2
        *[
            series(E2E + "_bucket", [(0, 0), (30, 1)], deployment_id="d1", le=le)
            for le in ("0.1", "2.5", "+Inf")
        ],
        *[series(E2E + "_bucket", [(0, 0)], deployment_id="d3", le=le) for le in ("0.5", "5.0", "+Inf")],
        *[
            series(E2E + "_bucket", [(0, 0)], model_id="m2", deployment_id="d2", le=le)
            for le in ("10", "+Inf")
        ],
    )


@pytest.fixture(params=["memory", "duckdb"])
def client(request, tmp_path, serve: Serve) -> TestClient:
    """The service over the same samples in a MemoryStore or a real DuckDB file."""
    store: Store = _data()
    if request.param == "duckdb":
        store = DuckDBStore(tmp_path / "samples.duckdb")
        store.append(_batch())
    return serve(_declarations(), gateway=False, clock=lambda: at(120), store=store)


def get(client, path, key=KEY, **params):
    headers = {"Authorization": f"Api-Key {key}"} if key else {}
    return client.get(path, params=params, headers=headers)


# -- GET /v1/metrics_catalog ----------------------------------------------------------------------


def test_catalog_lists_every_metric_in_order_with_graph_fields(client, shared_dir):
    for key in (KEY, SCOPED_KEY, INVOKE_KEY):  # any valid key
        assert get(client, "/v1/metrics_catalog", key=key).status_code == 200
    body = get(client, "/v1/metrics_catalog").json()
    assert [m["name"] for m in body["metrics"]] == list(CATALOG)
    descriptor = schema_validator("ModelMetricDescriptorV1")  # each entry is a spec descriptor plus fields
    for entry in body["metrics"]:
        descriptor.validate(entry)
    by_name = {m["name"]: m for m in body["metrics"]}
    assert by_name["baseten_replicas_desired"] == {
        "name": "baseten_replicas_desired",
        "kind": "GAUGE",
        "unit_hint": "COUNT",
        "aggregation": "sum",
        "label_sets": [{}],
        "help": CATALOG["baseten_replicas_desired"].help,
        "panel": "Replicas",
        "legend": "Desired",
        "default_visible": True,
        "group": "",
        "engines": [],
        "group_by": ["deployment"],
    }
    assert by_name["baseten_inference_requests_total"]["label_sets"] == [
        {"status": "2xx"},
        {"status": "4xx"},
        {"status": "5xx"},
    ]
    assert by_name["baseten_pod_readiness"]["default_visible"] is False
    assert [e["kind"] for e in body["event_kinds"]] == list(EVENT_KINDS)
    assert body["event_kinds"][2] == {"kind": "PROMOTION_CONTROL", "title": "Promotion control action"}


def test_catalog_needs_a_valid_key(client):
    assert get(client, "/v1/metrics_catalog", key=None).status_code == 401
    resp = get(client, "/v1/metrics_catalog", key="nope")
    assert resp.status_code == 401 and "invalid API key" in resp.json()["error"]


# -- GET /v1/models/{id}/histogram_bounds ---------------------------------------------------------


def test_histogram_bounds_are_the_highest_finite_le_of_the_model(client):
    resp = get(client, "/v1/models/m1/histogram_bounds", metrics=[E2E, "baseten_request_size_bytes"])
    assert resp.status_code == 200, resp.text
    # m1: d1 has 0.1, 2.5, +Inf; d3 has 0.5, 5.0, +Inf -> 5.0 (m2's 10 is another model's);
    # request size has no series -> left out
    assert resp.json() == {"bounds": {E2E: 5.0}}
    assert get(client, "/v1/models/m2/histogram_bounds", metrics=E2E).json() == {"bounds": {E2E: 10.0}}
    # no metrics named: every histogram
    assert get(client, "/v1/models/m1/histogram_bounds").json() == {"bounds": {E2E: 5.0}}


@pytest.mark.parametrize(
    ("path", "params", "status", "needle"),
    [
        (
            "/v1/models/m1/histogram_bounds",
            {"metrics": "baseten_nope"},
            400,
            "unknown metric name(s): baseten_nope",
        ),
        ("/v1/models/m1/histogram_bounds", {"metrics": ACTIVE}, 400, f"not histogram metric(s): {ACTIVE}"),
        ("/v1/models/x1/histogram_bounds", {"metrics": E2E}, 404, "no model 'x1'"),
        ("/v1/models/nope/histogram_bounds", {"metrics": E2E}, 404, "no model 'nope'"),
    ],
)
def test_histogram_bounds_errors(client, path, params, status, needle):
    resp = get(client, path, **params)
    assert resp.status_code == status and needle in resp.json()["error"], resp.text


@pytest.mark.parametrize("value", ["", ",", " ", f"{E2E},,{E2E}"])
def test_histogram_bounds_empty_metric_name_is_400(client, value):
    # regression: metrics= answered 200 {"bounds": {}}
    resp = get(client, "/v1/models/m1/histogram_bounds", metrics=value)
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "metrics: an empty metric name; name a histogram metric (e.g. "
        "metrics=baseten_end_to_end_response_time_seconds) or leave metrics out for every histogram"
    }


@pytest.mark.parametrize(
    ("path", "params", "takes"),
    [
        ("/v1/metrics_catalog", {"bogus": "1"}, "no query parameters"),
        ("/v1/metrics_catalog", {"metrics": E2E, "bogus": "1"}, "no query parameters"),
        ("/v1/models/m1/histogram_bounds", {"metrics": E2E, "bogus": "1"}, "metrics"),
    ],
)
def test_unknown_query_parameters_are_400(client, path, params, takes):
    # regression: they were silently ignored
    resp = get(client, path, **params)
    unknown = ", ".join(sorted(set(params) - ({"metrics"} if takes == "metrics" else set())))
    assert resp.status_code == 400
    assert resp.json() == {"error": f"unknown query parameter(s): {unknown}; this endpoint takes {takes}"}


def test_histogram_bounds_respects_key_scope(client):
    assert get(client, "/v1/models/m1/histogram_bounds", key=SCOPED_KEY).status_code == 404
    assert get(client, "/v1/models/m2/histogram_bounds", key=SCOPED_KEY).status_code == 200
    assert get(client, "/v1/models/m1/histogram_bounds", key=INVOKE_KEY).status_code == 403


# -- GET /v1/organization/gpu_usage ---------------------------------------------------------------

WINDOW = {"start_epoch_millis": T0, "end_epoch_millis": at(60)}  # 60 s -> 30 s steps at T0, T0 + 30 s


def test_gpu_usage_by_gpu_type(client):
    resp = get(client, GPU_USAGE, **WINDOW)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["timestamps"] == [T0, at(30)]
    assert (body["step_seconds"], body["group_by"], body["gpu_types"]) == (30, "gpu_type", ["A100", "H100"])
    # A100 = d1 x 2: step 1 mean 2 replicas -> 4 GPUs; step 2 mean 3 -> 6 (two sources: one value)
    # H100 = d2 x 1 + d3 x 1: step 1 d2 = 1, d3 no sample -> 1; step 2 d2 mean (2 + 4) / 2 = 3, d3 5 -> 8
    # d4 (CPU) and the other organization's B200 are not counted
    assert body["groups"] == [
        {"key": "A100", "name": "A100", "values": [4.0, 6.0]},
        {"key": "H100", "name": "H100", "values": [1.0, 8.0]},
    ]
    assert (body["start_epoch_millis"], body["end_epoch_millis"]) == (T0, at(60))


def test_gpu_usage_by_model_with_filter_and_nulls(client):
    body = get(client, GPU_USAGE, group_by="model", **WINDOW).json()
    # m1 = d1 (4, 6) + d3 (-, 5) -> 4, 11; m2 = d2 -> 1, 3
    assert body["groups"] == [
        {"key": "m1", "name": "llama", "values": [4.0, 11.0]},
        {"key": "m2", "name": "whisper", "values": [1.0, 3.0]},
    ]
    body = get(client, GPU_USAGE, group_by="MODEL", gpu_type="H100", **WINDOW).json()
    # H100 only: m1 = d3 alone, no sample in step 1 -> null
    assert body["groups"] == [
        {"key": "m1", "name": "llama", "values": [None, 5.0]},
        {"key": "m2", "name": "whisper", "values": [1.0, 3.0]},
    ]
    assert body["gpu_types"] == ["A100", "H100"]  # the filter's choices stay complete
    two = get(client, GPU_USAGE, gpu_type=["H100", "A100"], **WINDOW).json()
    assert [g["key"] for g in two["groups"]] == ["A100", "H100"]
    assert get(client, GPU_USAGE, gpu_type="T4", **WINDOW).json()["groups"] == []


def test_gpu_usage_scoped_and_other_org_keys(client):
    body = get(client, GPU_USAGE, key=SCOPED_KEY, **WINDOW).json()  # scoped to m2: d2 only
    assert body["gpu_types"] == ["H100"]
    assert body["groups"] == [{"key": "H100", "name": "H100", "values": [1.0, 3.0]}]
    body = get(client, GPU_USAGE, key=OTHER_KEY, **WINDOW).json()  # x1d: 1 replica x 8 B200
    assert body["groups"] == [{"key": "B200", "name": "B200", "values": [8.0, 8.0]}]


def test_gpu_usage_default_window_is_the_last_hour(client):
    body = get(client, GPU_USAGE).json()
    # now = T0 + 120 s: window [now - 1 h, now), 30 s steps: 120 step starts, the first at the window start
    assert (body["start_epoch_millis"], body["end_epoch_millis"]) == (at(120) - 3_600_000, at(120))
    assert body["step_seconds"] == 30 and len(body["timestamps"]) == 120
    assert body["timestamps"][-4:] == [at(0), at(30), at(60), at(90)]
    a100 = body["groups"][0]
    assert a100["key"] == "A100" and a100["values"][-4:] == [4.0, 6.0, None, None]


@pytest.mark.parametrize(
    ("params", "status", "needle"),
    [
        ({"start_epoch_millis": T0, "end_epoch_millis": T0 + 8 * 86_400_000}, 400, "7 days"),
        ({"start_epoch_millis": at(60), "end_epoch_millis": at(0)}, 400, "must be earlier"),
        ({"group_by": "region"}, 400, "group_by"),
        ({"step": "60"}, 400, "unknown query parameter(s): step"),
    ],
)
def test_gpu_usage_bad_input(client, params, status, needle):
    resp = get(client, GPU_USAGE, **params)
    assert resp.status_code == status and needle in resp.json()["error"], resp.text


def test_gpu_usage_auth(client):
    assert get(client, GPU_USAGE, key=None).status_code == 401
    assert get(client, GPU_USAGE, key="nope").status_code == 401
    assert get(client, GPU_USAGE, key=INVOKE_KEY).status_code == 403


# -- GET /v1/models/{id}/events: what the overlay's hover shows ---------------------------------


def test_promoted_event_over_http_names_both_deployments(client):
    registry = client.app.state.service.registry
    registry.environments.create_environment("m1", "production", at_ms=at(1))
    registry.environments.promote("m1", "production", "d1", at_ms=at(2))
    registry.environments.promote("m1", "production", "d3", percent=50, at_ms=at(3))
    resp = get(
        client, "/v1/models/m1/events", start_epoch_millis=T0, end_epoch_millis=at(60), kinds="PROMOTED"
    )
    assert resp.status_code == 200, resp.text
    last = resp.json()["events"][-1]
    assert (last["kind"], last["epoch_millis"], last["deployment_id"], last["environment"]) == (
        "PROMOTED",
        at(3),
        "d3",
        "production",
    )
    assert last["details"] == {
        "deployment_id": "d3",
        "deployment_name": "v-d3",
        "previous_deployment_id": "d1",
        "previous_deployment_name": "v-d1",
        "environment": "production",
        "rolling": True,
        "percent": 50,
        "status": "RAMPING_UP",
        "old": {"deployment_id": "d1", "deployment_name": "v-d1"},
        "new": {"deployment_id": "d3", "deployment_name": "v-d3"},
    }
