"""The gateway on real processes: `servemetrics serve` in front of examples/replica.py subprocesses.

Deployments of m1 (acme): d1 (r1, r2) serves production, d2 (r1) is promoted into it, d3 and d4 (one
replica each) test backpressure, d5 (r1, r2) tests health, d6 serves ``staging`` for the metrics API.
m2 belongs to another organization.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.apptools import auth as _auth
from tests.processes import (
    free_port,
    promoted,
    replicas_deployment,
    start_replicas,
    start_service,
    stop,
    theirs,
    two_organizations,
    wait_for_scrapes,
    wait_http,
    wait_until,
    write_service_config,
)

pytestmark = pytest.mark.e2e
MANAGE, INVOKE, EXPORT, OTHER = "gw-manage", "gw-invoke-m1", "gw-export", "gw-other-org"
Service = tuple[str, list[str], Path]


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("gateway")
    ports, procs = start_replicas(tmp, 6, token_ms=40)
    m = [f"http://127.0.0.1:{p}/metrics" for p in ports]
    sport = free_port()
    organizations = two_organizations(MANAGE, INVOKE, OTHER, {EXPORT: "WORKSPACE_EXPORT_METRICS"})
    deployments = [
        replicas_deployment("d1", [m[0], m[1]]),
        replicas_deployment("d2", [m[2]]),
        replicas_deployment("d3", [m[3]]),
        replicas_deployment("d4", [m[3] + "?d4"]),
        replicas_deployment("d5", [m[4], m[5]]),
        replicas_deployment("d6", [m[3] + "?d6"]),
    ]
    models = [
        {
            "id": "m1",
            "name": "gw",
            "organization": "acme",
            "deployments": deployments,
            "environments": [promoted("production", "d1"), promoted("staging", "d6")],
        },
        theirs(replicas_deployment("x1", [m[3] + "?x1"])),
    ]
    write_service_config(tmp, sport, organizations, models)
    service = start_service(tmp)
    base = f"http://127.0.0.1:{sport}"
    try:
        for p in ports:
            wait_http(f"http://127.0.0.1:{p}/health")
        wait_http(f"{base}/healthz")
        deadline = time.monotonic() + 20
        while sum(gauge(base, "baseten_replicas_active").values()) < 9 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gauge(base, "baseten_replicas_active") == {
            f"d{i}": n for i, n in enumerate([2, 1, 1, 1, 2, 1], 1)
        } | {"x1": 1}
        yield base, [f"http://127.0.0.1:{p}" for p in ports], tmp
    finally:
        stop(service)
        for p in procs:
            stop(p)


def _families(base: str, keys: tuple[str, ...] = (MANAGE, OTHER)) -> dict[str, list]:
    """The gateway's families as ``keys`` read them (one per organization: each sees its own models)."""
    out: dict[str, list] = {}
    for key in keys:
        text = httpx.get(f"{base}/gateway/metrics", headers=_auth(key)).text
        for f in text_string_to_metric_families(text):
            out.setdefault(f.name, []).extend(f.samples)
    return out


def gauge(base: str, name: str, keys: tuple[str, ...] = (MANAGE, OTHER)) -> dict[str, float]:
    """deployment id -> value of a gateway gauge, as ``keys`` read them."""
    return {s.labels["deployment_id"]: s.value for s in _families(base, keys).get(name, [])}


def hist_sum_count(base: str, name: str, dep: str) -> tuple[float, float]:
    samples = _families(base)[name]
    total = sum(s.value for s in samples if s.name == f"{name}_sum" and s.labels["deployment_id"] == dep)
    count = sum(s.value for s in samples if s.name == f"{name}_count" and s.labels["deployment_id"] == dep)
    return total, count


def predict(base: str, path: str, key: str = INVOKE, **params: object) -> httpx.Response:
    return httpx.post(f"{base}{path}", headers=_auth(key), params=params, content=b'{"x": 1}', timeout=30)


