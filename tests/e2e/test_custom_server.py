"""End to end, issue 15 "bring your own server": `servemetrics serve` scrapes a real custom server process
(examples/custom_server.py: ``prometheus_client`` with prometheus-fastapi-instrumentator's names).

- its ``http_requests_total`` / ``http_request_duration_seconds`` answer the request metrics (probe and
  scrape routes left out), with values computed by hand from the latencies the test sends;
- its other series are custom metrics queryable by their own name, at most ``custom_series_limit`` per
  scrape, the rest counted in ``servemetrics_custom_series_dropped_total`` by reason;
- once the gateway meters the deployment, its count is the one read, never added to the replica's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import (
    free_port,
    promoted,
    replicas_deployment,
    start,
    start_service,
    stop,
    wait_for_scrapes,
    wait_http,
    wait_until,
    write_service_config,
)

pytestmark = pytest.mark.e2e
KEY, OTHER = "byos-key", "byos-other-key"
AUTH = {"Authorization": f"Api-Key {KEY}"}
REQ = "baseten_inference_requests_total"
E2E = "baseten_end_to_end_response_time_seconds"
LIMIT = 5
"""``custom_series_limit``: queue_depth, tokenizer_seconds and extra_series_total i = 0, 1, 2 are kept."""


@dataclass(frozen=True)
class Running:
    base: str
    replica: str
    t0_ms: int


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("byos")
    rport, sport = free_port(), free_port()
    args = ["--port", str(rport), "--extra", "6", "--queue-depth", "7", "--tokenizer", "0.05,0.05,0.3"]
    replica = start(["examples/custom_server.py", *args], tmp / "replica.log")
    model = {"id": "m1", "name": "byos", "organization": "acme"}
    deployment = replicas_deployment("d1", [f"http://127.0.0.1:{rport}/metrics"])
    write_service_config(
        tmp,
        sport,
        [
            {"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]},
            {"name": "other", "api_keys": [{"key": OTHER, "type": "WORKSPACE_MANAGE_ALL"}]},
        ],
        [{**model, "deployments": [deployment], "environments": [promoted("production", "d1")]}],
        custom_series_limit=LIMIT,
    )
    t0_ms = int(time.time() * 1000)
    service = start_service(tmp)
    try:
        wait_http(f"http://127.0.0.1:{rport}/health")
        wait_http(f"http://127.0.0.1:{sport}/healthz")
        yield Running(f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{rport}", t0_ms)
    finally:
        stop(service)
        stop(replica)


def query(r: Running, mode: str, *names: str, key: str = KEY) -> httpx.Response:
    params: dict[str, Any] = {"mode": mode, "metrics": list(names)}
    if mode == "SUMMARY":
        params["start_epoch_millis"] = r.t0_ms - 60_000
    return httpx.get(
        f"{r.base}/v1/models/m1/environments/production/metrics",
        headers={"Authorization": f"Api-Key {key}"},
        params=params,
        timeout=10,
    )


def metric(body: dict[str, Any], name: str) -> list[list[float | None]]:
    i = [d["name"] for d in body["metric_descriptors"]].index(name)
    return [vs["values"][i] for vs in body["metric_values"]]


def dropped(base: str) -> dict[str, float]:
    """``servemetrics_custom_series_dropped_total`` by reason (the public view: tenant labels summed)."""
    text = httpx.get(f"{base}/service/metrics", timeout=10).text
    return {
        s.labels["reason"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "servemetrics_custom_series_dropped_total"
    }


# Three tests on one running service, in this order (pytest keeps the file's order): the gateway must
# meter the deployment last.


def test_the_servers_own_request_metrics(running: Running, metrics_response_validator: Any) -> None:
    r, validator = running, metrics_response_validator
    for seconds, status in ((0.05, 200), (0.2, 200), (0.7, 200), (2.0, 500)):
        answer = httpx.post(f"{r.replica}/predict", params={"seconds": seconds, "status": status}, json={})
        assert answer.status_code == status
    wait_for_scrapes(r.base, 2, source="registry")  # the second started after the requests

    summary = query(r, "SUMMARY", REQ, E2E).json()
    validator.validate(summary)
    # /health (the gateway polls it every 2 s) and /metrics (every scrape) are counted by the server but
    # are not inference requests
    assert metric(summary, REQ) == [[3.0, 0.0, 1.0]]
    # buckets 0.1: 1, 0.25: 2, 0.5: 2, 1: 3, 2.5: 4 (cumulative); PromQL histogram_quantile
    [[p50, p90, p95, p99, avg]] = metric(summary, E2E)
    assert p50 == pytest.approx(0.1 + 0.15 * (2 - 1) / 1)  # rank 2 in (0.1, 0.25]
    assert p90 == pytest.approx(1.0 + 1.5 * (3.6 - 3) / 1)  # rank 3.6 in (1, 2.5]
    assert p95 == pytest.approx(1.0 + 1.5 * (3.8 - 3) / 1)
    assert p99 == pytest.approx(1.0 + 1.5 * (3.96 - 3) / 1)
    assert avg == pytest.approx((0.05 + 0.2 + 0.7 + 2.0) / 4)


def test_custom_metrics_by_their_own_name(running: Running, metrics_response_validator: Any) -> None:
    r, validator = running, metrics_response_validator
    current = query(r, "CURRENT", "queue_depth").json()
    validator.validate(current)
    assert current["metric_descriptors"] == [
        {"name": "queue_depth", "unit_hint": "COUNT", "kind": "GAUGE", "label_sets": [{}]}
    ]
    assert metric(current, "queue_depth") == [[7.0]]
    custom = query(r, "SUMMARY", "tokenizer_seconds", "extra_series_total").json()
    validator.validate(custom)
    # 0.05, 0.05, 0.3 in buckets 0.1: 2, 0.5: 3: p50 rank 1.5 -> 0.1 * 1.5 / 2; p90 rank 2.7 in (0.1, 0.5]
    [[t50, t90, _, _, tavg]] = metric(custom, "tokenizer_seconds")
    assert (t50, t90, tavg) == pytest.approx((0.075, 0.1 + 0.4 * 0.7, 0.4 / 3))
    # i = 0, 1, 2 kept (1 + 2 + 3, counted from their _created time); i = 3, 4, 5 over the limit
    assert metric(custom, "extra_series_total") == [[6.0]]

    # what was not kept, by reason: 3 series over the limit and baseten_private_gauge, every scrape
    def counted() -> bool:
        d = dropped(r.base)
        return d.get("reserved_name", 0) >= 2 and d.get("series_limit") == 3 * d["reserved_name"]

    wait_until(counted, "servemetrics_custom_series_dropped_total: 3 series_limit per reserved_name")

    unknown = query(r, "SUMMARY", "no_such_metric")
    assert unknown.status_code == 400
    assert unknown.json()["error"].startswith("unknown metric name(s): no_such_metric.")
    assert query(r, "CURRENT", "queue_depth", key=OTHER).status_code == 404  # another organization's model


def test_the_gateways_count_is_read_once_it_meters(running: Running) -> None:
    r = running

    # the gateway meters the deployment from its first request: its count is the one read (2), not
    # added to the replica's own (which counts these 2 as well)
    def active() -> bool:
        return metric(query(r, "CURRENT", "baseten_replicas_active").json(), "baseten_replicas_active") == [
            [1.0]
        ]

    wait_until(active, "the gateway's health check to pass")
    for _ in range(2):
        answer = httpx.post(f"{r.base}/v1/models/m1/environments/production/predict", headers=AUTH, json={})
        assert answer.status_code == 200 and answer.json() == {"ok": True}
    wait_for_scrapes(r.base, 2, source="registry")
    wait_for_scrapes(r.base, 2, source="gateway")
    assert metric(query(r, "SUMMARY", REQ).json(), REQ) == [[2.0, 0.0, 0.0]]
