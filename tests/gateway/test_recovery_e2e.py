"""A replica that goes down is FAILED, and comes back (issue 15): `servemetrics serve` in front of one
examples/replica.py process, killed until the gateway fails it, then started again on the same port,
first while the service runs, then while it is stopped (the FAILED replica is checked again on start).

The config's ``health`` section makes the checks fast (every 200 ms, backoff 200 ms doubling to 1 s).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from servemetrics.gateway.health import RECOVERED
from tests.apptools import auth
from tests.processes import (
    free_port,
    promoted,
    replicas_deployment,
    scrapes_done,
    start,
    start_service,
    stop,
    two_organizations,
    wait_for_scrapes,
    wait_http,
    wait_until,
    write_service_config,
)

pytestmark = pytest.mark.e2e
MANAGE, INVOKE, OTHER = "rec-manage", "rec-invoke-m1", "rec-other"
HEALTH = {"interval": "200ms", "timeout": "1s", "recovery_backoff": "200ms", "recovery_backoff_max": "1s"}
PREDICT = "/v1/models/m1/deployment/d1/predict"


def _replica(port: int, log: Path) -> subprocess.Popen[bytes]:
    proc = start(["examples/replica.py", "--port", str(port), "--name", "p0", "--token-ms", "1"], log)
    wait_http(f"http://127.0.0.1:{port}/health")
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()  # a crash: no graceful shutdown
    proc.wait()


def _status(base: str) -> str:
    r = httpx.get(f"{base}/v1/models/m1/deployments/d1/replicas", headers=auth(MANAGE), timeout=10)
    return str(r.json()["replicas"][0]["status"])


def _changes(base: str) -> list[tuple[str, str, str, str]]:
    """(replica, old_status, status, reason) of each status-change event of m1 (REPLICA_TERMINATED
    into FAILED, REPLICA_RECOVERED back to ACTIVE), oldest first."""
    r = httpx.get(
        f"{base}/v1/models/m1/events",
        headers=auth(MANAGE),
        params={"kinds": "REPLICA_TERMINATED,REPLICA_RECOVERED"},
        timeout=10,
    )
    d: list[dict[str, Any]] = [e["details"] for e in r.json()["events"]]
    return [(e["replica"], e["old_status"], e["status"], e["reason"]) for e in d]


def _predict(base: str) -> httpx.Response:
    return httpx.post(
        f"{base}{PREDICT}", headers=auth(INVOKE), params={"tokens": 1}, content=b"{}", timeout=30
    )


def _fail(base: str, replica: subprocess.Popen[bytes], events: int) -> None:
    """Kill the replica and wait until the gateway failed it (``events`` status changes recorded)."""
    _kill(replica)
    wait_until(lambda: _status(base) == "FAILED" and len(_changes(base)) == events, "the replica FAILED")
    refused = _predict(base)  # not routed to: no serving replica left
    assert (refused.status_code, refused.json()["error"]) == (503, "deployment 'd1' has no serving replica")


def _back(base: str, events: int) -> None:
    """Wait until the replica is ACTIVE again (``events`` changes), reached through the gateway, scraped."""
    wait_until(lambda: _status(base) == "ACTIVE" and len(_changes(base)) == events, "the replica ACTIVE")
    answer = _predict(base)
    assert answer.status_code == 200, answer.text
    assert (answer.headers["x-servemetrics-replica"], answer.headers["x-replica"]) == ("r1", "p0")
    before = scrapes_done(base, "registry")
    wait_for_scrapes(base, 2, source="registry")  # its target is scraped again
    assert scrapes_done(base, "registry") >= before + 2


def test_a_failed_replica_returns_when_healthy_also_after_a_restart(tmp_path: Path) -> None:
    rport, sport = free_port(), free_port()
    base = f"http://127.0.0.1:{sport}"
    deployment = replicas_deployment("d1", [f"http://127.0.0.1:{rport}/metrics"])
    model = {"id": "m1", "name": "rec", "organization": "acme", "deployments": [deployment]}
    model["environments"] = [promoted("production", "d1")]
    write_service_config(tmp_path, sport, two_organizations(MANAGE, INVOKE, OTHER), [model], health=HEALTH)
    replica = _replica(rport, tmp_path / "r0.log")
    service = start_service(tmp_path)
    try:
        wait_http(f"{base}/healthz")
        wait_until(lambda: _predict(base).status_code == 200, "the first answer through the gateway")
        down, up = ("r1", "ACTIVE", "FAILED"), ("r1", "FAILED", "ACTIVE")
        refused = f"GET http://127.0.0.1:{rport}/health failed: "

        _fail(base, replica, 1)
        replica = _replica(rport, tmp_path / "r1.log")  # the same port, while the service runs
        _back(base, 2)
        changes = _changes(base)
        assert [c[:3] for c in changes] == [down, up]
        assert changes[0][3].startswith(refused) and changes[1][3] == RECOVERED, changes

        _fail(base, replica, 3)
        stop(service)
        replica = _replica(rport, tmp_path / "r2.log")
        service = start(  # serve again on the same data_dir: the registry still says FAILED
            ["-m", "servemetrics", "serve", "--config", str(tmp_path / "servemetrics.yaml")],
            tmp_path / "serve2.log",
        )
        wait_http(f"{base}/healthz")
        _back(base, 4)
        changes = _changes(base)
        assert [c[:3] for c in changes] == [down, up, down, up]
        assert changes[2][3].startswith(refused) and changes[3][3] == RECOVERED, changes
    finally:
        stop(service)
        stop(replica)