def test_streamed_latency_matches_the_client_and_ttfb_is_earlier(svc):
    base = svc[0]
    path = "/v1/models/m1/deployment/d2/predict"
    e2e0, n0 = hist_sum_count(base, "baseten_end_to_end_response_time_seconds", "d2")
    ttfb0, _ = hist_sum_count(base, "baseten_time_to_first_byte_seconds", "d2")
    with httpx.Client(headers=_auth(INVOKE)) as client:
        client.post(f"{base}{path}", params={"tokens": 1}).raise_for_status()  # warm the connection
        e2e0, n0 = hist_sum_count(base, "baseten_end_to_end_response_time_seconds", "d2")
        ttfb0, _ = hist_sum_count(base, "baseten_time_to_first_byte_seconds", "d2")
        started = time.perf_counter()
        with client.stream("POST", f"{base}{path}", params={"tokens": 5}, content=b"{}") as resp:
            chunks = []
            for chunk in resp.iter_raw():
                if not chunks:
                    client_ttfb = time.perf_counter() - started
                chunks.append(chunk)
        client_e2e = time.perf_counter() - started
    assert resp.status_code == 200 and resp.headers["x-servemetrics-deployment-id"] == "d2"
    # one Server and one Date: ours; the replica's own are not relayed beside them
    assert [len(resp.headers.get_list(h)) for h in ("server", "date")] == [1, 1], resp.headers
    assert len(chunks) >= 2  # streamed, not buffered into one body
    e2e1, n1 = hist_sum_count(base, "baseten_end_to_end_response_time_seconds", "d2")
    ttfb1, _ = hist_sum_count(base, "baseten_time_to_first_byte_seconds", "d2")
    gw_e2e, gw_ttfb = e2e1 - e2e0, ttfb1 - ttfb0
    assert n1 - n0 == 1
    # the gateway's intervals lie inside the client's (it sees the request after the client sent it and
    # the last byte before the client reads it; one monotonic clock), and the replica streams 4 more
    # tokens 40 ms apart after the first: a loaded machine widens the client's side only
    assert 0.16 <= gw_e2e <= client_e2e + 0.001, (client_e2e, gw_e2e)
    assert gw_ttfb <= client_ttfb + 0.001 and gw_ttfb < gw_e2e - 0.15, (client_ttfb, gw_ttfb, gw_e2e)


def _split(base: str, n: int) -> dict[str, int]:
    def one(_: int) -> str:
        r = predict(base, "/v1/models/m1/environments/production/predict", tokens=1)
        assert r.status_code == 200, r.text
        return r.headers["x-servemetrics-deployment-id"]

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(one, range(n)))
    return {d: got.count(d) for d in sorted(set(got))}


def _control(base: str, action: str, body: dict[str, object] | None = None) -> None:
    url = f"{base}/v1/models/m1/environments/production/{action}"
    r = httpx.post(url, headers=_auth(MANAGE), json=body) if body else httpx.post(url, headers=_auth(MANAGE))
    assert r.status_code < 300, r.text


def test_rolling_promotion_splits_traffic_and_controls_act_at_once(svc):
    base = svc[0]
    assert _split(base, 20) == {"d1": 20}
    _control(base, "promote", {"deployment_id": "d2", "percent": 50})
    split = _split(base, 200)  # 200 answered 200: none lost
    assert sum(split.values()) == 200 and abs(split["d2"] - 100) <= 29, split  # 4 sd of Binomial(200, 0.5)
    _control(base, "pause_promotion")
    assert set(_split(base, 40)) == {"d1", "d2"}  # paused: the split holds (P(one side only) < 1e-11)
    _control(base, "force_roll_forward_promotion")
    assert _split(base, 40) == {"d2": 40}
    _control(base, "promote", {"deployment_id": "d1", "percent": 50})
    _control(base, "cancel_promotion")
    assert _split(base, 40) == {"d2": 40}


def _set_policy(base: str, dep: str, policy: str | None) -> None:
    r = httpx.patch(
        f"{base}/v1/models/m1/deployments/{dep}/request_backpressure_settings",
        headers=_auth(MANAGE),
        json={"policy": policy},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"policy": policy, "request_backpressure_settings": {"policy": policy}}


def test_reject_on_full_answers_429_with_retry_after(svc):
    base = svc[0]
    _set_policy(base, "d3", "REJECT_ON_FULL")  # acts at once: the change drops the gateway's cache
    path = "/v1/models/m1/deployment/d3/predict"
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(predict, base, path, delay_ms=1500)
        wait_until(lambda: gauge(base, "baseten_concurrent_requests").get("d3", 0) >= 1, "the slow request")
        rejected = predict(base, path)
        assert slow.result().status_code == 200
    assert rejected.status_code == 429
    body = rejected.json()
    assert body["retry_after"] >= 1 and rejected.headers["retry-after"] == str(body["retry_after"])
    assert "capacity" in body["error"]
    bad = httpx.patch(
        f"{base}/v1/models/m1/deployments/d3/request_backpressure_settings",
        headers=_auth(MANAGE),
        json={"policy": "DROP"},
    )
    assert 400 <= bad.status_code < 500


FIRST_MS = 10_000
"""How long the first request of the queue test holds d4's one slot: the three others queue behind it
meanwhile, each sent once the gateway counts the one before (3 s ran out on a loaded machine)."""


def _at_d4(base: str, done: list[tuple[int, float]]) -> float | None:
    """The gateway's in-flight plus queued count of d4; AssertionError once the first request ended."""
    assert not done, f"the first request ended before the others queued: lengthen FIRST_MS ({FIRST_MS})"
    return gauge(base, "baseten_concurrent_requests").get("d4")


