"""Every event kind carries what the dashboard's hover shows: deployment, environment, old and new values.

Exact details of each of the nine kinds, recorded by the registry calls that make them (SQLite, and
PostgreSQL when marked). ``seeded``: model m1 with d1, d2, d3 (``v-d1`` ... on 1 x H100) and
environment production created at 1,000 ms.
"""

from __future__ import annotations

from typing import Any

from servemetrics.registry import EVENT_KINDS, Registry
from servemetrics.registry.environment_settings import DEFAULT_PROMOTION_SETTINGS
from servemetrics.registry.records import AutoscalingSettings


def _events(reg: Registry, kind: str) -> list[tuple[int, str | None, str | None, dict[str, Any]]]:
    return [
        (e.at_ms, e.deployment_id, e.environment, e.details)
        for e in reg.events.list_events("m1", 0, 10**9, [kind])
    ]


def _story(reg: Registry) -> None:
    reg.environments.promote("m1", "production", "d1", at_ms=2_000)
    reg.environments.promote("m1", "production", "d2", percent=25, at_ms=3_000)
    reg.environments.pause_promotion("m1", "production", at_ms=4_000)
    reg.environments.force_roll_forward_promotion("m1", "production", at_ms=5_000)
    reg.deployments.update_autoscaling("m1", "d2", {"max_replica": 3}, at_ms=6_000)
    reg.deployments.set_instance_type("m1", "d3", "A100", 2, at_ms=7_000)
    reg.deployments.deactivate_deployment("m1", "d1", at_ms=8_000)
    reg.deployments.ensure_replica("m1", "d2", "r1", at_ms=8_500)
    reg.deployments.terminate_replica("m1", "d2", "r1", at_ms=9_000)
    reg.environments.update_environment(
        "m1", "production", promotion_settings={"ramp_up_duration_seconds": 60}, at_ms=10_000
    )
    reg.environments.deactivate_environment("m1", "production", at_ms=11_000)
    reg.deployments.create_deployment("m1", "d4", "v-d4", environment="staging", at_ms=12_000)


def test_promoted_names_both_deployments(seeded: Registry) -> None:
    _story(seeded)
    first, second, third = _events(seeded, "PROMOTED")
    assert first == (
        2_000,
        "d1",
        "production",
        {
            "deployment_id": "d1",
            "deployment_name": "v-d1",
            "previous_deployment_id": None,
            "previous_deployment_name": None,
            "environment": "production",
            "rolling": False,
            "percent": 100,
            "status": "SUCCEEDED",
            "old": {"deployment_id": None, "deployment_name": None},
            "new": {"deployment_id": "d1", "deployment_name": "v-d1"},
        },
    )
    assert second[3] == {
        "deployment_id": "d2",
        "deployment_name": "v-d2",
        "previous_deployment_id": "d1",
        "previous_deployment_name": "v-d1",
        "environment": "production",
        "rolling": True,
        "percent": 25,
        "status": "RAMPING_UP",
        "old": {"deployment_id": "d1", "deployment_name": "v-d1"},
        "new": {"deployment_id": "d2", "deployment_name": "v-d2"},
    }
    # the roll-forward at 5,000 completes the rolling promotion: a second PROMOTED of d2, at 100 %
    assert third == (5_000, "d2", "production", {**second[3], "percent": 100, "status": "SUCCEEDED"})


def test_promotion_control_has_status_and_percent_before_and_after(seeded: Registry) -> None:
    _story(seeded)
    both = {
        "deployment_id": "d2",
        "deployment_name": "v-d2",
        "previous_deployment_id": "d1",
        "previous_deployment_name": "v-d1",
        "environment": "production",
    }
    assert _events(seeded, "PROMOTION_CONTROL") == [
        (
            4_000,
            "d2",
            "production",
            {
                **both,
                "action": "PAUSE",
                "percent": 25,
                "status": "PAUSED",
                "old": {"status": "RAMPING_UP", "percent": 25},
                "new": {"status": "PAUSED", "percent": 25},
            },
        ),
        (
            5_000,
            "d2",
            "production",
            {
                **both,
                "action": "ROLL_FORWARD",
                "percent": 100,
                "status": "SUCCEEDED",
                "old": {"status": "PAUSED", "percent": 25},
                "new": {"status": "SUCCEEDED", "percent": 100},
            },
        ),
    ]


