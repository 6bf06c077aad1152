"""The demo's promotion schedule, sent as the demo sends it (``promotion_plan``, ``promotion_request``) to
the service built from the demo's own config (``service_config``), records the promotion's start, each
step and its end, and the environment follows (issue 15: the events stopped at 25 % RAMPING_UP).

In process and quick: no replicas run and nothing is scraped; ``test_demo_e2e.py`` checks the same
events on the real demo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from servemetrics.demo.run import promotion_plan, promotion_request
from servemetrics.demo.topology import ENVIRONMENT, MODEL, make_topology, service_config
from tests.apptools import auth, build_app

KEY = "demo-schedule-key"


def _config(tmp_path: Path) -> dict[str, Any]:
    """The demo's config; the ports are never listened on (no scrapes, no replicas)."""
    topo = make_topology(18321, list(range(18322, 18328)))
    return service_config(topo, tmp_path / "data", KEY)


def test_the_demo_schedule_records_each_step_and_the_end(tmp_path: Path) -> None:
    env = f"/v1/models/{MODEL}/environments/{ENVIRONMENT}"
    states = []
    with TestClient(build_app(tmp_path, _config(tmp_path), gateway=False)) as client:
        for _, action, percent in promotion_plan(120):
            route, body = promotion_request(action, percent)
            res = client.post(f"{env}/{route}", headers=auth(KEY), json=body)
            assert res.status_code == 200, res.text
            got = client.get(env, headers=auth(KEY)).json()
            states.append((got["current_deployment"]["id"], got["in_progress_promotion"]))
        kinds = {"kinds": "PROMOTED,PROMOTION_CONTROL"}
        events = client.get(f"/v1/models/{MODEL}/events", headers=auth(KEY), params=kinds).json()["events"]
    seen = [
        (e["kind"], e["details"].get("action"), e["details"]["percent"], e["details"]["status"])
        for e in events
    ]
    assert seen == [
        ("PROMOTED", None, 100, "SUCCEEDED"),  # d1 at start-up (the config's promotion)
        ("PROMOTED", None, 25, "RAMPING_UP"),
        ("PROMOTION_CONTROL", "STEP", 50, "RAMPING_UP"),
        ("PROMOTION_CONTROL", "STEP", 100, "SUCCEEDED"),
        ("PROMOTED", None, 100, "SUCCEEDED"),
    ]
    assert [e["deployment_id"] for e in events] == ["d1", "d2", "d2", "d2", "d2"]
    times = [e["epoch_millis"] for e in events]
    assert times == sorted(times) and times[-1] == times[-2]  # the end is the instant of the last step

    def ramping(percent: int) -> dict[str, Any]:
        return {
            "status": "RAMPING_UP",
            "percent_traffic_to_new_version": percent,
            "error_message": None,
            "rolling_deploy": True,
        }

    assert states == [("d1", ramping(25)), ("d1", ramping(50)), ("d2", None)]