def test_queue_on_full_queues_in_order_and_completes(svc):
    """Capacity of d4: concurrency_target 1 x 1 replica. A long first request holds it; three more, each
    sent once the gateway counts the previous one, queue behind it and are served one at a time in the
    order they came. Only conditions and lower bounds: a busy machine makes it slower, never wrong."""
    base = svc[0]
    path = "/v1/models/m1/deployment/d4/predict"
    done: list[tuple[int, float]] = []

    def send(i: int, delay_ms: int) -> httpx.Response:
        resp = predict(base, path, delay_ms=delay_ms, tokens=1)
        done.append((i, time.perf_counter()))
        return resp

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(send, 0, FIRST_MS)]
        for i in range(1, 4):
            wait_until(lambda i=i: _at_d4(base, done) == i, f"{i} at d4")
            futures.append(pool.submit(send, i, 200))
        wait_until(lambda: _at_d4(base, done) == 4, "4 at d4")
        results = [f.result() for f in futures]
    assert [r.status_code for r in results] == [200] * 4
    # in the order they came and one at a time, by the replica's clock (taken before its sleep): each
    # began at least the previous one's delay after it. The clients' own end times are no evidence: on a
    # busy machine their threads wait for a core and their times bunch up or swap.
    began = [float(r.headers["x-replica-started"]) for r in results]
    gaps = [b - a for a, b in zip(began, began[1:], strict=False)]
    assert all(g >= d - 1e-5 for g, d in zip(gaps, (FIRST_MS / 1000, 0.2, 0.2), strict=True)), gaps


def test_a_replica_failing_health_stops_receiving_traffic(svc):
    base, replicas, _ = svc
    httpx.post(f"{replicas[5]}/health", params={"healthy": 0}).raise_for_status()
    deadline = time.monotonic() + 15
    while gauge(base, "baseten_replicas_active").get("d5") != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gauge(base, "baseten_replicas_active")["d5"] == 1
    got = {predict(base, "/v1/models/m1/deployment/d5/predict", tokens=1).headers["x-servemetrics-replica"]
           for _ in range(20)}  # fmt: skip
    assert got == {"r1"}
    events = httpx.get(
        f"{base}/v1/models/m1/events", headers=_auth(MANAGE), params={"kinds": "REPLICA_TERMINATED"}
    ).json()["events"]
    assert [(e["deployment_id"], e["details"]["replica"], e["details"]["status"]) for e in events] == [
        ("d5", "r2", "FAILED")
    ]


def test_auth_tenancy_and_the_host_form(svc):
    base = svc[0]
    assert predict(base, "/v1/models/m2/deployment/x1/predict").status_code == 404  # another org's
    assert predict(base, "/v1/models/m1/environments/production/predict", EXPORT).status_code == 403
    assert predict(base, "/v1/models/m1/environments/production/predict", "nope").status_code == 401
    assert predict(base, "/v1/models/m1/environments/nope/predict").status_code == 404
    r = httpx.post(
        f"{base}/environments/staging/predict", headers={**_auth(INVOKE), "Host": "model-m1.example.com"}
    )
    assert r.status_code == 200 and r.headers["x-servemetrics-deployment-id"] == "d6"
    r = httpx.put(
        f"{base}/v1/models/m1/environments/staging/sync/echo/x?a=1", headers=_auth(INVOKE), content=b"hi"
    )
    assert r.json() == {"method": "PUT", "path": "/echo/x?a=1", "body": "hi", "replica": "p3"}


def test_request_counts_reach_the_metrics_api(svc):
    base = svc[0]
    since = int(time.time() * 1000) - 60_000
    wait_for_scrapes(base, 2, source="gateway")  # earlier tests' requests reach the store before the baseline
    before = _summary(base, since)
    path = "/v1/models/m1/environments/staging/predict"
    codes = [predict(base, path, status=s, tokens=1).status_code for s in (200, 200, 200, 500, 500, 422)]
    assert sorted(codes) == [200, 200, 200, 422, 500, 500]
    want = [before[0][0] + 3, before[0][1] + 1, before[0][2] + 2]
    deadline = time.monotonic() + 15
    while _summary(base, since)[0] != want and time.monotonic() < deadline:
        time.sleep(0.3)
    got = _summary(base, since)
    assert got[0] == want and got[1] == [before[1][0] + 6]


def _summary(base: str, since: int) -> list[list[float]]:
    body = httpx.get(
        f"{base}/v1/models/m1/environments/staging/metrics",
        headers=_auth(MANAGE),
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": since,
            "end_epoch_millis": int(time.time() * 1000),
            "metrics": ["baseten_inference_requests_total", "baseten_incoming_inference_requests_total"],
        },
    ).json()
    names = [d["name"] for d in body["metric_descriptors"]]
    values = body["metric_values"][0]["values"]
    by = dict(zip(names, values, strict=True))
    return [
        [v or 0 for v in by.get("baseten_inference_requests_total", [0, 0, 0])],
        [v or 0 for v in by.get("baseten_incoming_inference_requests_total", [0])],
    ]
