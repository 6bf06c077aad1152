"""The management API's answers as the spec names them: ``ModelV1``, ``DeploymentV1``, ``EnvironmentV1``
and events. The builders are pure; a route loads what they need once per request (``pointers_of``,
``deployments_of``), so a list costs the same few registry calls whatever its length.

Every answer parses with the platform's SDK models (PyPI ``baseten`` 0.13.1, ``tests/sdk``); a field those
require that the registry cannot fill gets the neutral value listed in docs/management.md "Fields we
cannot fill".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servemetrics.registry import (
    AutoscalingSettings,
    DeploymentInfo,
    EnvironmentInfo,
    EventInfo,
    ModelInfo,
    Registry,
)
from servemetrics.timeutil import iso_ms

Pointers = Mapping[str, str]
"""Environment name -> the id of the deployment it currently points at."""


def pointers_of(registry: Registry, model_id: str) -> dict[str, str]:
    """Environment name -> its current deployment id, for the environments of ``model_id`` that have one
    (one registry call)."""
    return {
        e.name: e.current_deployment_id
        for e in registry.environments.list_environments(model_id)
        if e.current_deployment_id
    }


def deployments_of(registry: Registry, model_id: str) -> dict[str, DeploymentInfo]:
    """Deployment id -> deployment, for every deployment of ``model_id`` (one registry call)."""
    return {d.id: d for d in registry.deployments.list_deployments(model_id)}


def model_v1(registry: Registry, model: ModelInfo) -> dict[str, Any]:
    """``ModelV1`` (two registry calls: environments and deployments); ``instance_type_name`` is the
    production deployment's, "" when ``production`` serves none (the SDK types it as a string)."""
    pointers = pointers_of(registry, model.id)
    deployments = registry.deployments.list_deployments(model.id)
    production = pointers.get("production")
    dep = next((d for d in deployments if d.id == production), None) if production else None
    return {
        "id": model.id,
        "created_at": iso_ms(model.created_at_ms),
        "name": model.name,
        "deployments_count": len(deployments),
        "production_deployment_id": production,
        "development_deployment_id": pointers.get("development"),
        "instance_type_name": dep.instance_type_name if dep else "",
        "team_name": model.organization_name,
    }


def deployment_v1(d: DeploymentInfo, pointers: Pointers) -> dict[str, Any]:
    """``DeploymentV1`` (plus ``gpu_type`` and ``gpu_count``); ``pointers`` are its model's."""
    envs = sorted(name for name, dep in pointers.items() if dep == d.id)
    return {
        "id": d.id,
        "created_at": iso_ms(d.created_at_ms),
        "name": d.name,
        "model_id": d.model_id,
        "is_production": pointers.get("production") == d.id,
        "is_development": pointers.get("development") == d.id,
        "status": d.status,
        "active_replica_count": d.active_replica_count,
        "autoscaling_settings": d.autoscaling.as_dict(),
        "instance_type_name": d.instance_type_name,
        "gpu_type": d.gpu_type,
        "gpu_count": d.gpu_count,
        "environment": envs[0] if envs else None,
        "labels": d.labels,
        "region": None,
        "request_backpressure_settings": {"policy": d.request_backpressure_policy},
    }


NO_SCHEDULES: dict[str, Any] = {"timezone": None, "schedules": [], "applied_state": None}
"""``autoscaling_schedules`` of every environment: the registry keeps no autoscaling schedules."""


def instance_type_v1(d: DeploymentInfo | None) -> dict[str, Any]:
    """``InstanceTypeV1{id, name, memory_limit_mib, millicpu_limit, gpu_count, gpu_type,
    gpu_memory_limit_mib}`` of deployment ``d`` (platform-facts §4, the SDK's ``InstanceType``).

    ``id`` and ``name`` are the deployment's instance type name (the only identifier we keep), ``gpu_type``
    and ``gpu_count`` its declared GPUs. We know no memory or CPU limits: ``memory_limit_mib`` and
    ``millicpu_limit`` are 0, ``gpu_memory_limit_mib`` null. No deployment (``d`` None): ``id`` and
    ``name`` "", ``gpu_count`` 0, ``gpu_type`` null.
    """
    return {
        "id": d.instance_type_name if d else "",
        "name": d.instance_type_name if d else "",
        "memory_limit_mib": 0,
        "millicpu_limit": 0,
        "gpu_count": d.gpu_count if d else 0,
        "gpu_type": d.gpu_type if d else None,
        "gpu_memory_limit_mib": None,
    }


def _promotion_v1(env: EnvironmentInfo) -> dict[str, Any] | None:
    running = env.in_progress_promotion
    if running is None:
        return None
    return {
        "status": running.status,
        "percent_traffic_to_new_version": running.percent_traffic_to_new_version,
        "error_message": running.error_message,
        "rolling_deploy": running.rolling,
    }


def environment_v1(
    env: EnvironmentInfo, pointers: Pointers, deployments: Mapping[str, DeploymentInfo]
) -> dict[str, Any]:
    """``EnvironmentV1`` (plus ``is_active``); ``pointers`` and ``deployments`` are its model's.

    ``autoscaling_settings`` are the environment's own settings over its serving deployment's (the
    platform's defaults when none serves); ``request_backpressure_settings`` the serving deployment's
    (``{"policy": null}``, the default, when none serves); ``instance_type`` as ``instance_type_v1``.
    """

    def dep(dep_id: str | None) -> DeploymentInfo | None:
        return deployments.get(dep_id) if dep_id else None

    current = dep(env.current_deployment_id)
    candidate = dep(env.candidate_deployment_id)
    shown = deployment_v1(current, pointers) if current else None
    base = current.autoscaling if current else AutoscalingSettings()
    return {
        "name": env.name,
        "created_at": iso_ms(env.created_at_ms),
        "model_id": env.model_id,
        "is_active": env.active,
        "current_deployment": shown,
        "candidate_deployment": deployment_v1(candidate, pointers) if candidate else None,
        "in_progress_promotion": _promotion_v1(env),
        "autoscaling_settings": {**base.as_dict(), **(env.autoscaling_settings or {})},
        "promotion_settings": env.promotion_settings,
        "instance_type": instance_type_v1(current),
        "request_backpressure_settings": {"policy": current.request_backpressure_policy if current else None},
        "autoscaling_schedules": NO_SCHEDULES,
    }


def event_v1(e: EventInfo) -> dict[str, Any]:
    """One event: ``{id, kind, epoch_millis, model_id, deployment_id, environment, details}``."""
    return {
        "id": e.id,
        "kind": e.kind,
        "epoch_millis": e.at_ms,
        "model_id": e.model_id,
        "deployment_id": e.deployment_id,
        "environment": e.environment,
        "details": e.details,
    }
