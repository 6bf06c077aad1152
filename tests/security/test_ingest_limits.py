"""Issue 12 part 4 (push side): samples per remote_write and import request, and active series per
organization, through the whole app (``serve``: a ``TestClient`` over a ``MemoryStore``). A request over
its sample limit is a 413 and stores nothing; a series new to an organization at its active-series limit
is refused (its samples counted in the service's own metrics), series already active keep being stored,
and other organizations are not affected."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from servemetrics.api.series_limit import ActiveSeries
from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.apptools import auth, org
from tests.query.helpers import T0, at

MANAGE, OTHER = "limits-manage", "limits-other"
REQ = "baseten_inference_requests_total"
LIMITS = {"remote_write_samples": 5, "import_samples": 4, "series_per_organization": 3}


@pytest.fixture
def app(serve: Serve) -> tuple[TestClient, MemoryStore]:
    models = [
        {"id": "m1", "organization": "acme", "deployments": [{"id": "d1"}]},
        {"id": "m2", "organization": "other", "deployments": [{"id": "x1"}]},
    ]
    store = MemoryStore()
    orgs = [org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL"}), org("other", {OTHER: "WORKSPACE_MANAGE_ALL"})]
    client = serve(
        {"organizations": orgs, "models": models, "limits": LIMITS}, clock=lambda: at(600), store=store
    )
    return client, store


def _rw(model: str, dep: str, codes: list[str], points: int = 1) -> bytes:
    return encode_write_request(
        [
            Sample(REQ, labels_of({"model_id": model, "deployment_id": dep, "status_code": c}), i, at(15 * i))
            for c in codes
            for i in range(points)
        ]
    )


def _write(client: TestClient, key: str, body: bytes) -> int:
    return client.post("/api/v1/write", content=body, headers=auth(key, "Bearer")).status_code


def _samples(store: MemoryStore) -> int:
    return store.stats().samples


def test_remote_write_over_its_sample_limit_is_a_413_and_stores_nothing(app) -> None:
    client, store = app
    resp = client.post("/api/v1/write", content=_rw("m1", "d1", ["200"], 6), headers=auth(MANAGE, "Bearer"))
    assert resp.status_code == 413
    assert resp.json() == {
        "error": "the request holds 6 samples; this path takes at most 5 samples per request "
        "(limits.remote_write_samples in the service's config file); send them in smaller requests"
    }
    assert _samples(store) == 0
    assert _write(client, MANAGE, _rw("m1", "d1", ["200"], 5)) == 204
    assert _samples(store) == 5


def _import(client: TestClient, lines: list[str]) -> tuple[int, dict[str, object]]:
    body = ("# TYPE a counter\n# HELP a requests\n" + "\n".join(lines) + "\n\n# EOF\n").encode()
    resp = client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body,
        headers=auth(MANAGE, "Bearer"),
    )
    return resp.status_code, resp.json()


def test_import_over_its_sample_limit_is_a_413_and_stores_nothing(app) -> None:
    client, store = app
    lines = [f'{REQ}{{status_code="200"}} {i} {T0 // 1000 + 15 * i}' for i in range(5)]
    status, body = _import(client, lines)
    assert status == 413
    assert body == {
        "error": "the request holds 5 samples; this path takes at most 4 samples per request "
        "(limits.import_samples in the service's config file); send them in smaller requests"
    }
    assert _samples(store) == 0
    assert _import(client, lines[:4]) == (200, {"samples": 4, "batches": 1})


def test_new_series_beyond_the_organizations_limit_are_refused(app, caplog) -> None:
    client, store = app
    with caplog.at_level(logging.WARNING, logger="servemetrics.api.series_limit"):
        assert _write(client, MANAGE, _rw("m1", "d1", ["200", "201"])) == 204
        assert _write(client, MANAGE, _rw("m1", "d1", ["200", "202", "203", "204"])) == 204
        assert _write(client, MANAGE, _rw("m1", "d1", ["205"])) == 204
    # 200, 201, 202 are the 3 active series; 203, 204, 205 refused; 200 twice at ts 0 is one sample
    assert sorted(dict(lab)["status_code"] for (_name, lab) in store._series) == ["200", "201", "202"]
    assert _samples(store) == 3
    own = generate_latest(client.app.state.service.metrics.registry).decode()  # tenant labels: in-process
    assert 'servemetrics_series_limit_refused_samples_total{organization="acme"} 3.0' in own
    public = client.get("/service/metrics").text  # the organization summed away
    assert "servemetrics_series_limit_refused_samples_total 3.0" in public and "acme" not in public
    (line,) = [r.getMessage() for r in caplog.records]  # once a minute: the third write is not logged
    assert line.startswith(
        "organization acme is at its limit of 3 active series (limits.series_per_organization); refused 2 "
        "samples of 2 new series, e.g. baseten_inference_requests_total{"
    )
    assert _write(client, OTHER, _rw("m2", "x1", ["200", "201", "202"])) == 204  # another organization
    assert _samples(store) == 6


def test_series_are_active_for_an_hour() -> None:
    now = [T0]
    limit = ActiveSeries(2, {"m1": "acme"}.get, lambda: now[0])

    def batch(*codes: str) -> SampleBatch:
        lab = [labels_of({"model_id": "m1", "status_code": c}) for c in codes]
        return SampleBatch.from_samples(Sample(REQ, x, 1.0, now[0]) for x in lab)

    assert len(limit.admit(batch("a", "b"))) == 2
    assert [k[1] for k in limit.admit(batch("c", "a")).series] == [batch("a").series[0][1]]
    assert limit.active("acme") == 2
    now[0] += 3_600_000 - 1
    assert len(limit.admit(batch("b"))) == 1  # b seen again; a is now 1 ms short of an hour old
    now[0] += 1
    assert limit.active("acme") == 1
    assert len(limit.admit(batch("c"))) == 1  # a is forgotten: room for c
    assert len(limit.admit(SampleBatch.from_samples([Sample(REQ, labels_of({"x": "1"}), 1.0, T0)]))) == 1
