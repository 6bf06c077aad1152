"""Environments and promotion control through the platform's SDK (`baseten` 0.13.1) against a real
`servemetrics serve` (tests/sdk/conftest.py). Environments carry the neutral values of the fields we
cannot fill (docs/management.md "Fields we cannot fill")."""

from __future__ import annotations

import pytest
from baseten.client.managementapi import (
    CreateEnvironmentRequest,
    PromoteToEnvironmentRequest,
    ResponseError,
    UpdateAutoscalingSettings,
    UpdateEnvironmentRequest,
    UpdateModelPromotionSettings,
)

from tests.sdk.conftest import Service

pytestmark = pytest.mark.sdk

DEFAULTS = {
    "min_replica": 0,
    "max_replica": 1,
    "autoscaling_window": 60,
    "scale_down_delay": 900,
    "concurrency_target": 1,
    "target_utilization_percentage": 70,
}
"""The platform's autoscaling defaults (platform-facts §4), what a deployment starts with."""


def test_environments_list_and_get_with_instance_types(service: Service) -> None:
    envs = service.api.get_models_environments(model_id="m1").environments
    assert [(e.name, e.current_deployment.id if e.current_deployment else None) for e in envs] == [
        ("production", "d1")
    ]
    production = envs[0]
    assert production.instance_type.model_dump() == {
        "id": "1xH100",
        "name": "1xH100",
        "memory_limit_mib": 0,
        "millicpu_limit": 0,
        "gpu_count": 1,
        "gpu_type": "H100",
        "gpu_memory_limit_mib": None,
    }
    assert production.autoscaling_settings.model_dump(exclude_none=True) == DEFAULTS
    assert (production.request_backpressure_settings.policy, production.in_progress_promotion) == (None, None)
    assert production.autoscaling_schedules is not None and production.autoscaling_schedules.schedules == []
    staging = service.api.get_models_environments_env_name(model_id="m2", env_name="staging")
    assert (staging.current_deployment, staging.instance_type.gpu_count, staging.instance_type.name) == (
        None,
        0,
        "",
    )


def test_create_and_update_an_environment(service: Service) -> None:
    created = service.api.post_models_environments(
        model_id="m2",
        request=CreateEnvironmentRequest(
            name="canary", autoscaling_settings=UpdateAutoscalingSettings(min_replica=2, max_replica=5)
        ),
    )
    assert (created.name, created.model_id, created.current_deployment) == ("canary", "m2", None)
    assert created.autoscaling_settings.model_dump(exclude_none=True) == {
        **DEFAULTS,
        "min_replica": 2,
        "max_replica": 5,
    }
    updated = service.api.patch_models_environments(
        model_id="m2",
        env_name="canary",
        request=UpdateEnvironmentRequest(
            promotion_settings=UpdateModelPromotionSettings(
                rolling_deploy=True, promotion_cleanup_strategy="KEEP"
            )
        ),
    )
    settings = updated.environment.promotion_settings  # (status and message: deprecated in the SDK)
    assert (updated.environment.name, settings.rolling_deploy, settings.promotion_cleanup_strategy) == (
        "canary",
        True,
        "KEEP",
    )
    with pytest.raises(ResponseError) as err:
        service.api.post_models_environments(model_id="m2", request=CreateEnvironmentRequest(name="canary"))
    assert err.value.status_code == 409


def test_rolling_promotion_paused_resumed_and_rolled_forward(service: Service) -> None:
    api = service.api
    _rolling(service, "production")
    promoted = api.post_models_environments_promote(
        model_id="m2", env_name="production", request=PromoteToEnvironmentRequest(deployment_id="e2")
    )
    assert promoted.id == "e2"
    env = api.get_models_environments_env_name(model_id="m2", env_name="production")
    assert env.in_progress_promotion is not None and env.candidate_deployment is not None
    assert (_current(service, "production"), env.candidate_deployment.id) == ("e1", "e2")
    assert (env.in_progress_promotion.rolling_deploy, env.in_progress_promotion.status) == (True, "RELEASING")
    assert api.post_models_environments_pause_promotion(model_id="m2", env_name="production").success
    assert _status(service) == "PAUSED"
    assert api.post_models_environments_resume_promotion(model_id="m2", env_name="production").success
    assert _status(service) == "RELEASING"
    assert api.post_models_environments_force_roll_forward_promotion(
        model_id="m2", env_name="production"
    ).success
    env = api.get_models_environments_env_name(model_id="m2", env_name="production")
    assert (_current(service, "production"), env.in_progress_promotion) == ("e2", None)
    assert env.instance_type.model_dump(include={"name", "gpu_count", "gpu_type"}) == {
        "name": "2xA100",
        "gpu_count": 2,
        "gpu_type": "A100",
    }
    with pytest.raises(ResponseError) as err:  # nothing running: our 409
        api.post_models_environments_pause_promotion(model_id="m2", env_name="production")
    assert err.value.status_code == 409


def test_rolling_promotion_cancelled_and_force_cancelled(service: Service) -> None:
    api = service.api
    api.post_models_environments(model_id="m2", request=CreateEnvironmentRequest(name="blue"))
    api.post_models_environments_promote(  # instant: blue is not rolling yet
        model_id="m2", env_name="blue", request=PromoteToEnvironmentRequest(deployment_id="e3")
    )
    _rolling(service, "blue")
    _promote_rolling(service, "blue", "e1")
    assert api.post_models_environments_cancel_promotion(model_id="m2", env_name="blue").status == "CANCELED"
    assert (_current(service, "blue"), _status(service, "blue")) == ("e3", None)
    _promote_rolling(service, "blue", "e1")
    assert api.post_models_environments_force_cancel_promotion(model_id="m2", env_name="blue").success
    assert (_current(service, "blue"), _status(service, "blue")) == ("e3", None)


def _promote_rolling(service: Service, env_name: str, deployment_id: str) -> None:
    """Promote ``deployment_id`` into ``env_name`` of m2 (rolling) and check that it starts RELEASING."""
    service.api.post_models_environments_promote(
        model_id="m2", env_name=env_name, request=PromoteToEnvironmentRequest(deployment_id=deployment_id)
    )
    assert _status(service, env_name) == "RELEASING"


def _rolling(service: Service, env_name: str) -> None:
    """Set ``rolling_deploy`` on environment ``env_name`` of m2: its promotions roll from then on."""
    service.api.patch_models_environments(
        model_id="m2",
        env_name=env_name,
        request=UpdateEnvironmentRequest(
            promotion_settings=UpdateModelPromotionSettings(rolling_deploy=True)
        ),
    )


def _current(service: Service, env_name: str) -> str | None:
    env = service.api.get_models_environments_env_name(model_id="m2", env_name=env_name)
    return env.current_deployment.id if env.current_deployment else None


def _status(service: Service, env_name: str = "production") -> str | None:
    env = service.api.get_models_environments_env_name(model_id="m2", env_name=env_name)
    return env.in_progress_promotion.status if env.in_progress_promotion else None


def test_environment_deactivate_and_activate(service: Service) -> None:
    assert service.api.post_models_environments_deactivate(model_id="m2", env_name="staging").success
    assert service.api.post_models_environments_activate(model_id="m2", env_name="staging").success
    with pytest.raises(ResponseError) as err:
        service.api.get_models_environments_env_name(model_id="m2", env_name="nope")
    assert err.value.status_code == 404
