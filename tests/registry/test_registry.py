"""Registry behaviour on SQLite and PostgreSQL: tenancy, keys, timeline, control, events, targets."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, inspect, select, text

from servemetrics.registry import Conflict, InvalidValue, NotFound, Registry
from servemetrics.registry import tables as t
from servemetrics.registry.migrations import MIGRATIONS, applied, migrate, schema_migrations

D1, D2, D3 = frozenset({"d1"}), frozenset({"d2"}), frozenset({"d3"})
NOTHING: frozenset[str] = frozenset()


def _kinds(reg: Registry, model_id: str = "m1") -> list[tuple[int, str]]:
    return [(e.at_ms, e.kind) for e in reg.events.list_events(model_id, 0, 10**12)]


def test_migrations_are_recorded_and_idempotent(registry: Registry) -> None:
    assert applied(registry.engine) == [name for name, _ in MIGRATIONS]
    assert migrate(registry.engine) == []
    Registry(registry.engine)  # constructing again migrates nothing and keeps the pepper
    assert len(applied(registry.engine)) == len(MIGRATIONS)


def test_target_in_flight_tokens_migration_adds_the_column_to_an_older_schema(registry: Registry) -> None:
    """A registry made before 0005 (no ``deployments.target_in_flight_tokens``) gets the column, null."""
    with registry.engine.begin() as conn:
        conn.execute(text("ALTER TABLE deployments DROP COLUMN target_in_flight_tokens"))
        conn.execute(
            delete(schema_migrations).where(schema_migrations.c.name == "0005_target_in_flight_tokens")
        )
    assert migrate(registry.engine) == ["0005_target_in_flight_tokens"]
    columns = {c["name"] for c in inspect(registry.engine).get_columns("deployments")}
    assert "target_in_flight_tokens" in columns
    assert migrate(registry.engine) == []


def test_keys_are_stored_hashed_and_authenticate(seeded: Registry) -> None:
    info = seeded.tenancy.add_api_key(
        "acme", "plain-key-0123456789", "WORKSPACE_EXPORT_METRICS", model_ids=["m1"]
    )
    raw, generated = seeded.tenancy.create_api_key("other", "WORKSPACE_MANAGE_ALL", name="ci")
    with seeded.engine.connect() as conn:
        rows = [tuple(str(v) for v in r) for r in conn.execute(select(t.api_keys))]
    assert all("plain-key-0123456789" not in v and raw not in v for row in rows for v in row)
    assert seeded.tenancy.authenticate("plain-key-0123456789") == info
    assert info.organization_name == "acme" and info.model_ids == frozenset({"m1"})
    assert seeded.tenancy.authenticate(raw) == generated and generated.prefix == raw.split(".")[0]
    assert seeded.tenancy.authenticate("plain-key-0123456789x") is None
    assert seeded.tenancy.authenticate("") is None


def test_key_upsert_prune_and_delete(seeded: Registry) -> None:
    from servemetrics.registry.keys import digest

    seeded.tenancy.add_api_key("acme", "config-key-1", "WORKSPACE_MANAGE_ALL", source="config")
    seeded.tenancy.add_api_key("acme", "config-key-2", "WORKSPACE_MANAGE_ALL", source="config")
    api = seeded.tenancy.add_api_key("acme", "api-key-3", "PERSONAL")
    again = seeded.tenancy.add_api_key("acme", "config-key-1", "WORKSPACE_INVOKE", source="config")
    assert again.type == "WORKSPACE_INVOKE"
    assert seeded.tenancy.prune_config_keys("acme", [digest("config-key-1")]) == 1
    assert (
        seeded.tenancy.authenticate("config-key-2") is None
        and seeded.tenancy.authenticate("api-key-3") == api
    )
    assert seeded.tenancy.delete_api_key(api.organization_id, api.prefix) is True
    assert [key.type for key in seeded.tenancy.list_api_keys(api.organization_id)] == ["WORKSPACE_INVOKE"]
    with pytest.raises(InvalidValue, match="model_ids only applies"):
        seeded.tenancy.add_api_key("acme", "k", "PERSONAL", model_ids=["m1"])
    with pytest.raises(NotFound, match="no organization 'nope'"):
        seeded.tenancy.add_api_key("nope", "k", "PERSONAL")


def test_lookups_are_scoped_to_organization_and_model(seeded: Registry) -> None:
    acme, other = seeded.tenancy.organization_id("acme"), seeded.tenancy.organization_id("other")
    model = seeded.tenancy.model("m1", acme)
    assert model is not None and model.name == "llama" and model.organization_name == "acme"
    assert seeded.tenancy.model("m1", other) is None and seeded.tenancy.model("nope", acme) is None
    assert [m.id for m in seeded.tenancy.list_models(acme)] == ["m1"]
    assert seeded.deployments.deployment("m1", "e1") is None  # another model's deployment
    assert seeded.deployments.deployment("m1", "d1") is not None
    assert seeded.environments.environment("m2", "production") is None
    d1 = seeded.deployments.deployment("m1", "d1")
    assert (
        d1 is not None
        and d1.instance_type_name == "1xH100"
        and d1.autoscaling.as_dict()
        == {
            "min_replica": 0,
            "max_replica": 1,
            "autoscaling_window": 60,
            "scale_down_delay": 900,
            "concurrency_target": 1,
            "target_utilization_percentage": 70,
            "target_in_flight_tokens": None,
        }
    )


def test_instant_promotions_timeline(seeded: Registry) -> None:
    seeded.environments.promote("m1", "production", "d1", at_ms=10_000)
    seeded.environments.promote("m1", "production", "d2", at_ms=50_000)
    assert seeded.environments.serving_timeline("m1", "production", 0, 100_000) == [
        (0, NOTHING),
        (10_000, D1),
        (50_000, D2),
    ]
    assert seeded.environments.serving_timeline("m1", "production", 20_000, 100_000) == [
        (20_000, D1),
        (50_000, D2),
    ]
    assert seeded.environments.serving_timeline("m1", "production", 50_000, 60_000) == [(50_000, D2)]
    assert seeded.environments.serving_timeline("m1", "production", 20_000, 50_000) == [(20_000, D1)]
    assert seeded.environments.serving_timeline("m1", "staging", 0, 1) == [(0, NOTHING)]
    env = seeded.environments.environment("m1", "production")
    assert env is not None and env.current_deployment_id == "d2" and env.in_progress_promotion is None
    with pytest.raises(Conflict, match="already serves"):
        seeded.environments.promote("m1", "production", "d2", at_ms=60_000)
    with pytest.raises(NotFound):
        seeded.environments.promote("m1", "production", "e1", at_ms=60_000)


def test_rolling_promotion_25_then_100(seeded: Registry) -> None:
    seeded.environments.promote("m1", "production", "d1", at_ms=10_000)
    p = seeded.environments.promote("m1", "production", "d2", percent=25, at_ms=30_000)
    assert (p.status, p.percent_traffic_to_new_version, p.rolling, p.previous_deployment_id) == (
        "RAMPING_UP",
        25,
        True,
        "d1",
    )
    seeded.environments.set_promotion_percent("m1", "production", 60, at_ms=40_000)
    env = seeded.environments.environment("m1", "production")
    assert env is not None and (env.current_deployment_id, env.candidate_deployment_id) == ("d1", "d2")
    assert (
        env.in_progress_promotion is not None
        and env.in_progress_promotion.percent_traffic_to_new_version == 60
    )
    with pytest.raises(Conflict, match="already has a promotion"):
        seeded.environments.promote("m1", "production", "d3", at_ms=45_000)
    done = seeded.environments.set_promotion_percent("m1", "production", 100, at_ms=60_000)
    assert done.status == "SUCCEEDED" and done.ended_at_ms == 60_000
    assert seeded.environments.serving_timeline("m1", "production", 0, 100_000) == [
        (0, NOTHING),
        (10_000, D1),
        (30_000, D1 | D2),
        (60_000, D2),
    ]
    assert seeded.environments.serving_timeline("m1", "production", 35_000, 45_000) == [(35_000, D1 | D2)]
    assert seeded.environments.promotion_steps(p.id) == [
        (30_000, "START", 25),
        (40_000, "STEP", 60),
        (60_000, "STEP", 100),
    ]


def test_cancel_restores_previous(seeded: Registry) -> None:
    seeded.environments.promote("m1", "production", "d1", at_ms=10_000)
    seeded.environments.promote("m1", "production", "d2", percent=25, at_ms=30_000)
    p = seeded.environments.cancel_promotion("m1", "production", at_ms=45_000)
    assert p.status == "CANCELED"
    assert seeded.environments.serving_timeline("m1", "production", 0, 100_000) == [
        (0, NOTHING),
        (10_000, D1),
        (30_000, D1 | D2),
        (45_000, D1),
    ]
    env = seeded.environments.environment("m1", "production")
    assert env is not None and env.current_deployment_id == "d1" and env.in_progress_promotion is None
    with pytest.raises(Conflict, match="no promotion in progress"):
        seeded.environments.cancel_promotion("m1", "production", at_ms=46_000)


def test_pause_resume_roll_forward_and_control_events(seeded: Registry) -> None:
    seeded.environments.promote("m1", "production", "d1", at_ms=10_000)
    seeded.environments.promote(
        "m1", "production", "d2", rolling=True, at_ms=30_000
    )  # rolling from 0 %: RELEASING
    assert seeded.environments.pause_promotion("m1", "production", at_ms=31_000).status == "PAUSED"
    with pytest.raises(Conflict, match="cannot pause a promotion that is PAUSED"):
        seeded.environments.pause_promotion("m1", "production", at_ms=31_500)
    assert seeded.environments.set_promotion_percent("m1", "production", 40, at_ms=32_000).status == "PAUSED"
    assert seeded.environments.resume_promotion("m1", "production", at_ms=33_000).status == "RAMPING_UP"
    with pytest.raises(Conflict, match="cannot resume"):
        seeded.environments.resume_promotion("m1", "production", at_ms=33_500)
    done = seeded.environments.force_roll_forward_promotion("m1", "production", at_ms=34_000)
    assert (done.status, done.percent_traffic_to_new_version) == ("SUCCEEDED", 100)
    assert seeded.environments.serving_timeline("m1", "production", 0, 100_000) == [
        (0, NOTHING),
        (10_000, D1),
        (30_000, D1 | D2),
        (34_000, D2),
    ]
    events = [
        (e.at_ms, e.kind, e.details.get("action"), e.details["percent"], e.details["status"])
        for e in seeded.events.list_events("m1", 30_000, 10**6, ["PROMOTED", "PROMOTION_CONTROL"])
    ]
    assert events == [
        (30_000, "PROMOTED", None, 0, "RELEASING"),
        (31_000, "PROMOTION_CONTROL", "PAUSE", 0, "PAUSED"),
        (32_000, "PROMOTION_CONTROL", "STEP", 40, "PAUSED"),  # a step keeps a paused promotion paused
        (33_000, "PROMOTION_CONTROL", "RESUME", 40, "RAMPING_UP"),
        (34_000, "PROMOTION_CONTROL", "ROLL_FORWARD", 100, "SUCCEEDED"),
        (34_000, "PROMOTED", None, 100, "SUCCEEDED"),  # the roll-forward completed it
    ]


def test_force_cancel_and_deactivated_environment(seeded: Registry) -> None:
    seeded.environments.promote("m1", "production", "d1", at_ms=10_000)
    seeded.environments.promote("m1", "production", "d2", percent=50, at_ms=20_000)
    seeded.environments.force_cancel_promotion("m1", "production", at_ms=25_000)
    assert seeded.environments.deactivate_environment("m1", "production", at_ms=30_000) is True
    assert seeded.environments.deactivate_environment("m1", "production", at_ms=31_000) is False
    assert seeded.environments.activate_environment("m1", "production", at_ms=40_000) is True
    assert seeded.environments.serving_timeline("m1", "production", 0, 100_000) == [
        (0, NOTHING),
        (10_000, D1),
        (20_000, D1 | D2),
        (25_000, D1),
        (30_000, NOTHING),
        (40_000, D1),
    ]
    assert seeded.environments.serving_timeline("m1", "production", 35_000, 39_000) == [(35_000, NOTHING)]
    kinds = [k for _, k in _kinds(seeded) if k in ("ACTIVATED", "DEACTIVATED")]
    assert kinds == ["DEACTIVATED", "ACTIVATED"]


def test_autoscaling_update_records_old_and_new(seeded: Registry) -> None:
    assert (
        seeded.deployments.update_autoscaling(
            "m1", "d1", {"max_replica": 4, "concurrency_target": 8}, at_ms=5_000
        )
        == "ACCEPTED"
    )
    assert seeded.deployments.update_autoscaling("m1", "d1", {"max_replica": 4}, at_ms=6_000) == "UNCHANGED"
    (event,) = seeded.events.list_events("m1", 0, 10**6, ["AUTOSCALING_CHANGED"])
    assert event.at_ms == 5_000 and event.deployment_id == "d1"
    assert (event.details["old"]["max_replica"], event.details["new"]["max_replica"]) == (1, 4)
    assert (event.details["old"]["concurrency_target"], event.details["new"]["concurrency_target"]) == (1, 8)
    with pytest.raises(InvalidValue, match="target_utilization_percentage must be an integer 1..100"):
        seeded.deployments.update_autoscaling("m1", "d1", {"target_utilization_percentage": 101})
    with pytest.raises(InvalidValue, match="min_replica \\(5\\) must not exceed max_replica \\(4\\)"):
        seeded.deployments.update_autoscaling("m1", "d1", {"min_replica": 5})
    with pytest.raises(InvalidValue, match="unknown autoscaling setting 'speed'"):
        seeded.deployments.update_autoscaling("m1", "d1", {"speed": 1})


def test_deployment_status_instance_type_and_events(seeded: Registry) -> None:
    assert seeded.deployments.deactivate_deployment("m1", "d1", at_ms=2_000) is True
    assert seeded.deployments.deactivate_deployment("m1", "d1", at_ms=2_500) is False
    assert seeded.deployments.activate_deployment("m1", "d1", at_ms=3_000) is True
    assert seeded.deployments.set_instance_type("m1", "d1", "A10G", 2, at_ms=4_000) is True
    assert seeded.deployments.set_instance_type("m1", "d1", "A10G", 2, at_ms=4_500) is False
    d1 = seeded.deployments.deployment("m1", "d1")
    assert d1 is not None and (d1.status, d1.instance_type_name, d1.gpu_count) == ("ACTIVE", "2xA10G", 2)
    assert _kinds(seeded)[-3:] == [
        (2_000, "DEACTIVATED"),
        (3_000, "ACTIVATED"),
        (4_000, "INSTANCE_TYPE_CHANGED"),
    ]
    with pytest.raises(Conflict):
        seeded.deployments.create_deployment("m1", "d1", "dup")
    with pytest.raises(NotFound):
        seeded.deployments.activate_deployment("m1", "e1")


def test_replicas_targets_and_termination(seeded: Registry) -> None:
    seeded.deployments.ensure_target("m1", "d1", "r1", "http://10.0.0.1:8080/metrics")
    seeded.deployments.ensure_target("m1", "d1", "r1", "http://10.0.0.1:9400/metrics", kind="dcgm")
    seeded.deployments.ensure_target("m1", "d2", "r1", "http://10.0.0.2:8080/metrics")
    seeded.environments.promote("m1", "production", "d1", at_ms=2_000)
    seeded.environments.promote("m1", "production", "d2", percent=10, at_ms=3_000)
    targets = {(x.deployment_id, x.url): x for x in seeded.list_targets()}
    assert len(targets) == 3
    first = targets[("d1", "http://10.0.0.1:8080/metrics")]
    assert (first.model_id, first.model_name, first.replica, first.environment, first.rollout_phase) == (
        "m1",
        "llama",
        "r1",
        "production",
        "promoting",
    )
    assert targets[("d2", "http://10.0.0.2:8080/metrics")].rollout_phase == "promoting"
    assert targets[("d1", "http://10.0.0.1:9400/metrics")].kind == "dcgm"
    d1 = seeded.deployments.deployment("m1", "d1")
    assert d1 is not None and d1.active_replica_count == 1
    replica = seeded.deployments.terminate_replica("m1", "d1", "r1", at_ms=9_000)
    assert (replica.status, replica.terminated_at_ms) == ("TERMINATED", 9_000)
    assert [x.deployment_id for x in seeded.list_targets()] == ["d2"]
    (event,) = seeded.events.list_events("m1", 0, 10**6, ["REPLICA_TERMINATED"])
    assert (event.at_ms, event.deployment_id, event.details["replica"]) == (9_000, "d1", "r1")
    with pytest.raises(NotFound, match="no replica 'r9'"):
        seeded.deployments.terminate_replica("m1", "d1", "r9")


def test_events_filtering_and_validation(seeded: Registry) -> None:
    seeded.events.record_event("m1", "DEPLOYED", at_ms=100, deployment_id="d1", details={"note": "x"})
    seeded.environments.promote("m1", "production", "d1", at_ms=200)
    seeded.environments.promote("m1", "production", "d2", at_ms=300)
    assert [e.at_ms for e in seeded.events.list_events("m1", 150, 300, ["PROMOTED"])] == [200, 300]
    assert [e.at_ms for e in seeded.events.list_events("m1", 0, 250, ["PROMOTED", "DEPLOYED"])] == [100, 200]
    promoted = seeded.events.list_events("m1", 300, 300)[0]
    assert promoted.details["previous_deployment_id"] == "d1" and promoted.environment == "production"
    assert seeded.events.list_events("m2", 0, 10**9, ["PROMOTED"]) == []
    with pytest.raises(InvalidValue, match="unknown event kind"):
        seeded.events.record_event("m1", "EXPLODED")
    with pytest.raises(InvalidValue, match="unknown event kinds NOPE"):
        seeded.events.list_events("m1", 0, 1, ["NOPE"])


def test_environment_create_update_and_defaults(seeded: Registry) -> None:
    env = seeded.environments.environment("m1", "production")
    assert env is not None and env.promotion_settings["rolling_deploy"] is False
    assert env.promotion_settings["rolling_deploy_config"]["max_surge_percent"] == 25
    updated = seeded.environments.update_environment(
        "m1", "production", promotion_settings={"rolling_deploy": True}
    )
    assert updated.promotion_settings["rolling_deploy"] is True
    p = seeded.environments.promote(
        "m1", "production", "d1", at_ms=500
    )  # rolling by the environment's setting
    assert (p.rolling, p.status, p.percent_traffic_to_new_version) == (True, "RELEASING", 0)
    with pytest.raises(Conflict, match="already has an environment"):
        seeded.environments.create_environment("m1", "production")
    with pytest.raises(InvalidValue, match="unknown promotion settings"):
        seeded.environments.create_environment("m1", "staging", promotion_settings={"speed": 1})
    updates = [
        e.details["action"] for e in seeded.events.list_events("m1", 0, 10**6, ["ENVIRONMENT_UPDATED"])
    ]
    assert updates == ["created", "updated"]


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"rolling_deploy_config": "x"}, "rolling_deploy_config must be an object, not 'x'"),
        ({"rolling_deploy_config": [1]}, "rolling_deploy_config must be an object, not [1]"),
        (
            {"rolling_deploy_config": {"zzz": 1}},
            "unknown rolling_deploy_config settings zzz; use rolling_deploy_strategy, max_surge_percent, "
            "max_unavailable_percent, stabilization_time_seconds, replica_overhead_percent",
        ),
        ({"rolling_deploy": "false"}, "rolling_deploy must be true or false, not 'false'"),
        (
            {"ramp_up_duration_seconds": 10**30},
            f"ramp_up_duration_seconds must be an integer 0..1000000, not {10**30}",
        ),
        (
            {"promotion_cleanup_strategy": "NUKE"},
            "promotion_cleanup_strategy must be one of KEEP, SCALE_TO_ZERO, DEACTIVATE, not 'NUKE'",
        ),
    ],
)
def test_bad_promotion_settings_are_invalid_values(seeded: Registry, settings: dict, error: str) -> None:
    with pytest.raises(InvalidValue) as err:
        seeded.environments.create_environment("m1", "staging", promotion_settings=settings)
    assert str(err.value) == error
    with pytest.raises(InvalidValue):
        seeded.environments.update_environment("m1", "production", promotion_settings=settings)
    assert seeded.environments.environment("m1", "staging") is None


def test_huge_autoscaling_values_and_partial_instant_promotions_are_invalid(seeded: Registry) -> None:
    with pytest.raises(InvalidValue, match=r"max_replica must be an integer 1\.\.1000000"):
        seeded.deployments.update_autoscaling("m1", "d1", {"max_replica": 10**30})
    with pytest.raises(InvalidValue, match=r"max_replica must be an integer 1\.\.1000000"):
        seeded.environments.update_environment(
            "m1", "production", autoscaling_settings={"max_replica": 10**30}
        )
    with pytest.raises(InvalidValue, match="percent 50 needs a rolling promotion"):
        seeded.environments.promote("m1", "production", "d1", rolling=False, percent=50)
    assert seeded.environments.promotions("m1", "production") == []
