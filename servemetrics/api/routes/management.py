"""Management API on the spec's paths (platform-facts §4): models, deployments, autoscaling, backpressure
and replica termination. Environments and promotion control are in ``routes/environments.py``, events in
``routes/events.py``.

Reads need a key that may read the model's metrics (``require_metrics_read``); changes need a managing
key (``require_manage``). Registry errors map to 404 (NotFound), 409 (Conflict) and 400 (InvalidValue) in
``api/errors.py``. Shapes (``api/management_shapes.py``): ``ModelV1``, ``DeploymentV1`` as the spec names
them, ``{success}`` for actions.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from servemetrics.api.deps import (
    Auth,
    ManageModel,
    ReadModel,
    RegistryDep,
    require_org_metrics_read,
    resolve_deployment,
)
from servemetrics.api.management_bodies import AutoscalingUpdate, BackpressureUpdate
from servemetrics.api.management_shapes import deployment_v1, model_v1, pointers_of
from servemetrics.registry import can_read_metrics

router = APIRouter(prefix="/v1", tags=["management"])
SUCCESS = {"success": True}


@router.get("/models")
def list_models(registry: RegistryDep, key: Auth, name: str | None = None) -> dict[str, Any]:
    """``ModelsV1``: the caller's organization's models the key may read (``?name=`` filters); 403 for a
    key type that may read none (``WORKSPACE_INVOKE``, ``WORKSPACE_MANAGE_API_KEYS``)."""
    require_org_metrics_read(key, "models")
    models = [
        m for m in registry.tenancy.list_models(key.organization_id, name) if can_read_metrics(key, m.id)
    ]
    return {"models": [model_v1(registry, m) for m in models]}


@router.get("/models/{model_id}")
def get_model(registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``ModelV1``."""
    return model_v1(registry, model)


@router.get("/models/{model_id}/deployments")
def list_deployments(registry: RegistryDep, model: ReadModel, name: str | None = None) -> dict[str, Any]:
    """``DeploymentsV1``."""
    pointers = pointers_of(registry, model.id)
    return {
        "deployments": [
            deployment_v1(d, pointers) for d in registry.deployments.list_deployments(model.id, name)
        ]
    }


@router.get("/models/{model_id}/deployments/{deployment_id}")
def get_deployment(registry: RegistryDep, model: ReadModel, deployment_id: str) -> dict[str, Any]:
    """``DeploymentV1``; ``production`` / ``development`` name that environment's deployment."""
    return deployment_v1(resolve_deployment(registry, model, deployment_id), pointers_of(registry, model.id))


@router.post("/models/{model_id}/deployments/{deployment_id}/activate")
def activate_deployment(registry: RegistryDep, model: ManageModel, deployment_id: str) -> dict[str, bool]:
    """Activate the deployment (records ACTIVATED) → ``{success}``."""
    registry.deployments.activate_deployment(model.id, resolve_deployment(registry, model, deployment_id).id)
    return SUCCESS


@router.post("/models/{model_id}/deployments/{deployment_id}/deactivate")
def deactivate_deployment(registry: RegistryDep, model: ManageModel, deployment_id: str) -> dict[str, bool]:
    """Deactivate the deployment (records DEACTIVATED) → ``{success}``."""
    registry.deployments.deactivate_deployment(
        model.id, resolve_deployment(registry, model, deployment_id).id
    )
    return SUCCESS


@router.patch("/models/{model_id}/deployments/{deployment_id}/autoscaling_settings")
def update_autoscaling(
    registry: RegistryDep, model: ManageModel, deployment_id: str, body: AutoscalingUpdate
) -> dict[str, str]:
    """Change the fields passed → ``{status: ACCEPTED|UNCHANGED, message}``."""
    d = resolve_deployment(registry, model, deployment_id)
    status = registry.deployments.update_autoscaling(model.id, d.id, body.changes())
    message = "autoscaling settings updated" if status == "ACCEPTED" else "the settings were already these"
    return {"status": status, "message": message}


@router.patch("/models/{model_id}/deployments/{deployment_id}/request_backpressure_settings")
def update_backpressure(
    registry: RegistryDep, model: ManageModel, deployment_id: str, body: BackpressureUpdate
) -> dict[str, Any]:
    """Set the policy → ``{policy, request_backpressure_settings: {policy}}``: ``policy`` at the top is the
    platform's ``RequestBackpressureSettingsV1`` (what its SDK reads), the nested copy our earlier answer;
    the gateway applies it at once."""
    d = resolve_deployment(registry, model, deployment_id)
    registry.deployments.set_request_backpressure(model.id, d.id, body.policy)
    return {"policy": body.policy, "request_backpressure_settings": {"policy": body.policy}}


@router.delete("/models/{model_id}/deployments/{deployment_id}/replicas/{replica_id}")
def terminate_replica(
    registry: RegistryDep, model: ManageModel, deployment_id: str, replica_id: str
) -> dict[str, bool]:
    """Terminate one replica (records REPLICA_TERMINATED) → ``{success}``."""
    d = resolve_deployment(registry, model, deployment_id)
    registry.deployments.terminate_replica(model.id, d.id, replica_id)
    return SUCCESS
