"""Management API on the spec's paths (platform-facts §4): models, deployments, environments, promotion
control, autoscaling, replica termination and events.

Reads need a key that may read the model's metrics (``require_metrics_read``); changes need a managing
key (``require_manage``). Registry errors map to 404 (NotFound), 409 (Conflict) and 400 (InvalidValue).
Shapes: ``ModelV1``, ``DeploymentV1``, ``EnvironmentV1`` as the spec names them, ``{success}`` for actions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator

from servemetrics.api.deps import (
    Auth,
    ManageModel,
    ReadModel,
    RegistryDep,
    resolve_deployment,
    resolve_environment,
)
from servemetrics.api.errors import ApiError, bad_request, not_found
from servemetrics.registry import (
    EVENT_KINDS,
    Conflict,
    DeploymentInfo,
    EnvironmentInfo,
    EventInfo,
    InvalidValue,
    ModelInfo,
    NotFound,
    Registry,
    can_read_metrics,
)
from servemetrics.registry.ids import check_id
from servemetrics.registry.records import AUTOSCALING_RANGES, MAX_SETTING
from servemetrics.timeutil import MAX_EPOCH_MS, iso_ms

router = APIRouter(prefix="/v1", tags=["management"])
T = TypeVar("T")
SUCCESS = {"success": True}
"""Largest epoch ms a query parameter may carry (JSON's exact integers; far beyond any real time)."""


@contextmanager
def _registry_errors() -> Iterator[None]:
    try:
        yield
    except NotFound as err:
        raise not_found(str(err)) from None
    except Conflict as err:
        raise ApiError(409, str(err)) from None
    except InvalidValue as err:
        raise bad_request(str(err)) from None


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with _registry_errors():
        return fn(*args, **kwargs)


# -- shapes ---------------------------------------------------------------------------------------


def _env_pointers(registry: Registry, model_id: str) -> dict[str, str]:
    """environment name -> its current deployment id."""
    return {
        e.name: e.current_deployment_id
        for e in registry.list_environments(model_id)
        if e.current_deployment_id
    }


def model_v1(registry: Registry, model: ModelInfo) -> dict[str, Any]:
    """``ModelV1``."""
    pointers = _env_pointers(registry, model.id)
    production = pointers.get("production")
    dep = registry.deployment(model.id, production) if production else None
    return {
        "id": model.id,
        "created_at": iso_ms(model.created_at_ms),
        "name": model.name,
        "deployments_count": len(registry.list_deployments(model.id)),
        "production_deployment_id": production,
        "development_deployment_id": pointers.get("development"),
        "instance_type_name": dep.instance_type_name if dep else None,
        "team_name": model.organization_name,
    }


def deployment_v1(
    registry: Registry, d: DeploymentInfo, pointers: dict[str, str] | None = None
) -> dict[str, Any]:
    """``DeploymentV1`` (plus ``gpu_type`` and ``gpu_count``)."""
    pointers = _env_pointers(registry, d.model_id) if pointers is None else pointers
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


def environment_v1(registry: Registry, env: EnvironmentInfo) -> dict[str, Any]:
    """``EnvironmentV1`` (plus ``is_active``)."""
    pointers = _env_pointers(registry, env.model_id)

    def dep(dep_id: str | None) -> dict[str, Any] | None:
        found = registry.deployment(env.model_id, dep_id) if dep_id else None
        return deployment_v1(registry, found, pointers) if found else None

    current = dep(env.current_deployment_id)
    running = env.in_progress_promotion
    promotion = None
    if running is not None:
        promotion = {
            "status": running.status,
            "percent_traffic_to_new_version": running.percent_traffic_to_new_version,
            "error_message": running.error_message,
            "rolling_deploy": running.rolling,
        }
    return {
        "name": env.name,
        "created_at": iso_ms(env.created_at_ms),
        "model_id": env.model_id,
        "is_active": env.active,
        "current_deployment": current,
        "candidate_deployment": dep(env.candidate_deployment_id),
        "in_progress_promotion": promotion,
        "autoscaling_settings": env.autoscaling_settings or (current or {}).get("autoscaling_settings"),
        "promotion_settings": env.promotion_settings,
        "instance_type": {
            "name": current["instance_type_name"],
            "gpu_type": current["gpu_type"],
            "gpu_count": current["gpu_count"],
        }
        if current
        else None,
        "request_backpressure_settings": (current or {}).get("request_backpressure_settings"),
        "autoscaling_schedules": [],
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


# -- request bodies --------------------------------------------------------------------------------


class _Body(BaseModel):
    """Strict: unknown keys are rejected and ``"false"`` / ``"3"`` / ``3.0`` are not booleans or ints."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _bounded_int(low: int, high: int) -> Any:
    """An int from ``low`` to ``high`` (no bools, floats or strings), failing with the range."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be an integer {low}..{high}, not {value!r}")
        return value

    return Annotated[int, PlainValidator(check, json_schema_input_type=int)]


_AS = AUTOSCALING_RANGES
Flag = Annotated[bool, Field(strict=True)]


class AutoscalingUpdate(_Body):
    """``UpdateAutoscalingSettingsV1``: only the fields passed are changed (ranges: platform-facts §4)."""

    min_replica: _bounded_int(*_AS["min_replica"]) | None = None  # type: ignore[valid-type]
    max_replica: _bounded_int(*_AS["max_replica"]) | None = None  # type: ignore[valid-type]
    autoscaling_window: _bounded_int(*_AS["autoscaling_window"]) | None = None  # type: ignore[valid-type]
    scale_down_delay: _bounded_int(*_AS["scale_down_delay"]) | None = None  # type: ignore[valid-type]
    concurrency_target: _bounded_int(*_AS["concurrency_target"]) | None = None  # type: ignore[valid-type]
    target_utilization_percentage: _bounded_int(*_AS["target_utilization_percentage"]) | None = None  # type: ignore[valid-type]


class RollingDeployConfig(_Body):
    """``rolling_deploy_config`` of ``PromotionSettingsV1``; fields left out keep their value."""

    rolling_deploy_strategy: Literal["REPLICA"] | None = None
    max_surge_percent: _bounded_int(0, 100) | None = None  # type: ignore[valid-type]
    max_unavailable_percent: _bounded_int(0, 100) | None = None  # type: ignore[valid-type]
    stabilization_time_seconds: _bounded_int(0, MAX_SETTING) | None = None  # type: ignore[valid-type]
    replica_overhead_percent: _bounded_int(0, 100) | None = None  # type: ignore[valid-type]


class PromotionSettings(_Body):
    """``PromotionSettingsV1``; fields left out keep their value (defaults on create)."""

    redeploy_on_promotion: Flag | None = None
    rolling_deploy: Flag | None = None
    promotion_cleanup_strategy: Literal["KEEP", "SCALE_TO_ZERO", "DEACTIVATE"] | None = None
    rolling_deploy_config: RollingDeployConfig | None = None
    ramp_up_while_promoting: Flag | None = None
    ramp_up_duration_seconds: _bounded_int(0, MAX_SETTING) | None = None  # type: ignore[valid-type]


class BackpressureSettings(_Body):
    """``request_backpressure_settings``: ``policy`` QUEUE_ON_FULL, REJECT_ON_FULL or null."""

    policy: Literal["QUEUE_ON_FULL", "REJECT_ON_FULL"] | None = None


class BackpressureUpdate(_Body):
    """Body of ``PATCH …/deployments/{deployment_id}/request_backpressure_settings``: ``policy`` is
    required, null resets it to the default (queue)."""

    policy: Literal["QUEUE_ON_FULL", "REJECT_ON_FULL"] | None


class EnvironmentCreate(_Body):
    """Body of ``POST /v1/models/{model_id}/environments``."""

    name: Annotated[str, AfterValidator(lambda v: check_id(v, "environment name"))]
    promotion_settings: PromotionSettings | None = None
    autoscaling_settings: AutoscalingUpdate | None = None
    request_backpressure_settings: BackpressureSettings | None = None


class EnvironmentUpdate(_Body):
    """Body of ``PATCH /v1/models/{model_id}/environments/{env_name}``."""

    promotion_settings: PromotionSettings | None = None
    autoscaling_settings: AutoscalingUpdate | None = None
    request_backpressure_settings: BackpressureSettings | None = None
    autoscaling_schedule_settings: dict[str, Any] | None = None


def _settings(body: BaseModel | None) -> dict[str, Any] | None:
    """The fields the client passed (nested ones too), without the nulls."""
    return None if body is None else body.model_dump(exclude_none=True)


class PromoteBody(_Body):
    """Body of ``POST …/environments/{env_name}/promote``; ``percent`` and ``rolling`` are our extensions.

    ``percent`` below 100 starts a rolling promotion at that share; with ``rolling: false`` it is a 400.
    """

    deployment_id: str
    scale_down_previous_deployment: bool = True
    preserve_env_instance_type: bool = True
    percent: _bounded_int(0, 100) | None = None  # type: ignore[valid-type]
    rolling: bool | None = None


# -- models and deployments ---------------------------------------------------------------------


@router.get("/models")
def list_models(registry: RegistryDep, key: Auth, name: str | None = None) -> dict[str, Any]:
    """``ModelsV1``: the caller's organization's models the key may read (``?name=`` filters)."""
    models = [m for m in registry.list_models(key.organization_id, name) if can_read_metrics(key, m.id)]
    return {"models": [model_v1(registry, m) for m in models]}


@router.get("/models/{model_id}")
def get_model(registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``ModelV1``."""
    return model_v1(registry, model)


@router.get("/models/{model_id}/deployments")
def list_deployments(registry: RegistryDep, model: ReadModel, name: str | None = None) -> dict[str, Any]:
    """``DeploymentsV1``."""
    pointers = _env_pointers(registry, model.id)
    return {
        "deployments": [
            deployment_v1(registry, d, pointers) for d in registry.list_deployments(model.id, name)
        ]
    }


@router.get("/models/{model_id}/deployments/{deployment_id}")
def get_deployment(registry: RegistryDep, model: ReadModel, deployment_id: str) -> dict[str, Any]:
    """``DeploymentV1``; ``production`` / ``development`` name that environment's deployment."""
    return deployment_v1(registry, resolve_deployment(registry, model, deployment_id))


@router.post("/models/{model_id}/deployments/{deployment_id}/activate")
def activate_deployment(registry: RegistryDep, model: ManageModel, deployment_id: str) -> dict[str, bool]:
    """Activate the deployment (records ACTIVATED) → ``{success}``."""
    d = resolve_deployment(registry, model, deployment_id)
    _call(registry.activate_deployment, model.id, d.id)
    return SUCCESS


@router.post("/models/{model_id}/deployments/{deployment_id}/deactivate")
def deactivate_deployment(registry: RegistryDep, model: ManageModel, deployment_id: str) -> dict[str, bool]:
    """Deactivate the deployment (records DEACTIVATED) → ``{success}``."""
    d = resolve_deployment(registry, model, deployment_id)
    _call(registry.deactivate_deployment, model.id, d.id)
    return SUCCESS


@router.patch("/models/{model_id}/deployments/{deployment_id}/autoscaling_settings")
def update_autoscaling(
    registry: RegistryDep, model: ManageModel, deployment_id: str, body: AutoscalingUpdate
) -> dict[str, str]:
    """Change the fields passed → ``{status: ACCEPTED|UNCHANGED, message}``."""
    d = resolve_deployment(registry, model, deployment_id)
    status = _call(registry.update_autoscaling, model.id, d.id, body.model_dump(exclude_none=True))
    message = "autoscaling settings updated" if status == "ACCEPTED" else "the settings were already these"
    return {"status": status, "message": message}


@router.patch("/models/{model_id}/deployments/{deployment_id}/request_backpressure_settings")
def update_backpressure(
    registry: RegistryDep, model: ManageModel, deployment_id: str, body: BackpressureUpdate
) -> dict[str, Any]:
    """Set the policy → ``{request_backpressure_settings: {policy}}``; the gateway applies it at once."""
    d = resolve_deployment(registry, model, deployment_id)
    _call(registry.set_request_backpressure, model.id, d.id, body.policy)
    return {"request_backpressure_settings": {"policy": body.policy}}


@router.delete("/models/{model_id}/deployments/{deployment_id}/replicas/{replica_id}")
def terminate_replica(
    registry: RegistryDep, model: ManageModel, deployment_id: str, replica_id: str
) -> dict[str, bool]:
    """Terminate one replica (records REPLICA_TERMINATED) → ``{success}``."""
    d = resolve_deployment(registry, model, deployment_id)
    _call(registry.terminate_replica, model.id, d.id, replica_id)
    return SUCCESS


# -- environments -------------------------------------------------------------------------------


@router.get("/models/{model_id}/environments")
def list_environments(registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``{environments: [EnvironmentV1]}``."""
    return {"environments": [environment_v1(registry, e) for e in registry.list_environments(model.id)]}


@router.post("/models/{model_id}/environments", status_code=201)
def create_environment(registry: RegistryDep, model: ManageModel, body: EnvironmentCreate) -> dict[str, Any]:
    """Create an environment → 201 ``EnvironmentV1``; 409 if the name is taken.

    ``request_backpressure_settings`` is validated; the environment reports its serving deployment's.
    """
    env = _call(
        registry.create_environment,
        model.id,
        body.name,
        promotion_settings=_settings(body.promotion_settings),
        autoscaling_settings=_settings(body.autoscaling_settings),
    )
    return environment_v1(registry, env)


@router.get("/models/{model_id}/environments/{env_name}")
def get_environment(registry: RegistryDep, model: ReadModel, env_name: str) -> dict[str, Any]:
    """``EnvironmentV1``."""
    return environment_v1(registry, resolve_environment(registry, model, env_name))


@router.patch("/models/{model_id}/environments/{env_name}")
def update_environment(
    registry: RegistryDep, model: ManageModel, env_name: str, body: EnvironmentUpdate
) -> dict[str, Any]:
    """Update settings (records ENVIRONMENT_UPDATED) → ``{environment, status, message}``."""
    resolve_environment(registry, model, env_name)
    env = _call(
        registry.update_environment,
        model.id,
        env_name,
        promotion_settings=_settings(body.promotion_settings),
        autoscaling_settings=_settings(body.autoscaling_settings),
    )
    return {
        "environment": environment_v1(registry, env),
        "status": "ACCEPTED",
        "message": "environment updated",
    }


@router.post("/models/{model_id}/environments/{env_name}/promote")
def promote(registry: RegistryDep, model: ManageModel, env_name: str, body: PromoteBody) -> dict[str, Any]:
    """Promote a deployment (instant, or rolling per settings / ``percent``) → ``DeploymentV1``."""
    resolve_environment(registry, model, env_name)
    d = resolve_deployment(registry, model, body.deployment_id)
    _call(registry.promote, model.id, env_name, d.id, percent=body.percent, rolling=body.rolling)
    found = registry.deployment(model.id, d.id)
    assert found is not None
    return deployment_v1(registry, found)


def _env_action(
    registry: Registry, model: ModelInfo, env_name: str, method: Callable[..., Any], *args: Any
) -> Any:
    resolve_environment(registry, model, env_name)
    return _call(method, model.id, env_name, *args)


@router.post("/models/{model_id}/environments/{env_name}/activate")
def activate_environment(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Let the environment serve again → ``{success}``."""
    _env_action(registry, model, env_name, registry.activate_environment)
    return SUCCESS


@router.post("/models/{model_id}/environments/{env_name}/deactivate")
def deactivate_environment(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
    """Stop the environment serving → ``{success}``."""
    _env_action(registry, model, env_name, registry.deactivate_environment)
    return SUCCESS


@router.post("/models/{model_id}/environments/{env_name}/cancel_promotion")
def cancel_promotion(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, str]:
    """Cancel the running promotion → ``{status: CANCELED, message}``; 409 if none is running."""
    promotion = _env_action(registry, model, env_name, registry.cancel_promotion)
    return {"status": promotion.status, "message": f"promotion of {promotion.deployment_id} canceled"}


class PercentBody(_Body):
    """Body of ``POST …/environments/{env_name}/promotion_percent`` (our extension)."""

    percent: int = Field(ge=0, le=100, strict=True)


@router.post("/models/{model_id}/environments/{env_name}/promotion_percent")
def set_promotion_percent(
    registry: RegistryDep, model: ManageModel, env_name: str, body: PercentBody
) -> dict[str, Any]:
    """Move the running rolling promotion to ``percent`` % of traffic on the new deployment (100
    completes it) → ``{status, percent_traffic_to_new_version}``; 409 if none is running."""
    promotion = _env_action(registry, model, env_name, registry.set_promotion_percent, body.percent)
    return {
        "status": promotion.status,
        "percent_traffic_to_new_version": promotion.percent_traffic_to_new_version,
    }


def _control(name: str, doc: str) -> None:
    def action(registry: RegistryDep, model: ManageModel, env_name: str) -> dict[str, bool]:
        _env_action(registry, model, env_name, getattr(registry, name))
        return SUCCESS

    action.__doc__ = doc
    action.__name__ = name
    router.post(f"/models/{{model_id}}/environments/{{env_name}}/{name}")(action)


_control("pause_promotion", "Pause the running rolling promotion → ``{success}``; 409 if none is running.")
_control("resume_promotion", "Resume a paused promotion → ``{success}``; 409 if it is not paused.")
_control("force_cancel_promotion", "Cancel now and roll back → ``{success}``; 409 if none is running.")
_control(
    "force_roll_forward_promotion", "Complete the promotion now → ``{success}``; 409 if none is running."
)


# -- events -------------------------------------------------------------------------------------


def _kinds(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    kinds = [k.strip().upper() for v in values for k in v.split(",") if k.strip()]
    bad = [k for k in kinds if k not in EVENT_KINDS]
    if bad:
        raise bad_request(f"unknown event kinds {', '.join(bad)}; use any of {', '.join(EVENT_KINDS)}")
    return kinds


@router.get("/models/{model_id}/events")
def list_events(
    registry: RegistryDep,
    model: ReadModel,
    start_epoch_millis: Annotated[int | None, Query(ge=0, le=MAX_EPOCH_MS)] = None,
    end_epoch_millis: Annotated[int | None, Query(ge=0, le=MAX_EPOCH_MS)] = None,
    kinds: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    """Events in ``[start, end]`` (end defaults to now, start to end − 1 h), oldest first, of ``kinds``
    (repeat ``kinds=`` or separate with commas; all kinds when absent) → ``{events: [...]}``."""
    end = end_epoch_millis if end_epoch_millis is not None else time.time_ns() // 1_000_000
    start = start_epoch_millis if start_epoch_millis is not None else end - 3_600_000
    if start >= end:
        raise bad_request(f"start_epoch_millis ({start}) must be before end_epoch_millis ({end})")
    events = registry.list_events(model.id, start, end, _kinds(kinds))
    return {"events": [event_v1(e) for e in events]}
