"""The trainer endpoints over HTTP (in-process app, DuckDB store file, YAML ``loops`` section): the
metrics POST against the hand-computed data set, listing, the sampler link, auth, 404 and 400s."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.types import labels_of
from tests.apptools import auth, build_app, org
from tests.conftest import schema_validator
from tests.loops import data
from tests.query.helpers import T0, at

KEY, SCOPED, OTHER_SCOPE, INVOKE, OTHER_ORG = "k-manage", "k-export-m1", "k-export-m9", "k-invoke", "k-other"
URL = "/v1/loops/deployments/t1/metrics"
WINDOW = {"start_epoch_millis": T0, "end_epoch_millis": at(120), "step_seconds": 30}
VALIDATOR = schema_validator("GetLoopsDeploymentMetricsResponseV1")


def trainer(trainer_id: str, org: str, sampler: dict | None) -> dict:
    target = {"url": data.REQUEST_URL, "kind": "requests"}
    return {
        "id": trainer_id,
        "name": f"trainer {trainer_id}",
        "organization": org,
        "sampler": sampler,
        "nodes": [
            {"id": "worker-1", "role": "worker", "gpu_ranks": [0, 1]},
            {
                "id": "leader-0",
                "role": "leader",
                "gpu_ranks": [0, 1],
                "pod": "trainer-0",
                "namespace": "loops",
                "targets": [target, {"url": "http://10.0.0.1:9400/metrics", "kind": "dcgm"}],
            },
        ],
    }


def declarations(**extra):
    keys = {
        KEY: "WORKSPACE_MANAGE_ALL",
        SCOPED: "WORKSPACE_EXPORT_METRICS",
        OTHER_SCOPE: "WORKSPACE_EXPORT_METRICS",
        INVOKE: "WORKSPACE_INVOKE",
    }
    return {
        **extra,
        "organizations": [
            org("acme", keys, scoped={SCOPED: ["m1"], OTHER_SCOPE: ["m9"]}),
            org("other", {OTHER_ORG: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {"id": "m1", "organization": "acme", "deployments": [{"id": "sampler-d1"}]},
            {"id": "m9", "organization": "acme"},
            {"id": "mx", "organization": "other"},
        ],
        "loops": [
            trainer("t1", "acme", {"model": "m1", "deployment": "sampler-d1"}),
            trainer("t2", "acme", None),
            trainer("tx", "other", {"model": "mx"}),
        ],
    }


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    store = data.load(DuckDBStore(tmp_path / "samples.duckdb"))
    app = build_app(tmp_path, declarations(), gateway=False, clock=lambda: at(120), store=store)
    with TestClient(app) as c:
        yield c


def post(client, url=URL, body=None, key=KEY, **kw):
    headers = auth(key, "Bearer") if key else {}
    return client.post(url, json=body, headers=headers, **kw)


def test_metrics_match_the_hand_computed_data_and_the_spec(client):
    resp = post(client, body={**WINDOW, "time_divisor_seconds": 60})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    VALIDATOR.validate(body)
    m = body["metrics"]
    assert body["deployment_id"] == "t1"
    assert [p["value"] for p in m["inference_volume"]] == pytest.approx([138.0, 0, 0, 0])  # 2.3/s x 60
    assert m["response_time_stats"][0]["p50"] == pytest.approx(245.0)
    # the leader's pod: 3.5 cores; [90, 120): pair (90, 105] only: 52.5 CPU-s / 30 s = 1.75
    assert [p["value"] for p in m["cpu_usage"]] == pytest.approx([3.5, 3.5, 3.5, 1.75])
    # nodes: the leader first although the config lists the worker first; the worker has gaps
    assert [n["node_id"] for n in m["per_node_metrics"]] == ["leader-0", "worker-1"]
    assert len(m["per_node_metrics"][1]["cpu_usage"]) == 2
    assert m["gpu_memory_usage_bytes"]["1"][0] == {"value": 536870912.0, "timestamp": "2026-01-01T00:00:00Z"}


def test_no_body_means_the_last_hour_per_second(client):
    body = post(client, body=None).json()
    VALIDATOR.validate(body)
    # now = T0 + 120 s: window [T0 - 3480 s, T0 + 120 s), 30 s steps = 120 points of latency stats
    stats = body["metrics"]["response_time_stats"]
    assert len(stats) == 120 and stats[0]["timestamp"] == "2025-12-31T23:02:00Z"
    # volumes start where the request series do: the samples at T0 - 15 s and T0 (both 0) give
    # [T0 - 30 s, T0) the pair (-15, 0] (0 -> 0, and nothing before -15 s): 0 req/s; then
    # [T0, T0 + 30 s): the pair (0, 15] holds 69 requests / 30 s = 2.3
    volume = body["metrics"]["inference_volume"]
    assert volume[:2] == [
        {"value": 0.0, "timestamp": "2025-12-31T23:59:30Z"},
        {"value": pytest.approx(2.3), "timestamp": "2026-01-01T00:00:00Z"},
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"step_seconds": 0}, "step_seconds: Input should be greater than or equal to 1"),
        ({"time_divisor_seconds": -60}, "time_divisor_seconds: Input should be greater than or equal to 1"),
        ({"step_seconds": "30s"}, "step_seconds: Input should be a valid integer"),
        (
            {"step_seconds": 15, "start_epoch_millis": T0, "end_epoch_millis": T0 + 7 * 86_400_000},
            "step_seconds=15 gives 40320 points over this window; at most 11000 are allowed: "
            "use step_seconds >= 55, a shorter window, or omit step_seconds",
        ),
        (
            {"step_seconds": 1, "start_epoch_millis": T0, "end_epoch_millis": at(120)},
            "step_seconds=1 is shorter than the scrape interval (15 s)",
        ),
        ({"start_epoch_millis": at(120), "end_epoch_millis": T0}, "must be earlier than end_epoch_millis"),
        ({"start_epoch_millis": T0 // 1000}, "looks like seconds"),
        ({"step": 30}, "step: unknown field; remove it"),
    ],
)
def test_bad_values_are_400_saying_what_to_fix(client, body, message):
    resp = post(client, body=body)
    assert resp.status_code == 400
    assert message in resp.json()["error"]


def test_the_body_is_json_whatever_its_content_type(client):
    # the spec's curl example sends the body with --data: application/x-www-form-urlencoded
    form = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/x-www-form-urlencoded"}
    resp = client.post(
        URL,
        content=b'{"step_seconds": 30, "start_epoch_millis": %d, "end_epoch_millis": %d}' % (T0, at(120)),
        headers=form,
    )
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["metrics"]["response_time_stats"]) == 4
    for body, message in (
        (b"null", None),
        (b"", None),
        (b"[]", "must be a JSON object"),
        (b"{x", "not valid JSON"),
    ):
        resp = client.post(URL, content=body, headers=form)
        assert resp.status_code == (200 if message is None else 400), body
        if message:
            assert message in resp.json()["error"]


def test_unknown_trainer_is_404_before_the_body_is_read(client):
    assert post(client, url=URL.replace("t1", "nope"), body={"step_seconds": 0}).status_code == 404


def test_unknown_or_other_organizations_trainer_is_404(client):
    for url in (URL.replace("t1", "nope"), URL.replace("t1", "tx")):
        resp = post(client, url=url, body=WINDOW)
        assert resp.status_code == 404
        assert "GET /v1/loops/deployments" in resp.json()["error"]
    assert post(client, url=URL.replace("t1", "t1"), key=OTHER_ORG).status_code == 404


def test_auth(client):
    assert post(client, key=None).status_code == 401
    assert post(client, key="wrong").status_code == 401
    assert post(client, key=INVOKE).status_code == 403
    assert post(client, key=SCOPED, body=WINDOW).status_code == 200  # scoped to the sampler's model
    assert post(client, key=OTHER_SCOPE, body=WINDOW).status_code == 404
    resp = client.post(URL, json=WINDOW, headers={"Authorization": f"Api-Key {KEY}"})
    assert resp.status_code == 200


def test_list_shows_the_organizations_trainers_with_nodes_and_sampler(client):
    body = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {KEY}"}).json()
    assert [d["id"] for d in body["deployments"]] == ["t1", "t2"]
    t1 = body["deployments"][0]
    dep = client.get("/v1/models/m1/deployments/sampler-d1", headers={"Authorization": f"Api-Key {KEY}"})
    sampler = t1["sampler"]
    assert (sampler.pop("created_at"), sampler.pop("instance_type")["name"]) == (
        dep.json()["created_at"],
        dep.json()["instance_type_name"],
    )
    assert sampler == {
        "id": "sampler-d1",
        "base_url": "",
        "base_model": "",
        "model_id": "m1",
        "deployment_id": "sampler-d1",
        "status": {"name": dep.json()["status"]},
        "user": {"email": None},
        "metrics_url": "/v1/models/m1/deployments/sampler-d1/metrics",
    }
    assert (t1["status"], t1["user"], t1["base_model"], t1["base_url"], t1["node_count"]) == (
        {"name": "CREATED"},
        {"email": None},
        "",
        "",
        2,
    )
    assert t1["instance_type"] == {
        "id": "",
        "name": "",
        "memory_limit_mib": 0,
        "millicpu_limit": 0,
        "gpu_count": 2,  # the leader's two declared ranks
        "gpu_type": None,
        "gpu_memory_limit_mib": None,
    }
    assert body["deployments"][1]["sampler"] is None
    assert t1["metrics_url"] == URL
    assert [(n["node_id"], n["role"], n["gpu_ranks"]) for n in t1["nodes"]] == [
        ("leader-0", "leader", [0, 1]),
        ("worker-1", "worker", [0, 1]),
    ]
    assert t1["nodes"][0]["targets"][0] == {"url": data.REQUEST_URL, "kind": "requests"}
    scoped = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {SCOPED}"}).json()
    assert [d["id"] for d in scoped["deployments"]] == ["t1"]  # t2 has no sampler model in scope
    other = client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {OTHER_ORG}"}).json()
    assert [d["id"] for d in other["deployments"]] == ["tx"]
    tx = other["deployments"][0]["sampler"]  # a model without a deployment: no status to report
    assert (tx["id"], tx["deployment_id"], tx["status"], tx["metrics_url"]) == (
        "mx",
        None,
        {"name": "UNKNOWN"},
        None,
    )
    org_wide = client.get("/v1/loops/deployments?scope=org", headers={"Authorization": f"Api-Key {KEY}"})
    assert (
        org_wide.json()
        == client.get("/v1/loops/deployments", headers={"Authorization": f"Api-Key {KEY}"}).json()
    )
    bad = client.get("/v1/loops/deployments?scope=me", headers={"Authorization": f"Api-Key {KEY}"})
    assert (bad.status_code, bad.json()) == (400, {"error": "scope must be 'org' or left out, not 'me'"})


def test_the_sampler_model_links_back_to_its_trainers(client):
    headers = {"Authorization": f"Api-Key {KEY}"}
    body = client.get("/v1/models/m1/loops_deployments", headers=headers).json()
    assert [d["id"] for d in body["deployments"]] == ["t1"]
    assert client.get("/v1/models/m9/loops_deployments", headers=headers).json() == {"deployments": []}
    one = client.get("/v1/loops/deployments/t1", headers=headers).json()
    assert list(one) == ["deployment"] and one["deployment"]["sampler"]["model_id"] == "m1"


def test_openapi_documents_the_per_rank_shape_and_the_body(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/v1/loops/deployments/{deployment_id}/metrics"]["post"]
    assert 'Keyed by GPU rank as a string ("0", "1"' in op["description"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {
        "start_epoch_millis",
        "end_epoch_millis",
        "step_seconds",
        "time_divisor_seconds",
    }


# -- step and scrape interval ----------------------------------------------------------------------

CPU = "baseten_container_cpu_usage_seconds_total"
TEN_MINUTES = {"start_epoch_millis": T0, "end_epoch_millis": at(600)}


def _client_scraping_every(tmp_path, interval: str, samples) -> TestClient:
    store = DuckDBStore(tmp_path / "samples.duckdb")
    store.append(SampleBatch.from_samples(samples))
    every = declarations(scrape_interval=interval, scrape_timeout="1s")
    return TestClient(build_app(tmp_path, every, gateway=False, clock=lambda: at(600), store=store))


def _leader_cpu(every_s: int, cores: float) -> list[Sample]:
    """The leader pod's CPU counter sampled every ``every_s`` s from T0 - every_s to T0 + 600 s."""
    lab = labels_of(
        {
            "deployment_id": "t1",
            "node_id": "leader-0",
            "pod": "trainer-0",
            "namespace": "loops",
            "container": "trainer",
            "source": "cadvisor",
        }
    )
    return [Sample(CPU, lab, cores * t, at(t)) for t in range(-every_s, 600, every_s)]


