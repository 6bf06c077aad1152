"""Little's law through the gateway: under steady load, the mean of ``baseten_concurrent_requests`` that the
metrics API reports equals arrival rate x mean latency.

Load: Poisson arrivals at 50 requests/s for 24 s against one replica (examples/replica.py) that answers
``POST /predict?delay_ms=200`` after 200 ms, so L = lambda W is about 10. ``concurrency_target`` is
raised to 100 so nothing queues at the gateway's gate (queued requests would count too, but they would make
W depend on the gate). lambda and W are what the client saw (the realised rate, the mean time from send
to last byte); the gauge is read back from ``GET …/deployments/d1/metrics`` (SUMMARY: the mean of the
gauge's samples, scraped every second) over the steady part of the run.

Tolerance 25 %: each scrape is one snapshot of N(t), which for Poisson arrivals and a fixed service time
is Poisson(L) distributed (variance L = 10); about 20 snapshots 1 s apart (further apart than the 0.2 s a
request lives, so independent) give a mean with a standard deviation of sqrt(10 / 20) = 0.7, 7 % of L.
25 % is 3.5 standard deviations; the gateway's and the client's time around the replica's 200 ms is a few
ms per request (about 1 %) and is in W on both sides.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.processes import one_replica_service, wait_for_scrapes

pytestmark = pytest.mark.e2e
KEY = "littles-law-key"
RATE_PER_S = 50.0
DELAY_MS = 200
LOAD_S = 24.0


@pytest.fixture(scope="module")
def svc(tmp_path_factory) -> Iterator[str]:
    with one_replica_service(tmp_path_factory.mktemp("littles_law"), KEY, ("--name", "r1")) as running:
        httpx.patch(
            f"{running.base}/v1/models/m1/deployments/d1/autoscaling_settings",
            headers={"Authorization": f"Api-Key {KEY}"},
            json={"concurrency_target": 100},
        ).raise_for_status()
        yield running.base


def test_concurrency_is_rate_times_mean_latency(svc):
    base = svc
    url = f"{base}/v1/models/m1/environments/production/predict"
    params = {"delay_ms": DELAY_MS, "tokens": 1}
    latencies: list[float] = []
    lock = threading.Lock()
    rng = random.Random(3)
    with httpx.Client(
        headers={"Authorization": f"Api-Key {KEY}"}, limits=httpx.Limits(max_connections=64), timeout=30
    ) as client:
        assert client.post(url, params=params, content=b"{}").status_code == 200  # replica healthy

        def one() -> None:
            t0 = time.perf_counter()
            r = client.post(url, params=params, content=b"{}")
            dt = time.perf_counter() - t0
            assert r.status_code == 200, r.text
            with lock:
                latencies.append(dt)

        with ThreadPoolExecutor(64) as pool:
            started_ms = int(time.time() * 1000)
            t_start = time.perf_counter()
            at = t_start
            futures = []
            while (at := at + rng.expovariate(RATE_PER_S)) < t_start + LOAD_S:
                time.sleep(max(0.0, at - time.perf_counter()))
                futures.append(pool.submit(one))
            ended_ms = int(time.time() * 1000)
            for f in futures:
                f.result()
    rate = len(futures) / LOAD_S
    mean_latency = sum(latencies) / len(latencies)
    expected = rate * mean_latency
    wait_for_scrapes(base, 2)  # the last steady scrapes reach the store
    body = httpx.get(
        f"{base}/v1/models/m1/deployments/d1/metrics",
        headers={"Authorization": f"Api-Key {KEY}"},
        params={
            "mode": "SUMMARY",
            "start_epoch_millis": started_ms + 2000,  # arrivals have reached their steady level
            "end_epoch_millis": ended_ms - 1000,
            "metrics": ["baseten_concurrent_requests"],
        },
    ).json()
    names = [d["name"] for d in body["metric_descriptors"]]
    measured = body["metric_values"][0]["values"][names.index("baseten_concurrent_requests")][0]
    assert DELAY_MS / 1000 <= mean_latency < 0.3, mean_latency
    assert measured is not None and abs(measured - expected) <= 0.25 * expected, (
        measured,
        rate,
        mean_latency,
    )
