"""Inference time from the replica's ``Server-Timing`` header, through the gateway, on real processes
(`servemetrics serve` in front of examples/replica.py): issue 16 part 2, "inference time from
Server-Timing equals what a test replica reports, to the millisecond".

The replica answers ``Server-Timing: inference;dur=123.4`` (its ``server_timing`` parameter) on N
requests: the gateway's ``baseten_inference_time_seconds`` gets N observations of 0.1234 s (sum
N x 0.1234), and the metrics API's SUMMARY reads avg 0.1234 s; every one lies in the (0.1, 0.15] bucket,
so p50 = 0.1 + 0.05 x 0.5 = 0.125 and p90 = 0.1 + 0.05 x 0.9 = 0.145 (linear inside the bucket).
Malformed headers are relayed, answered 200 and observe nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import OneReplica, one_replica_service, wait_for_scrapes, wait_until

pytestmark = pytest.mark.e2e
KEY = "inference-time-key"
AUTH = {"Authorization": f"Api-Key {KEY}"}
NAME = "baseten_inference_time_seconds"
N = 5


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[OneReplica]:
    with one_replica_service(tmp_path_factory.mktemp("inference_time"), KEY, ("--name", "r1")) as running:
        yield running


def _sum_count(base: str, name: str = NAME) -> tuple[float, float]:
    """The gateway's ``_sum`` and ``_count`` of ``name`` over every series (0, 0 before any)."""
    text = httpx.get(f"{base}/gateway/metrics", headers=AUTH).text
    samples = [s for f in text_string_to_metric_families(text) if f.name == name for s in f.samples]
    total = sum(s.value for s in samples if s.name == f"{name}_sum")
    return total, sum(s.value for s in samples if s.name == f"{name}_count")


def _predict(client: httpx.Client, base: str, server_timing: str) -> httpx.Response:
    url = f"{base}/v1/models/m1/environments/production/predict"
    resp = client.post(url, params={"tokens": 2, "server_timing": server_timing}, content=b"{}")
    assert resp.status_code == 200, resp.text
    return resp


def _summary(base: str, since_ms: int) -> list[float | None]:
    body = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=AUTH,
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": since_ms,
            "end_epoch_millis": int(time.time() * 1000),
            "metrics": [NAME],
        },
    ).json()
    names = [d["name"] for d in body["metric_descriptors"]]
    assert names == [NAME], body
    labels = [ls for d in body["metric_descriptors"] for ls in d["label_sets"]]
    assert labels == [
        {"quantile": "0.5"},
        {"quantile": "0.9"},
        {"quantile": "0.95"},
        {"quantile": "0.99"},
    ] + [{"stat": "avg"}]
    return body["metric_values"][0]["values"][0]


def test_server_timing_is_the_inference_time_to_the_millisecond(svc):
    base = svc.base
    since = int(time.time() * 1000) - 1000
    assert _sum_count(base) == (0.0, 0.0)
    with httpx.Client(headers=AUTH, timeout=30) as client:
        for _ in range(N):
            resp = _predict(client, base, "inference;dur=123.4")
            assert resp.headers["server-timing"] == "inference;dur=123.4"  # relayed to the client as sent
    total, count = _sum_count(base)
    assert count == N and total == pytest.approx(N * 0.1234, abs=1e-9)
    wait_for_scrapes(base, 2, "gateway")
    wait_until(lambda: _summary(base, since)[4] is not None, "the API's inference time", 30)
    p50, p90, p95, p99, avg = _summary(base, since)
    assert avg == pytest.approx(0.1234, abs=1e-6)  # to the millisecond, and far below it
    assert p50 == pytest.approx(0.125, abs=1e-9) and p90 == pytest.approx(0.145, abs=1e-9)
    assert p95 == pytest.approx(0.1475, abs=1e-9) and p99 == pytest.approx(0.1495, abs=1e-9)


def test_malformed_server_timing_is_ignored_and_the_request_answered(svc):
    base = svc.base
    before, e2e_before = _sum_count(base), _sum_count(base, "baseten_end_to_end_response_time_seconds")
    bad = ["inference;dur=oops", "inference;dur=-1", ";;;,,", 'inference;desc="open', "other;dur=5"]
    with httpx.Client(headers=AUTH, timeout=30) as client:
        for header in bad:
            _predict(client, base, header)
        # a valid entry after a malformed one still counts: 2 ms
        _predict(client, base, "garbage here, inference;dur=2")
    total, count = _sum_count(base)
    assert count == before[1] + 1 and total == pytest.approx(before[0] + 0.002, abs=1e-9)
    assert _sum_count(base, "baseten_end_to_end_response_time_seconds")[1] == e2e_before[1] + len(bad) + 1
