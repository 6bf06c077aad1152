"""Management API for environments (platform-facts §4): list, create, update, promote, activate and
deactivate, and promotion control (cancel, percent, pause, resume, force cancel, force roll forward).

Reads need a key that may read the model's metrics; changes need a managing key. Registry errors map to
404 / 409 / 400 in ``api/errors.py``. Shapes: ``EnvironmentV1``, ``DeploymentV1``, ``{success}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from servemetrics.api.deps import ManageModel, ReadModel, RegistryDep, resolve_deployment, resolve_environment
from servemetrics.api.management_bodies import (
    EnvironmentCreate,
    EnvironmentUpdate,
    PercentBody,
    PromoteBody,
    settings,
)
from servemetrics.api.management_shapes import deployment_v1, deployments_of, environment_v1, pointers_of
from servemetrics.registry import EnvironmentInfo, ModelInfo, Registry

router = APIRouter(prefix="/v1", tags=["management"])
SUCCESS = {"success": True}
ENV = "/models/{model_id}/environments/{env_name}"


def _environment_v1(registry: Registry, env: EnvironmentInfo) -> dict[str, Any]:
    return environment_v1(env, pointers_of(registry, env.model_id), deployments_of(registry, env.model_id))


@router.get("/models/{model_id}/environments")
def list_environments(registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``{environments: [EnvironmentV1]}``."""
    envs = registry.environments.list_environments(model.id)
    pointers = {e.name: e.current_deployment_id for e in envs if e.current_deployment_id}
    deployments = deployments_of(registry, model.id)
    return {"environments": [environment_v1(e, pointers, deployments) for e in envs]}


@router.post("/models/{model_id}/environments")
def create_environment(registry: RegistryDep, model: ManageModel, body: EnvironmentCreate) -> dict[str, Any]:
    """Create an environment → 200 ``EnvironmentV1`` (the platform declares only 200, platform-facts §4,
    and its SDK accepts nothing else); 409 if the name is taken.

    ``request_backpressure_settings`` is validated; the environment reports its serving deployment's.
    """
    env = registry.environments.create_environment(
        model.id,
        body.name,
        promotion_settings=settings(body.promotion_settings),
        autoscaling_settings=settings(body.autoscaling_settings),
    )
    return _environment_v1(registry, env)


@router.get(ENV)
def get_environment(registry: RegistryDep, model: ReadModel, env_name: str) -> dict[str, Any]:
    """``EnvironmentV1``."""
    return _environment_v1(registry, resolve_environment(registry, model, env_name))


@router.patch(ENV)
def update_environment(
    registry: RegistryDep, model: ManageModel, env_name: str, body: EnvironmentUpdate
) -> dict[str, Any]:
    """Update settings (records ENVIRONMENT_UPDATED) → ``{environment, status, message}``."""
    resolve_environment(registry, model, env_name)
    env = registry.environments.update_environment(
        model.id,
        env_name,
        promotion_settings=settings(body.promotion_settings),
        autoscaling_settings=settings(body.autoscaling_settings),
    )
    return {
        "environment": _environment_v1(registry, env),
        "status": "ACCEPTED",
        "message": "environment updated",
    }


@router.post(f"{ENV}/promote")
def promote(registry: RegistryDep, model: ManageModel, env_name: str, body: PromoteBody) -> dict[str, Any]:
    """Promote a deployment (instant, or rolling per settings / ``percent``) → ``DeploymentV1``."""
    resolve_environment(registry, model, env_name)
    d = resolve_deployment(registry, model, body.deployment_id)
    registry.environments.promote(model.id, env_name, d.id, percent=body.percent, rolling=body.rolling)
    found = registry.deployments.deployment(model.id, d.id)
    assert found is not None
    return deployment_v1(found, pointers_of(registry, model.id))


def _known(registry: Registry, model: ModelInfo, env_name: str) -> str:
    """``env_name`` once it names an environment of the model (404 otherwise)."""
    resolve_environment(registry, model, env_name)
    return env_name


@router.post(f"{ENV}/activate")
def activate_environment(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Let the environment serve again → ``{success}``."""
    registry.environments.activate_environment(model.id, _known(registry, model, env_name))
    return SUCCESS


@router.post(f"{ENV}/deactivate")
def deactivate_environment(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Stop the environment serving → ``{success}``."""
    registry.environments.deactivate_environment(model.id, _known(registry, model, env_name))
    return SUCCESS


@router.post(f"{ENV}/cancel_promotion")
def cancel_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, str]:
    """Cancel the running promotion → ``{status: CANCELED, message}``; 409 if none is running."""
    promotion = registry.environments.cancel_promotion(model.id, _known(registry, model, env_name))
    return {"status": promotion.status, "message": f"promotion of {promotion.deployment_id} canceled"}


@router.post(f"{ENV}/promotion_percent")
def set_promotion_percent(
    registry: RegistryDep, model: ManageModel, env_name: str, body: PercentBody
) -> dict[str, Any]:
    """Move the running rolling promotion to ``percent`` % of traffic on the new deployment (100
    completes it) → ``{status, percent_traffic_to_new_version}``; 409 if none is running."""
    promotion = registry.environments.set_promotion_percent(
        model.id, _known(registry, model, env_name), body.percent
    )
    return {
        "status": promotion.status,
        "percent_traffic_to_new_version": promotion.percent_traffic_to_new_version,
    }


@router.post(f"{ENV}/pause_promotion")
def pause_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Pause the running rolling promotion → ``{success}``; 409 if none is running."""
    registry.environments.pause_promotion(model.id, _known(registry, model, env_name))
    return SUCCESS


@router.post(f"{ENV}/resume_promotion")
def resume_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Resume a paused promotion → ``{success}``; 409 if it is not paused."""
    registry.environments.resume_promotion(model.id, _known(registry, model, env_name))
    return SUCCESS


@router.post(f"{ENV}/force_cancel_promotion")
def force_cancel_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Cancel now and roll back → ``{success}``; 409 if none is running."""
    registry.environments.force_cancel_promotion(model.id, _known(registry, model, env_name))
    return SUCCESS


@router.post(f"{ENV}/force_roll_forward_promotion")
def force_roll_forward_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Complete the promotion now → ``{success}``; 409 if none is running."""
    registry.environments.force_roll_forward_promotion(model.id, _known(registry, model, env_name))
    return SUCCESS