def test_a_step_below_the_scrape_interval_is_400_not_gauge_gaps(tmp_path):
    # regression: 5 s scrapes, step 1 s: four of five points had no sample, the fifth a 5 s increase / 1 s
    # (0.5 cores read as 2.5). Now a 400 naming the minimum; step 5 s gives 0.5 cores in each of 120 points
    with _client_scraping_every(tmp_path, "5s", _leader_cpu(5, 0.5)) as c:
        resp = post(c, body={**TEN_MINUTES, "step_seconds": 1})
        assert resp.status_code == 400
        assert resp.json() == {
            "error": "step_seconds=1 is shorter than the scrape interval (5 s): most points would hold no "
            "sample of the gauges (memory, GPU, utilisation), only gaps; use step_seconds >= 5, "
            "or omit step_seconds"
        }
        assert post(c, body={**TEN_MINUTES, "step_seconds": 4}).status_code == 400
        resp = post(c, body={**TEN_MINUTES, "step_seconds": 5})
        assert resp.status_code == 200, resp.text
        VALIDATOR.validate(resp.json())
        cpu = resp.json()["metrics"]["cpu_usage"]
        # samples at -5, 0, 5, ..., 595 s: every 5 s point [t, t + 5) gets the pair (t, t + 5] whole,
        # 0.5 x 5 = 2.5 CPU-s: 2.5 / 5 = 0.5 cores; the last, [595, 600), holds the last sample (595 s)
        # and no pair (nothing extrapolated past it): no data, so the point is left out (never a 0)
        assert len(cpu) == 119 and [p["value"] for p in cpu] == [0.5] * 119
        assert cpu[1]["timestamp"] == "2026-01-01T00:00:05Z"


