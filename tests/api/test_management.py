"""Management API: auth (401 / 403 / 404), models, deployments, environments, promotion control, events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from servemetrics.api.errors import install_error_handlers
from servemetrics.api.routes import environments, events, management
from servemetrics.registry import Registry
from tests.apptools import service_over

MANAGE = {"Authorization": "Api-Key acme-manage-key"}
BEARER = {"Authorization": "Bearer acme-manage-key"}
EXPORT = {"Authorization": "Api-Key acme-export-m1"}
INVOKE = {"Authorization": "Api-Key acme-invoke-key"}
OTHER = {"Authorization": "Api-Key other-manage-key"}
BASE = "/v1/models/m1"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry.open(f"sqlite:///{tmp_path / 'registry.sqlite3'}", clock=lambda: 1_700_000_000_000)
    for org in ("acme", "other"):
        reg.tenancy.ensure_organization(org)
    reg.tenancy.add_api_key("acme", "acme-manage-key", "WORKSPACE_MANAGE_ALL")
    reg.tenancy.add_api_key("acme", "acme-export-m1", "WORKSPACE_EXPORT_METRICS", model_ids=["m1"])
    reg.tenancy.add_api_key("acme", "acme-invoke-key", "WORKSPACE_INVOKE")
    reg.tenancy.add_api_key("other", "other-manage-key", "WORKSPACE_MANAGE_ALL")
    reg.tenancy.ensure_model("m1", "llama", "acme")
    reg.tenancy.ensure_model("m3", "mistral", "acme")
    reg.tenancy.ensure_model("m2", "whisper", "other")
    reg.deployments.create_deployment("m1", "d1", "v1", gpu_type="H100", gpu_count=1, at_ms=1_000)
    reg.deployments.create_deployment("m1", "d2", "v2", gpu_type="H100", gpu_count=2, at_ms=2_000)
    reg.deployments.ensure_replica("m1", "d1", "r1")
    reg.environments.create_environment("m1", "production", at_ms=3_000)
    reg.environments.promote("m1", "production", "d1", at_ms=4_000)
    yield reg
    reg.close()


@pytest.fixture
def client(registry: Registry, tmp_path: Path) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    for module in (management, environments, events):
        app.include_router(module.router)
    app.state.service = service_over(registry, tmp_path)
    return TestClient(app)


def test_missing_and_bad_keys_are_401_saying_which_header(client: TestClient) -> None:
    res = client.get("/v1/models")
    assert res.status_code == 401
    assert res.json() == {
        "error": "missing API key: send `Authorization: Api-Key <key>` or `Authorization: Bearer <key>`"
    }
    assert client.get("/v1/models", headers={"Authorization": "Basic abc"}).status_code == 401
    res = client.get("/v1/models", headers={"Authorization": "Api-Key wrong"})
    assert res.status_code == 401 and res.json()["error"].startswith("invalid API key")


def test_bearer_and_api_key_both_work_and_list_only_own_models(client: TestClient) -> None:
    for headers in (MANAGE, BEARER):
        res = client.get("/v1/models", headers=headers)
        assert res.status_code == 200
        assert [m["id"] for m in res.json()["models"]] == ["m1", "m3"]
    assert [m["id"] for m in client.get("/v1/models", headers=EXPORT).json()["models"]] == ["m1"]
    assert [m["id"] for m in client.get("/v1/models?name=mistral", headers=MANAGE).json()["models"]] == ["m3"]


def test_model_v1(client: TestClient) -> None:
    assert client.get(BASE, headers=MANAGE).json() == {
        "id": "m1",
        "created_at": "2023-11-14T22:13:20.000Z",
        "name": "llama",
        "deployments_count": 2,
        "production_deployment_id": "d1",
        "development_deployment_id": None,
        "instance_type_name": "1xH100",
        "team_name": "acme",
    }


def test_another_organizations_model_is_404_never_403(client: TestClient) -> None:
    for path in ("/v1/models/m2", "/v1/models/m2/deployments", "/v1/models/m2/environments/production"):
        res = client.get(path, headers=MANAGE)
        assert res.status_code == 404 and "no model 'm2'" in res.json()["error"]
    assert client.post("/v1/models/m2/deployments/e1/activate", headers=MANAGE).status_code == 404
    assert client.get(BASE, headers=OTHER).status_code == 404
    assert client.get("/v1/models/m3", headers=EXPORT).status_code == 404  # outside the key's model_ids


def test_key_types_that_may_not_act_get_403(client: TestClient) -> None:
    assert client.get(BASE, headers=EXPORT).status_code == 200
    res = client.post(f"{BASE}/deployments/d1/deactivate", headers=EXPORT)
    assert (
        res.status_code == 403 and "WORKSPACE_EXPORT_METRICS key cannot change models" in res.json()["error"]
    )
    assert client.get(BASE, headers=INVOKE).status_code == 403


def test_deployments_and_aliases(client: TestClient) -> None:
    deployments = client.get(f"{BASE}/deployments", headers=MANAGE).json()["deployments"]
    assert [(d["id"], d["is_production"], d["environment"]) for d in deployments] == [
        ("d1", True, "production"),
        ("d2", False, None),
    ]
    d1 = client.get(f"{BASE}/deployments/production", headers=MANAGE).json()
    assert (d1["id"], d1["status"], d1["active_replica_count"], d1["instance_type_name"]) == (
        "d1",
        "ACTIVE",
        1,
        "1xH100",
    )
    assert d1["autoscaling_settings"] == {
        "min_replica": 0,
        "max_replica": 1,
        "autoscaling_window": 60,
        "scale_down_delay": 900,
        "concurrency_target": 1,
        "target_utilization_percentage": 70,
        "target_in_flight_tokens": None,  # the platform's field (early access): unset
    }
    res = client.get(f"{BASE}/deployments/development", headers=MANAGE)
    assert res.status_code == 404 and "no deployment 'development'" in res.json()["error"]
    assert client.get(f"{BASE}/deployments/nope", headers=MANAGE).status_code == 404


def test_activate_deactivate_and_events(client: TestClient, registry: Registry) -> None:
    assert client.post(f"{BASE}/deployments/d2/deactivate", headers=MANAGE).json() == {"success": True}
    assert client.get(f"{BASE}/deployments/d2", headers=MANAGE).json()["status"] == "INACTIVE"
    assert client.post(f"{BASE}/deployments/d2/activate", headers=MANAGE).json() == {"success": True}
    kinds = [e.kind for e in registry.events.list_events("m1", 0, 10**15, ["ACTIVATED", "DEACTIVATED"])]
    assert kinds == ["DEACTIVATED", "ACTIVATED"]


def test_autoscaling_patch(client: TestClient) -> None:
    path = f"{BASE}/deployments/d1/autoscaling_settings"
    res = client.patch(path, headers=MANAGE, json={"max_replica": 3})
    assert res.json()["status"] == "ACCEPTED"
    assert client.patch(path, headers=MANAGE, json={"max_replica": 3}).json()["status"] == "UNCHANGED"
    assert (
        client.get(f"{BASE}/deployments/d1", headers=MANAGE).json()["autoscaling_settings"]["max_replica"]
        == 3
    )
    res = client.patch(path, headers=MANAGE, json={"autoscaling_window": 5})
    assert res.status_code == 400
    assert res.json() == {"error": "invalid request: autoscaling_window: must be an integer 10..3600, not 5"}
    assert client.patch(path, headers=MANAGE, json={"speed": 5}).status_code == 400


def test_target_in_flight_tokens_is_stored_returned_and_unset_by_null(client: TestClient) -> None:
    path = f"{BASE}/deployments/d1/autoscaling_settings"

    def tokens() -> object:
        settings = client.get(f"{BASE}/deployments/d1", headers=MANAGE).json()["autoscaling_settings"]
        return settings["target_in_flight_tokens"]

    assert (
        client.patch(path, headers=MANAGE, json={"target_in_flight_tokens": 800}).json()["status"]
        == "ACCEPTED"
    )
    assert tokens() == 800
    assert client.patch(path, headers=MANAGE, json={"max_replica": 4}).json()["status"] == "ACCEPTED"
    assert tokens() == 800  # a field left out keeps its value
    assert (
        client.patch(path, headers=MANAGE, json={"target_in_flight_tokens": None}).json()["status"]
        == "ACCEPTED"
    )
    assert tokens() is None  # an explicit null unsets it: back to concurrency
    for bad in (0, -5, "800", 800.0, True):
        res = client.patch(path, headers=MANAGE, json={"target_in_flight_tokens": bad})
        error = (
            f"invalid request: target_in_flight_tokens: must be an integer 1..1000000 or null, not {bad!r}"
        )
        assert (res.status_code, res.json()) == (400, {"error": error})
    assert tokens() is None


def test_terminate_replica(client: TestClient) -> None:
    assert client.delete(f"{BASE}/deployments/d1/replicas/r1", headers=MANAGE).json() == {"success": True}
    assert client.get(f"{BASE}/deployments/d1", headers=MANAGE).json()["active_replica_count"] == 0
    res = client.delete(f"{BASE}/deployments/d1/replicas/r9", headers=MANAGE)
    assert res.status_code == 404 and "no replica 'r9'" in res.json()["error"]


def test_environments_create_get_and_conflict(client: TestClient) -> None:
    res = client.post(
        f"{BASE}/environments",
        headers=MANAGE,
        json={"name": "staging", "promotion_settings": {"rolling_deploy": True}},
    )
    assert res.status_code == 200  # the platform declares only 200 (platform-facts §4); its SDK wants it
    assert (
        res.json()["name"],
        res.json()["current_deployment"],
        res.json()["promotion_settings"]["rolling_deploy"],
    ) == ("staging", None, True)
    dup = client.post(f"{BASE}/environments", headers=MANAGE, json={"name": "staging"})
    assert dup.status_code == 409 and "already has an environment 'staging'" in dup.json()["error"]
    names = [e["name"] for e in client.get(f"{BASE}/environments", headers=MANAGE).json()["environments"]]
    assert names == ["production", "staging"]
    prod = client.get(f"{BASE}/environments/production", headers=MANAGE).json()
    assert prod["current_deployment"]["id"] == "d1" and prod["in_progress_promotion"] is None
    assert prod["instance_type"] == {  # d1's, with the limits we do not know at 0 / null
        "id": "1xH100",
        "name": "1xH100",
        "memory_limit_mib": 0,
        "millicpu_limit": 0,
        "gpu_count": 1,
        "gpu_type": "H100",
        "gpu_memory_limit_mib": None,
    }
    assert client.get(f"{BASE}/environments/nope", headers=MANAGE).status_code == 404
    patched = client.patch(
        f"{BASE}/environments/staging",
        headers=MANAGE,
        json={"promotion_settings": {"ramp_up_duration_seconds": 60}},
    )
    assert patched.json()["environment"]["promotion_settings"]["ramp_up_duration_seconds"] == 60


def test_rolling_promotion_control(client: TestClient, registry: Registry) -> None:
    env = f"{BASE}/environments/production"
    res = client.post(f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2", "percent": 25})
    assert res.status_code == 200 and res.json()["id"] == "d2"
    running = client.get(env, headers=MANAGE).json()
    assert running["in_progress_promotion"] == {
        "status": "RAMPING_UP",
        "percent_traffic_to_new_version": 25,
        "error_message": None,
        "rolling_deploy": True,
    }
    assert (running["current_deployment"]["id"], running["candidate_deployment"]["id"]) == ("d1", "d2")
    again = client.post(f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2"})
    assert again.status_code == 409
    assert client.post(f"{env}/pause_promotion", headers=MANAGE).json() == {"success": True}
    assert client.get(env, headers=MANAGE).json()["in_progress_promotion"]["status"] == "PAUSED"
    assert client.post(f"{env}/resume_promotion", headers=MANAGE).json() == {"success": True}
    assert client.post(f"{env}/force_roll_forward_promotion", headers=MANAGE).json() == {"success": True}
    done = client.get(env, headers=MANAGE).json()
    assert done["current_deployment"]["id"] == "d2" and done["in_progress_promotion"] is None
    res = client.post(f"{env}/cancel_promotion", headers=MANAGE)
    assert res.status_code == 409 and "no promotion in progress" in res.json()["error"]
    now = 1_700_000_000_000
    assert registry.environments.serving_timeline("m1", "production", 0, now + 1) == [
        (0, frozenset()),
        (4_000, frozenset({"d1"})),
        (now, frozenset({"d2"})),
    ]


def test_instant_promote_cancel_and_environment_activation(client: TestClient, registry: Registry) -> None:
    env = f"{BASE}/environments/production"
    client.post(f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2", "rolling": True})
    assert client.post(f"{env}/cancel_promotion", headers=MANAGE).json() == {
        "status": "CANCELED",
        "message": "promotion of d2 canceled",
    }
    assert client.post(f"{env}/force_cancel_promotion", headers=MANAGE).status_code == 409
    assert client.post(f"{env}/deactivate", headers=MANAGE).json() == {"success": True}
    assert client.get(env, headers=MANAGE).json()["is_active"] is False
    assert client.post(f"{env}/activate", headers=MANAGE).json() == {"success": True}
    res = client.post(f"{env}/promote", headers=MANAGE, json={"deployment_id": "e1"})
    assert res.status_code == 404
    res = client.post(f"{BASE}/environments/nope/promote", headers=MANAGE, json={"deployment_id": "d2"})
    assert res.status_code == 404 and "no environment 'nope'" in res.json()["error"]
    assert client.post(f"{env}/promote", headers=MANAGE, json={}).status_code == 400


def test_events_endpoint(client: TestClient, registry: Registry) -> None:
    registry.deployments.update_autoscaling("m1", "d1", {"max_replica": 2}, at_ms=5_000)
    res = client.get(f"{BASE}/events?start_epoch_millis=0&end_epoch_millis=10000", headers=EXPORT)
    assert [(e["epoch_millis"], e["kind"]) for e in res.json()["events"]] == [
        (1_000, "DEPLOYED"),
        (2_000, "DEPLOYED"),
        (3_000, "ENVIRONMENT_UPDATED"),
        (4_000, "PROMOTED"),
        (5_000, "AUTOSCALING_CHANGED"),
    ]
    res = client.get(
        f"{BASE}/events?start_epoch_millis=0&end_epoch_millis=10000&kinds=PROMOTED,deployed", headers=MANAGE
    )
    assert [e["kind"] for e in res.json()["events"]] == ["DEPLOYED", "DEPLOYED", "PROMOTED"]
    res = client.get(
        f"{BASE}/events?start_epoch_millis=0&end_epoch_millis=10000&kinds=AUTOSCALING_CHANGED&kinds=PROMOTED",
        headers=MANAGE,
    )
    promoted, scaled = res.json()["events"]
    assert promoted["environment"] == "production" and promoted["deployment_id"] == "d1"
    assert scaled["details"]["old"]["max_replica"] == 1 and scaled["details"]["new"]["max_replica"] == 2
    bad = client.get(f"{BASE}/events?kinds=EXPLODED", headers=MANAGE)
    assert bad.status_code == 400 and "unknown event kinds EXPLODED" in bad.json()["error"]
    assert (
        client.get(f"{BASE}/events?start_epoch_millis=5&end_epoch_millis=5", headers=MANAGE).status_code
        == 400
    )
    assert client.get(f"{BASE}/events?start_epoch_millis=abc", headers=MANAGE).status_code == 400
    assert client.get("/v1/models/m2/events", headers=MANAGE).status_code == 404


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"max_replica": 10**30}, f"max_replica: must be an integer 1..1000000, not {10**30}"),
        ({"min_replica": -1}, "min_replica: must be an integer 0..1000000, not -1"),
        ({"min_replica": "1"}, "min_replica: must be an integer 0..1000000, not '1'"),
        ({"min_replica": 1.0}, "min_replica: must be an integer 0..1000000, not 1.0"),
        ({"min_replica": True}, "min_replica: must be an integer 0..1000000, not True"),
        (
            {"target_utilization_percentage": 101},
            "target_utilization_percentage: must be an integer 1..100, not 101",
        ),
        ({"speed": 5}, "speed: unknown field; remove it"),
    ],
)
def test_autoscaling_patch_rejects_bad_values_with_400(client: TestClient, body: dict, error: str) -> None:
    res = client.patch(f"{BASE}/deployments/d1/autoscaling_settings", headers=MANAGE, json=body)
    assert (res.status_code, res.json()) == (400, {"error": f"invalid request: {error}"})
    assert (
        client.get(f"{BASE}/deployments/d1", headers=MANAGE).json()["autoscaling_settings"]["max_replica"]
        == 1
    )


_ENV_ERRORS = [
    (
        {"promotion_settings": {"rolling_deploy_config": "x"}},
        "promotion_settings.rolling_deploy_config: must be a JSON object",
    ),
    (
        {"promotion_settings": {"rolling_deploy_config": [1, 2]}},
        "promotion_settings.rolling_deploy_config: must be a JSON object",
    ),
    (
        {"promotion_settings": {"rolling_deploy_config": {"zzz": 1}}},
        "promotion_settings.rolling_deploy_config.zzz: unknown field; remove it",
    ),
    (
        {"promotion_settings": {"rolling_deploy_config": {"max_surge_percent": 101}}},
        "promotion_settings.rolling_deploy_config.max_surge_percent: must be an integer 0..100, not 101",
    ),
    (
        {"promotion_settings": {"rolling_deploy": "false"}},
        "promotion_settings.rolling_deploy: Input should be a valid boolean",
    ),
    ({"promotion_settings": {"foo": 1}}, "promotion_settings.foo: unknown field; remove it"),
    ({"promotion_settings": [1]}, "promotion_settings: must be a JSON object"),
    (
        {"promotion_settings": {"promotion_cleanup_strategy": "NUKE"}},
        "promotion_settings.promotion_cleanup_strategy: "
        "Input should be 'KEEP', 'SCALE_TO_ZERO' or 'DEACTIVATE'",
    ),
    (
        {"autoscaling_settings": {"max_replica": 10**30}},
        f"autoscaling_settings.max_replica: must be an integer 1..1000000, not {10**30}",
    ),
    (
        {"autoscaling_settings": {"min_replica": "lots"}},
        "autoscaling_settings.min_replica: must be an integer 0..1000000, not 'lots'",
    ),
    (
        {"request_backpressure_settings": {"policy": "NOPE"}},
        "request_backpressure_settings.policy: Input should be 'QUEUE_ON_FULL' or 'REJECT_ON_FULL'",
    ),
]


@pytest.mark.parametrize(("settings", "error"), _ENV_ERRORS)
def test_environment_settings_are_typed_and_bad_ones_are_400(
    client: TestClient, registry: Registry, settings: dict, error: str
) -> None:
    before = registry.environments.environment("m1", "production")
    res = client.post(f"{BASE}/environments", headers=MANAGE, json={"name": "staging", **settings})
    assert (res.status_code, res.json()) == (400, {"error": f"invalid request: {error}"})
    res = client.patch(f"{BASE}/environments/production", headers=MANAGE, json=settings)
    assert (res.status_code, res.json()) == (400, {"error": f"invalid request: {error}"})
    assert registry.environments.environment("m1", "staging") is None
    assert registry.environments.environment("m1", "production") == before


def test_environment_min_above_max_is_400_and_good_settings_are_kept(client: TestClient) -> None:
    res = client.post(
        f"{BASE}/environments",
        headers=MANAGE,
        json={"name": "staging", "autoscaling_settings": {"min_replica": 5, "max_replica": 2}},
    )
    assert (res.status_code, res.json()) == (
        400,
        {"error": "min_replica (5) must not exceed max_replica (2)"},
    )
    res = client.post(
        f"{BASE}/environments",
        headers=MANAGE,
        json={
            "name": "staging",
            "promotion_settings": {
                "rolling_deploy": True,
                "rolling_deploy_config": {"max_surge_percent": 50},
            },
            "autoscaling_settings": {"max_replica": 3},
            "request_backpressure_settings": {"policy": None},
        },
    )
    assert res.status_code == 200
    settings = res.json()["promotion_settings"]
    assert settings["rolling_deploy"] is True and settings["rolling_deploy_config"]["max_surge_percent"] == 50
    assert settings["rolling_deploy_config"]["rolling_deploy_strategy"] == "REPLICA"
    # the environment's max_replica over the platform's defaults (no deployment serves staging)
    assert res.json()["autoscaling_settings"] == {
        "min_replica": 0,
        "max_replica": 3,
        "autoscaling_window": 60,
        "scale_down_delay": 900,
        "concurrency_target": 1,
        "target_utilization_percentage": 70,
    }
    # nothing serves staging: the neutral instance type and the default backpressure policy
    assert (res.json()["instance_type"], res.json()["request_backpressure_settings"]) == (
        {
            "id": "",
            "name": "",
            "memory_limit_mib": 0,
            "millicpu_limit": 0,
            "gpu_count": 0,
            "gpu_type": None,
            "gpu_memory_limit_mib": None,
        },
        {"policy": None},
    )
    assert res.json()["autoscaling_schedules"] == {"timezone": None, "schedules": [], "applied_state": None}


@pytest.mark.parametrize("name", ["a/b", " ", "production ", ".hidden", "e" * 101])
def test_environment_names_follow_the_id_pattern(client: TestClient, name: str) -> None:
    res = client.post(f"{BASE}/environments", headers=MANAGE, json={"name": name})
    assert (res.status_code, res.json()) == (
        400,
        {
            "error": f"invalid request: name: {name!r} is not a valid environment name: "
            "use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        },
    )


def test_partial_percent_with_rolling_false_is_400(client: TestClient, registry: Registry) -> None:
    env = f"{BASE}/environments/production"
    res = client.post(
        f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2", "rolling": False, "percent": 50}
    )
    assert (res.status_code, res.json()) == (
        400,
        {
            "error": "percent 50 needs a rolling promotion: send rolling true (or leave rolling out), "
            "or percent 100 (or no percent) for an instant promotion"
        },
    )
    assert client.get(env, headers=MANAGE).json()["in_progress_promotion"] is None
    res = client.post(
        f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2", "rolling": False, "percent": 100}
    )
    assert (
        res.status_code == 200 and client.get(env, headers=MANAGE).json()["current_deployment"]["id"] == "d2"
    )


@pytest.mark.parametrize(
    ("query", "error"),
    [
        (
            "start_epoch_millis=-10000000000000000000",
            "start_epoch_millis: Input should be greater than or equal to 0",
        ),
        (
            "end_epoch_millis=10000000000000000000",
            "end_epoch_millis: Input should be less than or equal to 9007199254740991",
        ),
        (
            f"start_epoch_millis=0&end_epoch_millis={10**30}",
            "end_epoch_millis: Input should be less than or equal to 9007199254740991",
        ),
    ],
)
def test_events_window_out_of_range_is_400(client: TestClient, query: str, error: str) -> None:
    res = client.get(f"{BASE}/events?{query}", headers=MANAGE)
    assert (res.status_code, res.json()) == (400, {"error": f"invalid request: {error}"})


def test_bad_or_missing_json_body_says_so(client: TestClient) -> None:
    path = f"{BASE}/deployments/d1/autoscaling_settings"
    headers = {**MANAGE, "Content-Type": "application/json"}
    res = client.patch(path, headers=headers, content=b"{bad")
    assert (res.status_code, res.json()) == (
        400,
        {
            "error": "the request body is not valid JSON: Expecting property name enclosed in double quotes "
            "at character 1; send a JSON object"
        },
    )
    res = client.post(f"{BASE}/environments/production/promote", headers=headers, content=b"")
    assert (res.status_code, res.json()) == (
        400,
        {
            "error": "the request body is missing; send a JSON object with the fields "
            "deployment_id (required), scale_down_previous_deployment, preserve_env_instance_type, "
            "percent, rolling"
        },
    )


def test_promotion_percent_moves_a_rolling_promotion_and_100_completes_it(
    client: TestClient, registry: Registry
) -> None:
    env = f"{BASE}/environments/production"
    none = client.post(f"{env}/promotion_percent", headers=MANAGE, json={"percent": 50})
    assert none.status_code == 409
    client.post(f"{env}/promote", headers=MANAGE, json={"deployment_id": "d2", "percent": 25})
    half = client.post(f"{env}/promotion_percent", headers=MANAGE, json={"percent": 50})
    assert half.status_code == 200, half.text
    assert half.json()["percent_traffic_to_new_version"] == 50
    assert (
        client.get(env, headers=MANAGE).json()["in_progress_promotion"]["percent_traffic_to_new_version"]
        == 50
    )
    for bad in ({"percent": 101}, {"percent": "60"}, {}):
        assert client.post(f"{env}/promotion_percent", headers=MANAGE, json=bad).status_code == 400
    full = client.post(f"{env}/promotion_percent", headers=MANAGE, json={"percent": 100})
    assert full.json()["status"] == "SUCCEEDED"
    done = client.get(env, headers=MANAGE).json()
    assert done["current_deployment"]["id"] == "d2" and done["in_progress_promotion"] is None
