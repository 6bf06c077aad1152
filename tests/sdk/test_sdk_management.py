"""Models, deployments, autoscaling, backpressure, activation and replicas through the platform's SDK
(`baseten` 0.13.1) against a real `servemetrics serve` (tests/sdk/conftest.py): every answer parses
with the SDK's own pydantic models and holds the registry's values."""

from __future__ import annotations

import pytest
from baseten.client.managementapi import (
    GetModelsDeploymentsParams,
    GetModelsParams,
    ResponseError,
    UpdateAutoscalingSettings,
    UpdateRequestBackpressureSettings,
)

from tests.sdk.conftest import Service

pytestmark = pytest.mark.sdk


def test_models_list_get_and_name_filter(service: Service) -> None:
    models = service.api.get_models().models
    assert [(m.id, m.name, m.team_name, m.deployments_count) for m in models] == [
        ("m1", "llama", "acme", 1),
        ("m2", "playground", "acme", 3),
    ]
    m1 = service.api.get_models_model_id(model_id="m1")
    assert (m1.production_deployment_id, m1.development_deployment_id, m1.instance_type_name) == (
        "d1",
        None,
        "1xH100",
    )
    assert m1.created_at.isoformat() == "2026-01-01T00:00:00+00:00"  # the promotion's, the earliest we know
    named = service.api.get_models(params=GetModelsParams(name="playground")).models
    assert [m.id for m in named] == ["m2"]
    assert [m.id for m in service.other.get_models().models] == ["m9"]


def test_another_organizations_model_is_a_404(service: Service) -> None:
    with pytest.raises(ResponseError) as err:
        service.other.get_models_model_id(model_id="m1")
    assert err.value.status_code == 404


def test_deployments_list_get_and_aliases(service: Service) -> None:
    deps = service.api.get_models_deployments(model_id="m2").deployments
    assert [(d.id, d.name, d.instance_type_name) for d in deps] == [
        ("e1", "one", "1xL4"),
        ("e2", "two", "2xA100"),
        ("e3", "three", "CPU"),
    ]
    e2 = service.api.get_models_deployments_deployment_id(model_id="m2", deployment_id="e2")
    assert (e2.model_id, e2.status, e2.active_replica_count, e2.region) == ("m2", "ACTIVE", 0, None)
    assert e2.request_backpressure_settings.policy is None
    d1 = service.api.get_models_deployments_production(model_id="m1")
    assert (d1.id, d1.is_production, d1.environment, d1.active_replica_count) == ("d1", True, "production", 1)
    named = service.api.get_models_deployments(model_id="m1", params=GetModelsDeploymentsParams(name="v1"))
    assert [d.id for d in named.deployments] == ["d1"]
    with pytest.raises(ResponseError) as err:
        service.api.get_models_deployments_development(model_id="m2")  # no development environment
    assert err.value.status_code == 404


def test_autoscaling_settings_change_and_read_back(service: Service) -> None:
    change = UpdateAutoscalingSettings(min_replica=1, max_replica=4, concurrency_target=8)
    first = service.api.patch_models_deployments_autoscaling_settings(
        model_id="m2", deployment_id="e2", request=change
    )
    again = service.api.patch_models_deployments_autoscaling_settings(
        model_id="m2", deployment_id="e2", request=change
    )
    assert (first.status, again.status) == ("ACCEPTED", "UNCHANGED")
    settings = service.api.get_models_deployments_deployment_id(
        model_id="m2", deployment_id="e2"
    ).autoscaling_settings
    assert settings is not None
    assert settings.model_dump(exclude_none=True) == {
        "min_replica": 1,
        "max_replica": 4,
        "autoscaling_window": 60,
        "scale_down_delay": 900,
        "concurrency_target": 8,
        "target_utilization_percentage": 70,
    }
    with pytest.raises(ResponseError) as err:  # min above max: our 400, as the SDK reports it
        service.api.patch_models_deployments_autoscaling_settings(
            model_id="m2", deployment_id="e2", request=UpdateAutoscalingSettings(min_replica=9)
        )
    assert err.value.status_code == 400


def test_request_backpressure_policy_is_set_and_read_back(service: Service) -> None:
    answer = service.api.patch_models_deployments_request_backpressure_settings(
        model_id="m2", deployment_id="e3", request=UpdateRequestBackpressureSettings(policy="REJECT_ON_FULL")
    )
    assert answer.policy == "REJECT_ON_FULL"
    e3 = service.api.get_models_deployments_deployment_id(model_id="m2", deployment_id="e3")
    assert e3.request_backpressure_settings.policy == "REJECT_ON_FULL"


def test_deactivate_activate_and_terminate_a_replica(service: Service) -> None:
    off = service.api.post_models_deployments_deactivate(model_id="m2", deployment_id="e3")
    assert (
        off.success,
        service.api.get_models_deployments_deployment_id(model_id="m2", deployment_id="e3").status,
    ) == (
        True,
        "INACTIVE",
    )
    on = service.api.post_models_deployments_activate(model_id="m2", deployment_id="e3")
    assert (
        on.success,
        service.api.get_models_deployments_deployment_id(model_id="m2", deployment_id="e3").status,
    ) == (
        True,
        "ACTIVE",
    )
    before = service.api.get_models_deployments_deployment_id(
        model_id="m2", deployment_id="e3"
    ).active_replica_count
    gone = service.api.delete_models_deployments_replicas(model_id="m2", deployment_id="e3", replica_id="r1")
    after = service.api.get_models_deployments_deployment_id(
        model_id="m2", deployment_id="e3"
    ).active_replica_count
    assert (gone.success, before, after) == (True, 1, 0)


def test_the_production_alias_of_autoscaling(service: Service) -> None:
    answer = service.api.patch_models_deployments_production_autoscaling_settings(
        model_id="m2", request=UpdateAutoscalingSettings(scale_down_delay=120)
    )
    production = service.api.get_models_deployments_production(model_id="m2")
    assert production.autoscaling_settings is not None
    assert (answer.status, production.is_production, production.autoscaling_settings.scale_down_delay) == (
        "ACCEPTED",
        True,
        120,
    )