def test_the_derived_step_is_raised_to_a_ladder_rung_above_a_long_scrape_interval(tmp_path):
    # 45 s scrapes: the 10-minute window's ladder step (30 s) would leave every third point empty;
    # the derived step is 60 s (the rung above 45 s): ten points
    with _client_scraping_every(tmp_path, "45s", _leader_cpu(45, 2.0)) as c:
        resp = post(c, body=TEN_MINUTES)
        assert resp.status_code == 200, resp.text
        VALIDATOR.validate(resp.json())
        stats = resp.json()["metrics"]["response_time_stats"]
        assert [p["timestamp"] for p in stats[:3]] == [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:01:00Z",
            "2026-01-01T00:02:00Z",
        ]
        assert len(stats) == 10
        # samples at -45, 0, 45, ..., 585 s: each 45 s pair spreads 90 CPU-s (2 cores) over its interval.
        # [0, 60): (0, 45] whole (90) + 15 s of (45, 90] (30) = 120 / 60 = 2.0; [60, 120): 30 s of
        # (45, 90] (60) + 30 s of (90, 135] (60) = 2.0; [120, 180): 15 s of (90, 135] (30) + (135, 180]
        # (90) = 2.0; the pattern repeats every 180 s up to [480, 540) = 2.0; [540, 600): (540, 585]
        # only (the last sample is at 585 s): 90 / 60 = 1.5
        cpu = resp.json()["metrics"]["cpu_usage"]
        assert [p["value"] for p in cpu] == pytest.approx([2.0] * 9 + [1.5])
        resp = post(c, body={**TEN_MINUTES, "step_seconds": 30})
        assert resp.status_code == 400
        assert "use step_seconds >= 45, or omit step_seconds" in resp.json()["error"]


