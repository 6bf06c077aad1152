"""End to end: Debian's Prometheus discovers a replica through ``GET /v1/service_discovery/targets``
(``http_sd_configs`` with the API key as its Authorization header) and scrapes it with our labels."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.processes import free_port, one_replica_service, wait_http

pytestmark = pytest.mark.e2e
KEY = "e2e-sd-key"


def _prometheus(tmp: Path, service: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    sd = {
        "url": f"{service}/v1/service_discovery/targets",
        "refresh_interval": "1s",
        "authorization": {"type": "Api-Key", "credentials": KEY},
    }
    config = {
        "scrape_configs": [{"job_name": "servemetrics", "scrape_interval": "1s", "http_sd_configs": [sd]}]
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    args = [
        "prometheus",
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with open(tmp / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/-/ready", deadline_s=60)
    return proc, url


def _up_series(prom: str, deadline_s: float = 60.0) -> list[dict[str, object]]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        result = httpx.get(prom + "/api/v1/query", params={"query": 'up{job="servemetrics"}'}).json()
        if result["data"]["result"]:
            return list(result["data"]["result"])
        time.sleep(0.5)
    raise AssertionError("Prometheus did not scrape the discovered target")


def test_prometheus_scrapes_the_discovered_replica(tmp_path):
    if not shutil.which("prometheus"):
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed (Debian package prometheus)")
        pytest.skip("prometheus is not installed")
    with one_replica_service(tmp_path, KEY) as svc:
        proc, prom = _prometheus(tmp_path, svc.base)
        try:
            (up,) = _up_series(prom)
            replica_port = svc.replica.rsplit(":", 1)[1]
            assert up["metric"] == {
                "__name__": "up",
                "job": "servemetrics",
                "instance": f"127.0.0.1:{replica_port}",
                "model_id": "m1",
                "model_name": "e2e",
                "deployment_id": "d1",
                "replica": "r1",
                "environment": "production",
                "rollout_phase": "stable",
            }
            assert up["value"][1] == "1"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
