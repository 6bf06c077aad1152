"""``GET /v1/models/{model_id}/engines``: which engines (vLLM, SGLang, Triton, BIS-LLM-style) the
model's deployments expose, from cached detection (``query.engines``), and so which engine metrics
apply to a scope (``catalog.detection``). The dashboard shows engine graphs only where they apply.

docs/dashboard-api.md describes it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from servemetrics.api.deps import (
    ClockDep,
    ReadModel,
    RegistryDep,
    ServiceDep,
    resolve_deployment,
    resolve_environment,
)
from servemetrics.api.errors import bad_request
from servemetrics.api.params import reject_unknown_params
from servemetrics.catalog import CATALOG
from servemetrics.catalog.detection import engines_of
from servemetrics.query.windows import MAX_WINDOW_MS
from servemetrics.registry import ModelInfo, Registry

router = APIRouter(tags=["dashboard"])


def _scope_deployments(
    registry: Registry, model: ModelInfo, deployment_id: str | None, environment: str | None, now_ms: int
) -> list[str]:
    """The deployment ids of the scope: one deployment (``production`` / ``development`` name the one
    that environment points at), the deployments that served an environment over the longest window a
    metrics request takes (``MAX_WINDOW_MS``, 7 days, up to now), or every deployment of the model.
    404 for an unknown deployment or environment."""
    if deployment_id is not None:
        return [resolve_deployment(registry, model, deployment_id).id]
    if environment is not None:
        env = resolve_environment(registry, model, environment)
        timeline = registry.environments.serving_timeline(model.id, env.name, now_ms - MAX_WINDOW_MS, now_ms)
        return sorted({d for _, serving in timeline for d in serving})
    return [d.id for d in registry.deployments.list_deployments(model.id)]


@router.get("/v1/models/{model_id}/engines")
def model_engines(
    request: Request,
    model: ReadModel,
    service: ServiceDep,
    registry: RegistryDep,
    clock: ClockDep,
    deployment_id: Annotated[
        str | None, Query(description="One deployment (or production / development).")
    ] = None,
    environment: Annotated[str | None, Query(description="The deployments serving this environment.")] = None,
) -> dict[str, Any]:
    """``{model_id, engines: [engine] (the scope's, ``catalog.detection.ENGINES`` order),
    deployments: [{deployment_id, engines}], metrics: [catalog names of the engine metrics that apply],
    checked_at_epoch_millis, refresh_seconds}``.

    Raises:
        ApiError: 400 for both ``deployment_id`` and ``environment``, an empty one, or another query
            parameter; 404 for an unknown (or another organization's) model, deployment or environment.
    """
    reject_unknown_params(request, ("deployment_id", "environment"))
    if deployment_id is not None and environment is not None:
        raise bad_request(
            "give deployment_id or environment, not both (neither: every deployment of the model)"
        )
    for name, value in (("deployment_id", deployment_id), ("environment", environment)):
        if value is not None and not value.strip():
            raise bad_request(
                f"{name} is empty; name one or leave {name} out for every deployment of the model"
            )
    now = clock()
    ids = _scope_deployments(registry, model, deployment_id, environment, now)
    detection = service.engines.get(service.store, model.id, now)
    engines = detection.engines(set(ids))
    applies = [n for n in CATALOG if any(e in engines for e in engines_of(n))]
    return {
        "model_id": model.id,
        "engines": list(engines),
        "deployments": [{"deployment_id": d, "engines": list(detection.engines({d}))} for d in ids],
        "metrics": applies,
        "checked_at_epoch_millis": detection.checked_at_ms,
        "refresh_seconds": service.engines.ttl_ms // 1000,
    }
