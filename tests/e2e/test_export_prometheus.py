"""End to end: Debian's Prometheus scrapes our ``GET /metrics`` with the platform's documented config
(platform-facts §2: ``authorization: {type: Api-Key, credentials: …}``; a 1 s interval instead of 60 s
so the test is short). What it stores equals our API's CURRENT answers for every exported family; a
key of another organization scrapes none of them; the 7th scrape within a minute is refused (``up`` 0).

Data (hand-made, in the last 4 minutes of the wall clock; model m1 of acme, deployment d1 serving
``production``): replicas active 2 (gateway) and 4 (replica) -> 3; GPU utilisation 0.25 and 0.75 on two
GPUs -> 25 and 75 %; requests 200: 0, 10, 5 (a restart), 8 -> 18, and 500: 0, 2 -> 2; end-to-end
latency buckets 0.1: 3, 1.0: 5, +Inf: 6, sum 2.5. Model m2 of organization other: replicas active 9.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.memory import MemoryStore
from servemetrics.timeutil import wall_clock_ms
from servemetrics.types import labels_of
from tests.apptools import auth, build_app, org
from tests.processes import free_port, wait_http, wait_until

pytestmark = pytest.mark.e2e
EXPORT, OTHER = "sm-e2e-export-key", "sm-e2e-other-key"
REQ, E2E = "baseten_inference_requests_total", "baseten_end_to_end_response_time_seconds"
D1 = {
    "model_id": "m1",
    "model_name": "llama",
    "deployment_id": "d1",
    "environment": "production",
    "rollout_phase": "stable",
}
R = {**D1, "is_async": "false"}


def declarations() -> dict:
    production = {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
    return {
        "organizations": [
            org("acme", {EXPORT: "WORKSPACE_EXPORT_METRICS"}),
            org("other", {OTHER: "WORKSPACE_MANAGE_ALL"}),
        ],
        "models": [
            {"id": "m1", "name": "llama", "organization": "acme", "deployments": [{"id": "d1"}]}
            | {"environments": [production]},
            {"id": "m2", "name": "theirs", "organization": "other", "deployments": [{"id": "x1"}]},
        ],
    }


def samples(now: int) -> list[Sample]:
    def s(name: str, points: list[tuple[int, float]], **labels: str) -> list[Sample]:
        return [Sample(name, labels_of(labels), float(v), now + ago * 1000) for ago, v in points]

    other = {"model_id": "m2", "model_name": "theirs", "deployment_id": "x1"}
    return [
        *s("baseten_replicas_active", [(-60, 2)], source="gateway", **D1),
        *s("baseten_replicas_active", [(-60, 4)], **D1),
        *s("baseten_gpu_utilization", [(-60, 0.25)], replica="r1", gpu="0", **D1),
        *s("baseten_gpu_utilization", [(-60, 0.75)], replica="r1", gpu="1", **D1),
        *s(REQ, [(-240, 0), (-180, 10), (-120, 5), (-60, 8)], status_code="200", **R),
        *s(REQ, [(-240, 0), (-120, 2)], status_code="500", **R),
        *s(E2E + "_bucket", [(-240, 0), (-120, 3)], le="0.1", **R),
        *s(E2E + "_bucket", [(-240, 0), (-120, 5)], le="1.0", **R),
        *s(E2E + "_bucket", [(-240, 0), (-120, 6)], le="+Inf", **R),
        *s(E2E + "_sum", [(-240, 0), (-120, 2.5)], **R),
        *s(E2E + "_count", [(-240, 0), (-120, 6)], **R),
        *s("baseten_replicas_active", [(-60, 9)], **other),
    ]


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


EXPECTED = {
    key("baseten_replicas_active", **D1): 3.0,
    key("baseten_gpu_utilization", **D1, replica="r1", gpu="0"): 25.0,
    key("baseten_gpu_utilization", **D1, replica="r1", gpu="1"): 75.0,
    key(REQ, **R, status_code="200"): 18.0,
    key(REQ, **R, status_code="500"): 2.0,
    key(E2E + "_bucket", **R, le="0.1"): 3.0,
    key(E2E + "_bucket", **R, le="1.0"): 5.0,
    key(E2E + "_bucket", **R, le="+Inf"): 6.0,
    key(E2E + "_count", **R): 6.0,
    key(E2E + "_sum", **R): 2.5,
}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    store = MemoryStore()
    store.append(SampleBatch.from_samples(samples(wall_clock_ms())))
    app = build_app(tmp_path, declarations(), store=store, gateway=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _job(name: str, target: str, credentials: str) -> dict:
    """A scrape config as the platform documents it (platform-facts §2), on plain HTTP."""
    return {
        "job_name": name,
        "metrics_path": "/metrics",
        "authorization": {"type": "Api-Key", "credentials": credentials},
        "static_configs": [{"targets": [target]}],
        "scheme": "http",
    }


@pytest.fixture
def prometheus(tmp_path: Path, service: str) -> Iterator[str]:
    if not shutil.which("prometheus"):
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed (Debian package prometheus)")
        pytest.skip("prometheus is not installed")
    config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [_job("baseten", service, EXPORT), _job("other", service, OTHER)],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    args = [
        "prometheus",
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with open(tmp_path / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/-/ready", deadline_s=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _query(prom: str, expr: str) -> list[dict]:
    body = httpx.get(prom + "/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def stored(prom: str, job: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The latest value Prometheus stored of each series of ``job`` (its own ``up``, ``scrape_*`` left
    out; range vectors skip the stale markers a refused scrape leaves)."""
    out = {}
    for series in _query(prom, f'{{job="{job}"}}[5m]'):
        labels = {k: v for k, v in series["metric"].items() if k not in ("job", "instance")}
        name = labels.pop("__name__")
        if name != "up" and not name.startswith("scrape_"):
            out[key(name, **labels)] = float(series["values"][-1][1])
    return out


