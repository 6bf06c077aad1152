"""A gradual promotion through the management API records every step and its end (issue 15).

``production`` of m1 serves d1 (promoted at 4,000 ms); the test promotes d2 at 25 % (10,000 ms), moves
it to 50 % (20,000 ms) and 100 % (30,000 ms) with ``promotion_percent``, and after each call checks the
environment (``EnvironmentV1``) and the exact events: PROMOTED at the start, PROMOTION_CONTROL
``{action: STEP}`` for each step with its percent, and PROMOTED ``{percent: 100, status: SUCCEEDED}``
when the promotion completes (metrics-dashboard.md "Events": Promoted, Promotion control action).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from servemetrics.api.errors import install_error_handlers
from servemetrics.api.routes import environments, events
from servemetrics.registry import Registry
from tests.apptools import auth, service_over

MANAGE = auth("acme-manage-key")
ENV = "/v1/models/m1/environments/production"
BOTH = {
    "deployment_id": "d2",
    "deployment_name": "v2",
    "previous_deployment_id": "d1",
    "previous_deployment_name": "v1",
    "environment": "production",
}
"""The detail fields every event of the promotion of d2 carries."""
DEPLOYMENTS = {
    "old": {"deployment_id": "d1", "deployment_name": "v1"},
    "new": {"deployment_id": "d2", "deployment_name": "v2"},
}


@pytest.fixture
def now() -> list[int]:
    """The registry's clock: ``now[0]`` epoch ms, set by the test before each call."""
    return [1_000]


@pytest.fixture
def client(tmp_path: Path, now: list[int]) -> Iterator[TestClient]:
    reg = Registry.open(f"sqlite:///{tmp_path / 'registry.sqlite3'}", clock=lambda: now[0])
    reg.tenancy.ensure_organization("acme")
    reg.tenancy.add_api_key("acme", "acme-manage-key", "WORKSPACE_MANAGE_ALL")
    reg.tenancy.ensure_model("m1", "llama", "acme")
    reg.deployments.create_deployment("m1", "d1", "v1", at_ms=1_000)
    reg.deployments.create_deployment("m1", "d2", "v2", at_ms=2_000)
    reg.environments.create_environment("m1", "production", at_ms=3_000)
    reg.environments.promote("m1", "production", "d1", at_ms=4_000)
    app = FastAPI()
    install_error_handlers(app)
    for module in (environments, events):
        app.include_router(module.router)
    app.state.service = service_over(reg, tmp_path)
    yield TestClient(app)
    reg.close()


def _post(client: TestClient, now: list[int], at_ms: int, route: str, body: dict[str, Any]) -> None:
    now[0] = at_ms
    res = client.post(f"{ENV}/{route}", headers=MANAGE, json=body)
    assert res.status_code == 200, res.text


def _promotion_events(client: TestClient) -> list[tuple[int, str, dict[str, Any]]]:
    params = {"start_epoch_millis": 5_000, "end_epoch_millis": 40_000, "kinds": "PROMOTED,PROMOTION_CONTROL"}
    res = client.get("/v1/models/m1/events", headers=MANAGE, params=params)
    assert res.status_code == 200, res.text
    return [(e["epoch_millis"], e["kind"], e["details"]) for e in res.json()["events"]]


def _state(client: TestClient) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """(current deployment id, candidate deployment id, in_progress_promotion) of production."""
    env = client.get(ENV, headers=MANAGE).json()
    ids = [(env[k] or {}).get("id") for k in ("current_deployment", "candidate_deployment")]
    return ids[0], ids[1], env["in_progress_promotion"]


def _ramping(percent: int) -> dict[str, Any]:
    return {
        "status": "RAMPING_UP",
        "percent_traffic_to_new_version": percent,
        "error_message": None,
        "rolling_deploy": True,
    }


def test_each_step_and_the_end_of_a_rolling_promotion_are_events(client: TestClient, now: list[int]) -> None:
    _post(client, now, 10_000, "promote", {"deployment_id": "d2", "percent": 25})
    started = (
        10_000,
        "PROMOTED",
        {**BOTH, "rolling": True, "percent": 25, "status": "RAMPING_UP", **DEPLOYMENTS},
    )
    assert _promotion_events(client) == [started]
    assert _state(client) == ("d1", "d2", _ramping(25))

    _post(client, now, 20_000, "promotion_percent", {"percent": 50})
    half = {
        **BOTH,
        "action": "STEP",
        "percent": 50,
        "status": "RAMPING_UP",
        "old": {"status": "RAMPING_UP", "percent": 25},
        "new": {"status": "RAMPING_UP", "percent": 50},
    }
    assert _promotion_events(client) == [started, (20_000, "PROMOTION_CONTROL", half)]
    assert _state(client) == ("d1", "d2", _ramping(50))

    _post(client, now, 30_000, "promotion_percent", {"percent": 100})
    full = {
        **BOTH,
        "action": "STEP",
        "percent": 100,
        "status": "SUCCEEDED",
        "old": {"status": "RAMPING_UP", "percent": 50},
        "new": {"status": "SUCCEEDED", "percent": 100},
    }
    done = {**BOTH, "rolling": True, "percent": 100, "status": "SUCCEEDED", **DEPLOYMENTS}
    assert _promotion_events(client) == [
        started,
        (20_000, "PROMOTION_CONTROL", half),
        (30_000, "PROMOTION_CONTROL", full),
        (30_000, "PROMOTED", done),  # after the step that completed it
    ]
    assert _state(client) == ("d2", None, None)  # d2 is current, no promotion in progress


def test_a_roll_forward_also_ends_with_promoted(client: TestClient, now: list[int]) -> None:
    _post(client, now, 10_000, "promote", {"deployment_id": "d2", "percent": 25})
    _post(client, now, 15_000, "pause_promotion", {})
    _post(client, now, 20_000, "promotion_percent", {"percent": 40})  # a paused promotion stays paused
    _post(client, now, 30_000, "force_roll_forward_promotion", {})
    got = [
        (at, kind, d.get("action"), d["percent"], d["status"]) for at, kind, d in _promotion_events(client)
    ]
    assert got == [
        (10_000, "PROMOTED", None, 25, "RAMPING_UP"),
        (15_000, "PROMOTION_CONTROL", "PAUSE", 25, "PAUSED"),
        (20_000, "PROMOTION_CONTROL", "STEP", 40, "PAUSED"),
        (30_000, "PROMOTION_CONTROL", "ROLL_FORWARD", 100, "SUCCEEDED"),
        (30_000, "PROMOTED", None, 100, "SUCCEEDED"),
    ]
    assert _state(client) == ("d2", None, None)


def test_a_cancelled_promotion_ends_without_promoted(client: TestClient, now: list[int]) -> None:
    _post(client, now, 10_000, "promote", {"deployment_id": "d2", "percent": 25})
    _post(client, now, 20_000, "promotion_percent", {"percent": 50})
    _post(client, now, 30_000, "cancel_promotion", {})
    got = [
        (at, kind, d.get("action"), d["percent"], d["status"]) for at, kind, d in _promotion_events(client)
    ]
    assert got == [
        (10_000, "PROMOTED", None, 25, "RAMPING_UP"),
        (20_000, "PROMOTION_CONTROL", "STEP", 50, "RAMPING_UP"),
        (30_000, "PROMOTION_CONTROL", "CANCEL", 0, "CANCELED"),
    ]
    assert _state(client) == ("d1", None, None)  # d1 serves again
