"""End to end: `servemetrics serve` scrapes a real replica process; all three modes over HTTP.

The replica (examples/replica.py) records requests when told (POST /observe), so the totals are exact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import one_replica_service, wait_for_scrapes

pytestmark = pytest.mark.e2e
KEY = "e2e-metrics-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
REQ = "baseten_inference_requests_total"
E2E = "baseten_end_to_end_response_time_seconds"
CPU = "baseten_container_cpu_usage_seconds_total"


@pytest.fixture(scope="module")
def running(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    with one_replica_service(tmp_path_factory.mktemp("e2e"), KEY) as svc:
        yield svc.base, svc.replica, svc.tmp


def scrapes_after(base: str, t_ms: int, timeout_s: float = 20.0) -> None:
    """Wait until the service has stored a scrape newer than ``t_ms`` (replicas gauge CURRENT)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        body = httpx.get(
            f"{base}/v1/models/m1/deployments/d1/metrics",
            headers=AUTH,
            params={
                "mode": "SERIES",
                "start_epoch_millis": t_ms,
                "end_epoch_millis": int(time.time() * 1000),
            },
        ).json()
        if any(v["values"] and v["values"][0][0] is not None for v in body.get("metric_values", [])):
            return
        time.sleep(0.2)
    raise AssertionError("no scrape stored in time")


def metric(body: dict, name: str) -> list[list[float | None]]:
    i = [d["name"] for d in body["metric_descriptors"]].index(name)
    return [vs["values"][i] for vs in body["metric_values"]]


def test_all_three_modes_over_http(running, metrics_response_validator):
    base, replica, _ = running
    t0 = int(time.time() * 1000)
    scrapes_after(base, t0)  # a baseline scrape before any request
    wait_for_scrapes(base, 1, source="registry")
    t1 = int(time.time() * 1000)
    scrapes_after(base, t1)
    httpx.post(f"{replica}/observe", params={"status": "200", "seconds": "0.3", "count": "6"})
    httpx.post(f"{replica}/observe", params={"status": "503", "seconds": "4", "count": "2"})
    t2 = int(time.time() * 1000)
    wait_for_scrapes(base, 2, source="registry")  # the second one started after the observations
    scrapes_after(base, t2)
    wait_for_scrapes(base, 1, source="registry")
    end = int(time.time() * 1000)
    params = {
        "start_epoch_millis": t0 - 60_000,
        "end_epoch_millis": end,
        "metrics": [REQ, E2E, CPU, "baseten_replicas_active"],
    }

    summary = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=AUTH,
        params={**params, "mode": "SUMMARY"},
    ).json()
    metrics_response_validator.validate(summary)
    assert metric(summary, REQ) == [[6.0, 0.0, 2.0]]
    # 6 in (0.25, 0.5] and 2 in (2.5, 5]: p50 rank 4 -> 0.25 + 0.25 * 4/6; p90/p95/p99 in (2.5, 5]
    [[p50, p90, p95, p99, avg]] = metric(summary, E2E)
    assert p50 == pytest.approx(0.25 + 0.25 * 4 / 6)
    assert p90 == pytest.approx(2.5 + 2.5 * (7.2 - 6) / 2)
    assert p99 == pytest.approx(2.5 + 2.5 * (7.92 - 6) / 2)
    assert avg == pytest.approx((6 * 0.3 + 2 * 4) / 8)
    assert metric(summary, "baseten_replicas_active") == [[1.0]]
    [[cores]] = metric(summary, CPU)
    assert cores is not None and 0 <= cores < 2  # the replica's real CPU use (process collector)

    series = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=AUTH,
        params={**params, "mode": "SERIES"},
    ).json()
    metrics_response_validator.validate(series)
    assert series["step_seconds"] == 30
    totals = [sum(v for v in row if v is not None) for row in metric(series, REQ)]
    assert sum(totals) == 8.0  # counter increases are conserved across steps

    current = httpx.get(
        f"{base}/v1/models/m1/environments/production/metrics",
        headers=AUTH,
        params={"mode": "CURRENT", "metrics": [REQ, "baseten_replicas_active"]},
    ).json()
    metrics_response_validator.validate(current)
    assert metric(current, "baseten_replicas_active") == [[1.0]]
    assert metric(current, REQ) == [[6.0, 0.0, 2.0]]  # within the last 5 minutes


def test_own_metrics_show_scrapes(running):
    base, _, _ = running
    text = httpx.get(f"{base}/service/metrics").text
    assert 'servemetrics_scrapes_total{result="ok"}' in text
    ok = [line for line in text.splitlines() if line.startswith('servemetrics_scrapes_total{result="ok"}')]
    assert float(ok[0].split()[-1]) >= 2