def current(service: str) -> dict[str, dict[str, float | None]]:
    """Our API's CURRENT answer for m1's production: metric -> {label set as text -> value}."""
    names = ["baseten_replicas_active", "baseten_gpu_utilization", REQ, E2E]
    url = f"http://{service}/v1/models/m1/environments/production/metrics"
    body = httpx.get(url, params={"metrics": names}, headers=auth(EXPORT), timeout=10).json()
    values = body["metric_values"][0]["values"]
    return {
        d["name"]: {
            ",".join(f"{k}={v}" for k, v in ls.items()): values[i][j] for j, ls in enumerate(d["label_sets"])
        }
        for i, d in enumerate(body["metric_descriptors"])
    }


def test_prometheus_stores_what_our_api_answers(prometheus: str, service: str):
    wait_until(lambda: stored(prometheus, "baseten") == EXPECTED, "Prometheus to store the export", 60)
    held = stored(prometheus, "baseten")
    api = current(service)
    assert api["baseten_replicas_active"][""] == held[key("baseten_replicas_active", **D1)] == 3.0
    gpus = [v for (name, _), v in held.items() if name == "baseten_gpu_utilization"]
    assert api["baseten_gpu_utilization"][""] == sum(gpus) / len(gpus) / 100 == 0.5  # percent vs ratio
    assert api[REQ] == {"status=2xx": 18.0, "status=4xx": 0.0, "status=5xx": 2.0}
    assert held[key(REQ, **R, status_code="200")] == 18.0 and held[key(REQ, **R, status_code="500")] == 2.0
    count, total = held[key(E2E + "_count", **R)], held[key(E2E + "_sum", **R)]
    assert api[E2E]["stat=avg"] == pytest.approx(total / count)
    # p50: rank 3 of 6 ends the first bucket (3 below 0.1 s): 0.1 s, here and in Prometheus
    (p50,) = _query(prometheus, f'histogram_quantile(0.5, last_over_time({E2E}_bucket{{job="baseten"}}[5m]))')
    assert api[E2E]["quantile=0.5"] == float(p50["value"][1]) == 0.1
    # the other organization's key scraped only its own model; the 7th scrape of a minute was refused
    theirs = {key("baseten_replicas_active", model_id="m2", model_name="theirs", deployment_id="x1"): 9.0}
    wait_until(lambda: stored(prometheus, "other") == theirs, "the other job's first scrape", 60)
    refused = 'count_over_time(up{job="baseten"}[5m]) - sum_over_time(up{job="baseten"}[5m])'
    wait_until(lambda: any(float(r["value"][1]) > 0 for r in _query(prometheus, refused)), "a 429", 60)
