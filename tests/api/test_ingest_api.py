"""Push ingest through the API: remote_write 1.0 and OpenMetrics import, then read back exactly."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.routes.ingest import _checked_buckets
from servemetrics.api.service import remove_import_spools
from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample, SampleBatch
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.apptools import auth, org
from tests.conftest import schema_validator
from tests.query.helpers import T0, at

MANAGE, READ = "manage-key", "read-key"
REQ = "baseten_inference_requests_total"


@pytest.fixture
def client(serve: Serve) -> TestClient:
    acme = org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL", READ: "WORKSPACE_EXPORT_METRICS"})
    models = [
        {"id": "m1", "organization": "acme", "deployments": [{"id": "d1"}]},
        {"id": "m2", "organization": "other", "deployments": [{"id": "x1"}]},
    ]
    return serve({"organizations": [acme, org("other")], "models": models}, clock=lambda: at(600))


def _h(key: str) -> dict[str, str]:
    return auth(key, "Bearer")


def _summary(client: TestClient) -> list[float | None]:
    body = client.get(
        "/v1/models/m1/deployments/d1/metrics",
        headers=_h(READ),
        params={"mode": "SUMMARY", "start_epoch_millis": T0, "end_epoch_millis": at(600), "metrics": REQ},
    ).json()
    schema_validator("GetModelMetricsResponseV1").validate(body)
    return body["metric_values"][0]["values"][0]


def _rw(model: str, dep: str, points: list[tuple[int, float]]) -> bytes:
    lab = labels_of({"model_id": model, "deployment_id": dep, "replica": "r1", "status_code": "200"})
    return encode_write_request([Sample(REQ, lab, v, at(s)) for s, v in points])


def test_remote_write_then_read_back(client):
    resp = client.post(
        "/api/v1/write", content=_rw("m1", "d1", [(0, 1), (15, 4), (30, 9)]), headers=_h(MANAGE)
    )
    assert resp.status_code == 204, resp.text
    assert _summary(client) == [8.0, 0.0, 0.0]
    own = client.get("/service/metrics").text
    assert 'servemetrics_samples_appended_total{path="remote_write"} 3.0' in own


def test_remote_write_rejects_bad_bodies_and_foreign_models(client):
    garbage = client.post("/api/v1/write", content=b"not snappy", headers=_h(MANAGE))
    assert garbage.status_code == 400 and "remote_write" in garbage.json()["error"]
    foreign = client.post("/api/v1/write", content=_rw("m2", "x1", [(0, 1)]), headers=_h(MANAGE))
    assert foreign.status_code == 404
    unlabeled = encode_write_request([Sample(REQ, labels_of({"status_code": "200"}), 1.0, T0)])
    resp = client.post("/api/v1/write", content=unlabeled, headers=_h(MANAGE))
    assert resp.status_code == 400 and "model_id and deployment_id" in resp.json()["error"]
    assert (
        client.post("/api/v1/write", content=_rw("m1", "d1", [(0, 1)]), headers=_h(READ)).status_code == 403
    )
    body = client.get(
        "/v1/models/m1/deployments/d1/metrics", headers=_h(READ), params={"mode": "SUMMARY", "metrics": REQ}
    ).json()
    assert body["metric_descriptors"] == []  # nothing of the rejected requests was stored


def test_import_openmetrics_body(client):
    lines = ["# TYPE baseten_inference_requests counter"]
    for i, v in enumerate([0, 3, 7, 2, 6]):  # a reset at the 4th point: 3 + 4 + 2 + 4 = 13
        lines.append(f'baseten_inference_requests_total{{status_code="200"}} {v} {T0 / 1000 + 15 * i:.3f}')
    body = ("\n".join(lines) + "\n# EOF\n").encode()
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=_h(MANAGE),
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["samples"] == 5
    assert _summary(client) == [13.0, 0.0, 0.0]


def test_import_bad_file_is_400_naming_the_line(client):
    body = b"# TYPE a counter\na_total 1 1767225600\na_total{ 2 1767225615\n# EOF\n"
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=_h(MANAGE),
    )
    assert resp.status_code == 400
    assert "line 3" in resp.json()["error"]


def _bucket(le: str | None, value: float = 1.0) -> bytes:
    labels = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
    if le is not None:
        labels["le"] = le
    name = "baseten_end_to_end_response_time_seconds_bucket"
    return encode_write_request([Sample(name, labels_of(labels), value, T0)])


@pytest.mark.parametrize(
    ("le", "says"),
    [
        ("abc", "bucket bound le='abc' is not a number"),
        ("", "bucket bound le='' is not a number"),
        ("NaN", "bucket bound le='NaN' is not a number"),
        (None, "needs an le label"),
    ],
)
def test_remote_write_bucket_without_a_numeric_le_is_400(client, le, says):
    resp = client.post("/api/v1/write", content=_bucket(le), headers=_h(MANAGE))
    assert resp.status_code == 400 and says in resp.json()["error"]
    ok = client.get("/v1/models/m1/deployments/d1/metrics", headers=_h(READ), params={"mode": "SUMMARY"})
    assert ok.status_code == 200


def test_remote_write_infinite_values_are_dropped_not_summed(client):
    good = _rw("m1", "d1", [(0, 1), (15, 4)])
    assert client.post("/api/v1/write", content=good, headers=_h(MANAGE)).status_code == 204
    lab = labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1", "status_code": "200"})
    bad = encode_write_request(
        [Sample(REQ, lab, float("inf"), at(30)), Sample(REQ, lab, float("-inf"), at(45))]
    )
    assert client.post("/api/v1/write", content=bad, headers=_h(MANAGE)).status_code == 204
    assert _summary(client) == [3.0, 0.0, 0.0]


def test_remote_write_with_a_deployment_alias_is_400(client):
    resp = client.post("/api/v1/write", content=_rw("m1", "production", [(0, 1)]), headers=_h(MANAGE))
    assert resp.status_code == 400 and "alias" in resp.json()["error"]


@pytest.mark.parametrize("end", [-1, 99999999999999999999, 10**16])
def test_out_of_range_epochs_are_400(client, end):
    resp = client.get(
        "/v1/models/m1/deployments/d1/metrics",
        headers=_h(READ),
        params={"mode": "SUMMARY", "end_epoch_millis": end},
    )
    assert resp.status_code == 400 and "end_epoch_millis" in resp.json()["error"]


def test_import_with_millisecond_timestamps_is_400_saying_so(client):
    body = b"# TYPE a counter\nbaseten_inference_requests_total 1 1767225600000\n# EOF\n"
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=_h(MANAGE),
    )
    assert resp.status_code == 400 and "seconds, not milliseconds" in resp.json()["error"]


def test_import_bucket_with_bad_le_is_400(client):
    body = (
        b'# TYPE x histogram\nx_bucket{le="abc"} 1 1767225600\nx_bucket{le="+Inf"} 1 1767225600\n'
        b"x_count 1 1767225600\nx_sum 1 1767225600\n# EOF\n"
    )
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=_h(MANAGE),
    )
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"].endswith("line 2: sample x_bucket: bucket bound le='abc' is not a number")


def test_samples_far_in_the_future_are_refused(client):
    """The service's clock is T0 + 600 s: 10 minutes ahead of it is refused, nothing stored."""
    future = _rw("m1", "d1", [(0, 1), (600 + 601, 2)])
    resp = client.post("/api/v1/write", content=future, headers=_h(MANAGE))
    assert resp.status_code == 400 and "in the future" in resp.json()["error"]
    body = f"# TYPE a counter\nbaseten_inference_requests_total 1 {T0 / 1000 + 1300:.0f}\n# EOF\n".encode()
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=_h(MANAGE),
    )
    assert resp.status_code == 400 and "in the future" in resp.json()["error"]
    params = {"mode": "SUMMARY", "metrics": REQ}
    got = client.get("/v1/models/m1/deployments/d1/metrics", headers=_h(READ), params=params).json()
    assert got["metric_descriptors"] == []


def test_a_start_removes_the_import_spools_a_kill_left_and_nothing_else(tmp_path):
    names = ["import-spool-abc123.om", "import-spool-x.om", "tmpabc.om", "backfill.om", "samples.duckdb"]
    for name in names:
        (tmp_path / name).write_text("x")
    assert remove_import_spools(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backfill.om", "samples.duckdb", "tmpabc.om"]


def test_remote_write_bucket_bounds_are_normalised_and_series_that_become_one_merge():
    """le="1" and le="1.0" are one series once normalised (exposition.normalise_le); "+inf" is "+Inf"."""
    name = "baseten_end_to_end_response_time_seconds_bucket"
    rows = [
        Sample(name, labels_of({"le": "1"}), 2.0, T0),
        Sample(name, labels_of({"le": "1.0"}), 5.0, T0 + 15_000),
        Sample(name, labels_of({"le": "+inf"}), 7.0, T0),
    ]
    got = _checked_buckets(SampleBatch.from_samples(rows))
    assert got.series == [(name, (("le", "1.0"),)), (name, (("le", "+Inf"),))]
    assert got.series_index.tolist() == [0, 0, 1] and got.values.tolist() == [2.0, 5.0, 7.0]