def test_deployment_events_name_the_environment_the_deployment_serves(seeded: Registry) -> None:
    _story(seeded)
    old_scaling = AutoscalingSettings().as_dict()
    assert _events(seeded, "AUTOSCALING_CHANGED") == [
        (
            6_000,
            "d2",
            "production",  # d2 serves production since the roll-forward at 5,000
            {
                "deployment_id": "d2",
                "deployment_name": "v-d2",
                "environment": "production",
                "old": old_scaling,
                "new": {**old_scaling, "max_replica": 3},
            },
        )
    ]
    assert _events(seeded, "INSTANCE_TYPE_CHANGED") == [
        (
            7_000,
            "d3",
            None,  # d3 serves no environment
            {
                "deployment_id": "d3",
                "deployment_name": "v-d3",
                "environment": None,
                "old": {"instance_type_name": "1xH100", "gpu_type": "H100", "gpu_count": 1},
                "new": {"instance_type_name": "2xA100", "gpu_type": "A100", "gpu_count": 2},
            },
        )
    ]
    assert _events(seeded, "REPLICA_TERMINATED") == [
        (
            9_000,
            "d2",
            "production",
            {
                "deployment_id": "d2",
                "deployment_name": "v-d2",
                "environment": "production",
                "replica": "r1",
                "old_status": "ACTIVE",
                "status": "TERMINATED",
                "old": {"status": "ACTIVE"},
                "new": {"status": "TERMINATED"},
            },
        )
    ]
    assert _events(seeded, "DEPLOYED")[-1] == (
        12_000,
        "d4",
        "staging",
        {
            "deployment_id": "d4",
            "deployment_name": "v-d4",
            "environment": "staging",
            "name": "v-d4",
            "instance_type_name": "CPU",
            "old": None,
            "new": {"instance_type_name": "CPU", "gpu_type": None, "gpu_count": 0, "status": "ACTIVE"},
        },
    )


def test_activation_of_a_deployment_and_of_an_environment(seeded: Registry) -> None:
    _story(seeded)
    (dep_off, env_off) = _events(seeded, "DEACTIVATED")
    assert dep_off == (
        8_000,
        "d1",
        None,  # d1 stopped serving production at 5,000
        {
            "deployment_id": "d1",
            "deployment_name": "v-d1",
            "environment": None,
            "old": {"status": "ACTIVE"},
            "new": {"status": "INACTIVE"},
        },
    )
    assert env_off == (
        11_000,
        None,
        "production",
        {
            "deployment_id": "d2",  # what the environment points at, for the hover
            "deployment_name": "v-d2",
            "environment": "production",
            "old": {"active": True},
            "new": {"active": False},
        },
    )
    seeded.environments.activate_environment("m1", "production", at_ms=13_000)
    assert _events(seeded, "ACTIVATED")[-1][3]["new"] == {"active": True}


def test_environment_updated_has_old_and_new_settings(seeded: Registry) -> None:
    _story(seeded)
    created, updated = _events(seeded, "ENVIRONMENT_UPDATED")
    assert created == (
        1_000,
        None,
        "production",
        {
            "deployment_id": None,  # no deployment yet
            "deployment_name": None,
            "environment": "production",
            "action": "created",
            "promotion_settings": DEFAULT_PROMOTION_SETTINGS,
            "old": None,
            "new": {"promotion_settings": DEFAULT_PROMOTION_SETTINGS, "autoscaling_settings": None},
        },
    )
    assert updated[3]["deployment_id"] == "d2" and updated[3]["environment"] == "production"
    assert updated[3]["action"] == "updated"
    assert updated[3]["old"]["promotion_settings"]["ramp_up_duration_seconds"] == 600
    assert updated[3]["new"]["promotion_settings"]["ramp_up_duration_seconds"] == 60


def test_every_kind_has_the_hover_fields(seeded: Registry) -> None:
    _story(seeded)
    seeded.deployments.activate_deployment("m1", "d1", at_ms=14_000)
    seeded.deployments.register_replica("m1", "d2", "r9", ["http://10.0.0.9/metrics"], at_ms=15_000)
    seeded.deployments.set_replica_status("m1", "d2", "r9", "FAILED", "down", at_ms=16_000)
    seeded.deployments.set_replica_status("m1", "d2", "r9", "ACTIVE", "healthy", at_ms=17_000)
    events = seeded.events.list_events("m1", 0, 10**9)
    assert {e.kind for e in events} == set(EVENT_KINDS)
    for e in events:
        assert {"deployment_id", "deployment_name", "environment", "old", "new"} <= set(e.details), e
