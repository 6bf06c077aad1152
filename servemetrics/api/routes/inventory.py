"""Creating what the registry scrapes, for set-ups without a YAML file: models, deployments, replicas
and their scrape targets. Our extensions (the spec creates models from a source, which we do not build).

All need a managing key; the new model belongs to the key's organization.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from servemetrics.api.deps import (
    ManageAuth,
    ManageModel,
    ReadModel,
    RegistryDep,
    ServiceDep,
    resolve_deployment,
)
from servemetrics.api.errors import ApiError
from servemetrics.api.management_shapes import deployment_v1, model_v1, pointers_of
from servemetrics.registry import ReplicaInfo
from servemetrics.registry.ids import check_deployment_id, check_id, check_target_url
from servemetrics.registry.tables import REPLICA_STATUSES
from servemetrics.timeutil import iso_ms
from servemetrics.types import redact_url

router = APIRouter(prefix="/v1", tags=["inventory"])

ModelId = Annotated[str, AfterValidator(lambda v: check_id(v, "model id"))]
DeploymentId = Annotated[str, AfterValidator(check_deployment_id)]
ReplicaId = Annotated[str, AfterValidator(lambda v: check_id(v, "replica id"))]
TargetUrl = Annotated[str, AfterValidator(check_target_url)]


class _Body(BaseModel):
    """Strict, as the management bodies (``api/management_bodies._Body``): ``false`` or ``"2"`` is not a
    ``gpu_count``, ``1`` is not a ``name`` (schemathesis' ``negative_data_rejection`` found the bool)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ModelCreate(_Body):
    """Body of ``POST /v1/models``: ``id`` (generated when absent) and ``name``."""

    id: ModelId | None = None
    name: str = Field(min_length=1, max_length=200)


class InstanceType(_Body):
    """GPU type and count; no ``gpu_type`` or ``gpu_count`` 0 means a CPU deployment."""

    gpu_type: str | None = None
    gpu_count: int = Field(default=0, ge=0, le=64)


class DeploymentCreate(_Body):
    """Body of ``POST /v1/models/{model_id}/deployments``; ``production`` / ``development`` are reserved."""

    id: DeploymentId | None = None
    name: str = Field(min_length=1, max_length=200)
    instance_type: InstanceType = InstanceType()


class ReplicaCreate(_Body):
    """Body of ``POST …/deployments/{deployment_id}/replicas``: replica id and its ``/metrics`` URLs."""

    id: ReplicaId
    targets: list[TargetUrl] = Field(default_factory=list, max_length=20)


def _new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(4)}"


def replica_v1(r: ReplicaInfo, targets: list[str]) -> dict[str, Any]:
    """``{id, deployment_id, status, created_at, terminated_at, targets}``."""
    return {
        "id": r.id,
        "deployment_id": r.deployment_id,
        "status": r.status,
        "created_at": iso_ms(r.created_at_ms),
        "terminated_at": iso_ms(r.terminated_at_ms) if r.terminated_at_ms else None,
        "targets": targets,
    }


@router.post("/models", status_code=201)
def create_model(registry: RegistryDep, key: ManageAuth, body: ModelCreate) -> dict[str, Any]:
    """Create a model of the caller's organization → ``ModelV1``; 409 when the id is taken."""
    model_id = body.id or _new_id("m")
    if registry.tenancy.model(model_id, None) is not None:
        raise ApiError(409, f"model id {model_id!r} is taken; choose another id or omit it")
    return model_v1(registry, registry.tenancy.ensure_model(model_id, body.name, key.organization_name))


@router.post("/models/{model_id}/deployments", status_code=201)
def create_deployment(registry: RegistryDep, model: ManageModel, body: DeploymentCreate) -> dict[str, Any]:
    """Create a deployment (records DEPLOYED) → ``DeploymentV1``; 409 when the id is taken."""
    dep_id = body.id or _new_id("d")
    found = registry.deployments.create_deployment(
        model.id,
        dep_id,
        body.name,
        gpu_type=body.instance_type.gpu_type,
        gpu_count=body.instance_type.gpu_count,
    )
    return deployment_v1(found, pointers_of(registry, model.id))


def _targets_by_replica(registry: RegistryDep, deployment_id: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in registry.list_targets(REPLICA_STATUSES):  # a FAILED replica's targets too
        if t.deployment_id == deployment_id:
            out.setdefault(t.replica, []).append(redact_url(t.url))
    return out


@router.get("/models/{model_id}/deployments/{deployment_id}/replicas")
def list_replicas(registry: RegistryDep, model: ReadModel, deployment_id: str) -> dict[str, Any]:
    """``{replicas: [...]}`` with each replica's status and scrape targets (passwords shown as ``***``)."""
    dep = resolve_deployment(registry, model, deployment_id)
    targets = _targets_by_replica(registry, dep.id)
    return {
        "replicas": [
            replica_v1(r, targets.get(r.id, [])) for r in registry.deployments.list_replicas(model.id, dep.id)
        ]
    }


@router.post("/models/{model_id}/deployments/{deployment_id}/replicas", status_code=201)
def add_replica(
    service: ServiceDep, model: ManageModel, deployment_id: str, body: ReplicaCreate
) -> dict[str, Any]:
    """Register a replica and its scrape targets → ``ReplicaV1`` (scraped from the next target refresh,
    within a second or two). An id the deployment has already is updated (``Deployments.register_replica``):
    its targets become ``targets``, and a FAILED or TERMINATED one becomes ACTIVE. 400
    (``netpolicy.Refused``) for a target the network policy refuses, nothing registered then; 404 for a
    deployment that is not the model's, or a model of another organization."""
    registry = service.registry
    dep = resolve_deployment(registry, model, deployment_id)
    if service.egress is not None:
        for url in body.targets:
            if service.egress.for_target(dep.id, url) is not None:
                service.egress.targets.check_url(url, "target")
    replica, _ = registry.deployments.register_replica(model.id, dep.id, body.id, body.targets)
    return replica_v1(replica, _targets_by_replica(registry, dep.id).get(body.id, []))