# -- body size and nesting ---------------------------------------------------------------------------

FIELDS = "start_epoch_millis, end_epoch_millis, step_seconds, time_divisor_seconds"
OBJECT = (
    f'the request body must be a JSON object with any of the fields {FIELDS}, e.g. {{"step_seconds": 60}}'
)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 30_000 + b"]" * 30_000,
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"step_seconds": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    ],
    ids=["arrays", "objects", "in-a-field"],
)
def test_a_deeply_nested_body_is_a_400_not_a_500(client, body):
    # regression: RecursionError from json.loads gave a plain-text 500
    assert len(body) <= 65_536
    resp = client.post(URL, content=body, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 400
    assert resp.json() == {"error": OBJECT + "; this body is nested too deeply to parse"}


def test_a_body_over_64_kib_is_413(client):
    nested = b"[" * 100_000 + b"]" * 100_000  # the tester's body: refused before it is parsed
    resp = client.post(URL, content=nested, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 413
    assert resp.json() == {
        "error": f"the request body is 200000 bytes; at most 65536 are allowed: send a JSON object with any "
        f"of the fields {FIELDS}"
    }
    # without Content-Length (chunked): reading stops at the first chunk past 64 KiB
    chunks = iter([b" " * 40_000, b" " * 40_000, b"{}"])
    resp = client.post(URL, content=chunks, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 413
    assert resp.json()["error"].startswith("the request body is more than 65536 bytes; at most 65536 are")
    padded = b" " * (65_536 - 2) + b"{}"  # exactly 64 KiB is accepted
    assert client.post(URL, content=padded, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


# -- query parameters and echoed ids ---------------------------------------------------------------


def test_the_metrics_post_takes_no_query_parameters(client):
    # regression: ?step_seconds=1&bogus=1 answered 200 with the defaults
    resp = post(client, url=URL + "?step_seconds=1&bogus=1", body=WINDOW)
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "unknown query parameter(s): bogus, step_seconds; this endpoint takes no query "
        f"parameters; send the fields in the JSON body: {FIELDS}"
    }


@pytest.mark.parametrize(
    "path", ["/v1/loops/deployments", "/v1/loops/deployments/t1", "/v1/models/m1/loops_deployments"]
)
def test_the_listing_routes_take_no_query_parameters_but_scope(client, path):
    resp = client.get(path, params={"bogus": "1"}, headers={"Authorization": f"Api-Key {KEY}"})
    assert resp.status_code == 400
    takes = "scope" if path == "/v1/loops/deployments" else "no query parameters"  # the platform's scope
    assert resp.json() == {"error": f"unknown query parameter(s): bogus; this endpoint takes {takes}"}


def test_a_long_unknown_trainer_id_is_cut_in_the_404(client):
    long_id = "x" * 5_000
    expected = {
        "error": f"no trainer deployment '{'x' * 100}…'; list your trainer deployments with "
        "GET /v1/loops/deployments"
    }
    resp = post(client, url=f"/v1/loops/deployments/{long_id}/metrics", body=WINDOW)
    assert resp.status_code == 404 and resp.json() == expected
    resp = client.get(f"/v1/loops/deployments/{long_id}", headers={"Authorization": f"Api-Key {KEY}"})
    assert resp.status_code == 404 and resp.json() == expected
    # an id of exactly 100 characters is echoed whole
    resp = post(client, url=f"/v1/loops/deployments/{'y' * 100}/metrics", body=WINDOW)
    assert resp.json()["error"].startswith(f"no trainer deployment '{'y' * 100}';")
