"""A replica's startup on a plain machine (issue 16 part 1): `servemetrics serve` with deployment d1 and
no replica; replica r1 is registered through the API before its process runs, then an examples/replica.py
process starts that answers `GET /health` 503 for its first `DELAY_S` seconds (`--healthy-after`). The
startup attempt runs from the registration to the gateway's first healthy check (READINESS), so it
lasts at least `DELAY_S`. Replica r2, registered to a port nothing listens on and terminated before any
good check, is FAILED at its termination.

Bounds, not timings: each asserted instant lies between two instants the test itself read around the
event (the registration call; the process start plus the delay and the moment the answer showed it).
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.apptools import auth
from tests.processes import (
    free_port,
    promoted,
    start,
    start_service,
    stop,
    wait_http,
    wait_until,
    write_service_config,
)

pytestmark = pytest.mark.e2e
KEY = "startup-key"
DELAY_S = 2.0
REPLICAS = "/v1/models/m1/deployments/d1/replicas"


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_registered_then_healthy_after_a_known_delay_and_terminated_before(tmp_path) -> None:
    sport, rport = free_port(), free_port()
    model = {"id": "m1", "name": "plain", "organization": "acme", "deployments": [{"id": "d1", "name": "v1"}]}
    write_service_config(
        tmp_path,
        sport,
        [{"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}],
        [{**model, "environments": [promoted("production", "d1")]}],
        health={"interval": "200ms", "timeout": "1s"},
        network={"targets_allow": ["127.0.0.1"]},
    )
    base, headers = f"http://127.0.0.1:{sport}", auth(KEY)
    service = start_service(tmp_path)
    replica = None
    try:
        wait_http(f"{base}/healthz")
        before = _now_ms()
        body = {"id": "r1", "targets": [f"http://127.0.0.1:{rport}/metrics"]}
        assert httpx.post(f"{base}{REPLICAS}", json=body, headers=headers, timeout=10).status_code == 201
        registered = _now_ms()
        dead = {"id": "r2", "targets": [f"http://127.0.0.1:{free_port()}/metrics"]}
        assert httpx.post(f"{base}{REPLICAS}", json=dead, headers=headers, timeout=10).status_code == 201
        launched = _now_ms()
        args = ["examples/replica.py", "--port", str(rport), "--healthy-after", str(DELAY_S)]
        replica = start(args, tmp_path / "replica.log")
        assert httpx.delete(f"{base}{REPLICAS}/r2", headers=headers, timeout=10).status_code == 200
        terminated = _now_ms()
        window = {"start_epoch_millis": before - 1, "end_epoch_millis": _now_ms() + 600_000}

        def listed() -> dict[str, dict]:
            r = httpx.get(f"{base}/v1/models/m1/deployments/d1/startups", params=window, headers=headers)
            return {i["replica_id"]: i for i in r.json()["items"]}

        wait_until(lambda: listed().get("r1", {}).get("outcome") == "SUCCESS", "r1's startup to succeed")
        seen = _now_ms()
        items = listed()
        r1, r2 = items["r1"], items["r2"]
        assert before <= r1["started_at_epoch_millis"] <= registered
        assert launched + DELAY_S * 1000 <= r1["ready_at_epoch_millis"] <= seen
        assert (
            r1["duration_ms"] == r1["ready_at_epoch_millis"] - r1["started_at_epoch_millis"] >= DELAY_S * 1000
        )
        assert r1["phase_summary"] == [
            {"phase": "READINESS", "status": "COMPLETED", "offset_ms": 0, "duration_ms": r1["duration_ms"]}
        ]
        assert (r2["outcome"], r2["ready_at_epoch_millis"]) == ("FAILED", None)
        assert 0 <= r2["duration_ms"] <= terminated - registered
        assert r2["phase_summary"] == [
            {"phase": "READINESS", "status": "FAILED", "offset_ms": 0, "duration_ms": None}
        ]
        summary = httpx.get(
            f"{base}/v1/models/m1/environments/production/startups/summary", params=window, headers=headers
        ).json()
        assert summary["total_duration_ms"]["sample_count"] == 1
        assert summary["total_duration_ms"]["p50_ms"] == r1["duration_ms"]
    finally:
        stop(service)
        if replica is not None:
            stop(replica)
