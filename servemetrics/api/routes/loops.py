"""Trainer (Loops) deployments: ``POST /v1/loops/deployments/{id}/metrics`` (spec
``loops-deployment-metrics.md``), the organization's trainer deployments with their nodes, and the link
between a trainer and its sampler's model deployment. docs/loops.md has the rules.

Auth as the model metrics endpoints: a key of the organization that may read metrics; a key scoped to
``model_ids`` sees the trainer deployments whose sampler is one of those models. Another organization's
(or an out-of-scope) trainer deployment is a 404.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from servemetrics.api.deps import Auth, ReadModel, RegistryDep, ServiceDep, require_org_metrics_read
from servemetrics.api.errors import ApiError, bad_request, not_found
from servemetrics.api.loops_schemas import (
    MAX_BODY_BYTES,
    PER_RANK,
    LoopsMetricsRequest,
    LoopsMetricsResponse,
    loops_metrics,
)
from servemetrics.api.loops_shapes import trainer_v1
from servemetrics.api.params import reject_unknown_params
from servemetrics.query.loops import execute_loops
from servemetrics.query.loops_plan import LoopsNode, build_loops_plan
from servemetrics.registry import KeyInfo, Registry, TrainerDeploymentInfo

router = APIRouter(prefix="/v1", tags=["loops"])
_LIST = "list your trainer deployments with GET /v1/loops/deployments"
MAX_ECHOED_ID = 100
"""Characters of an unknown id echoed back in a 404 (the rest is cut and marked with "…")."""
_FIELDS = "start_epoch_millis, end_epoch_millis, step_seconds, time_divisor_seconds"
_OBJECT = (
    f'the request body must be a JSON object with any of the fields {_FIELDS}, e.g. {{"step_seconds": 60}}'
)


def trainer_visible(key: KeyInfo, trainer: TrainerDeploymentInfo) -> bool:
    """Whether ``key`` (of the trainer's organization) may see ``trainer``: an unscoped key sees every
    trainer; a key scoped to ``model_ids`` those whose sampler model is one of them."""
    return key.model_ids is None or trainer.sampler_model_id in key.model_ids


def shown_id(value: str) -> str:
    """``value`` as echoed in an error message: its first ``MAX_ECHOED_ID`` characters, then "…" when
    longer."""
    return value if len(value) <= MAX_ECHOED_ID else value[:MAX_ECHOED_ID] + "…"


def resolve_trainer(registry: Registry, key: KeyInfo, deployment_id: str) -> TrainerDeploymentInfo:
    """Trainer deployment ``deployment_id`` visible to ``key`` (404 otherwise), if the key may read
    metrics (403 for a key type that never may)."""
    trainer = registry.trainers.trainer_deployment(deployment_id, key.organization_id)
    if trainer is None or not trainer_visible(key, trainer):
        raise not_found(f"no trainer deployment {shown_id(deployment_id)!r}; {_LIST}")
    require_org_metrics_read(key)
    return trainer


def readable_trainer(
    registry: RegistryDep, key: Auth, deployment_id: Annotated[str, Path()]
) -> TrainerDeploymentInfo:
    """The path's trainer deployment (``resolve_trainer``), resolved before the body is read: an unknown
    trainer is a 404 whatever the body.

    Raises:
        ApiError: 409 when a model deployment has the trainer's id (only in a registry written before ids
            were checked across kinds): the trainer's series cannot be told apart from that deployment's,
            so none are answered.
    """
    trainer = resolve_trainer(registry, key, deployment_id)
    if registry.trainers.shares_deployment_id(trainer.id):
        raise ApiError(
            409,
            f"trainer deployment {shown_id(trainer.id)!r} has the id of a model deployment registered before "
            "ids were checked across kinds, so its series cannot be told apart from that deployment's; "
            "declare the trainer under another id",
        )
    return trainer


@router.get("/loops/deployments")
def list_trainer_deployments(
    request: Request, registry: RegistryDep, key: Auth, scope: Annotated[str | None, Query()] = None
) -> dict[str, Any]:
    """``{deployments: [LoopsDeploymentV1 …]}`` (``loops_shapes.trainer_v1``): the organization's trainer
    deployments with their nodes (leader first), targets and sampler. ``scope`` is the platform's: absent
    (the caller's own) or ``org`` (the organization's) list the same trainers here, those of the key's
    organization in its scope, since keys belong to organizations, not users. 400 for another ``scope`` or
    any other query parameter, 403 for a key that may not read metrics."""
    reject_unknown_params(request, ("scope",))
    if scope is not None and scope != "org":
        raise bad_request(f"scope must be 'org' or left out, not {shown_id(scope)!r}")
    require_org_metrics_read(key)
    found = registry.trainers.list_trainer_deployments(key.organization_id)
    return {"deployments": [trainer_v1(registry, t) for t in found if trainer_visible(key, t)]}


@router.get("/loops/deployments/{deployment_id}")
def get_trainer_deployment(
    request: Request, registry: RegistryDep, key: Auth, deployment_id: str
) -> dict[str, Any]:
    """``{deployment: LoopsDeploymentV1}`` (the platform's ``GetLoopsDeploymentResponseV1``; the entry
    has the shape of a ``GET /v1/loops/deployments`` one); 404 as ``resolve_trainer``, 400 for any query
    parameter (it takes none)."""
    trainer = resolve_trainer(registry, key, deployment_id)
    reject_unknown_params(request, ())
    return {"deployment": trainer_v1(registry, trainer)}


@router.get("/models/{model_id}/loops_deployments")
def trainers_of_model(request: Request, registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``{deployments: [...]}``: the trainer deployments whose sampler is this model (our extension);
    400 for any query parameter (it takes none)."""
    reject_unknown_params(request, ())
    return {
        "deployments": [
            trainer_v1(registry, t)
            for t in registry.trainers.list_trainer_deployments(model.organization_id, model.id)
        ]
    }


def _too_large(size: str) -> ApiError:
    return ApiError(
        413,
        f"the request body is {size} bytes; at most {MAX_BODY_BYTES} are allowed: send a JSON object "
        f"with any of the fields {_FIELDS}",
    )


async def read_capped_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, at most ``limit`` bytes, read chunk by chunk so that a larger body is never held
    in memory whole.

    Raises:
        ApiError: 413 when ``Content-Length`` says more than ``limit`` bytes (nothing read) or the body
            turns out longer than ``limit`` bytes (reading stops at the first chunk past it).
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(declared)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(f"more than {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


async def loops_body(request: Request) -> LoopsMetricsRequest:
    """The request body read as JSON whatever its Content-Type: the spec's own curl example sends it with
    ``--data`` (``application/x-www-form-urlencoded``). Empty or ``null``: every default.

    Raises:
        ApiError: 400 for a query parameter (the fields go in the body), a body that is not JSON, nested
            too deeply to parse, not an object, or with a bad field; 413 for a body over
            ``MAX_BODY_BYTES`` bytes.
    """
    reject_unknown_params(request, (), f"; send the fields in the JSON body: {_FIELDS}")
    raw = await read_capped_body(request)
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(
            f'the request body is not valid JSON ({exc}); send e.g. {{"step_seconds": 60}}'
        ) from None
    except RecursionError:  # arrays or objects nested thousands deep: never a valid body
        raise bad_request(f"{_OBJECT}; this body is nested too deeply to parse") from None
    if data is None:
        return LoopsMetricsRequest()
    if not isinstance(data, dict):
        raise bad_request(_OBJECT)
    try:
        return LoopsMetricsRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


_BODY_DOC = {
    "requestBody": {
        "required": False,
        "content": {"application/json": {"schema": LoopsMetricsRequest.model_json_schema()}},
    }
}


def loops_nodes(trainer: TrainerDeploymentInfo) -> tuple[LoopsNode, ...]:
    """The query's view of a trainer's nodes (leader first)."""
    return tuple(
        LoopsNode(
            n.node_id,
            n.role == "leader",
            n.gpu_ranks,
            n.pod,
            n.namespace,
            tuple(t.url for t in n.targets if t.kind == "requests"),
        )
        for n in trainer.nodes
    )


@router.post(
    "/loops/deployments/{deployment_id}/metrics",
    response_model=LoopsMetricsResponse,
    description="Per-node GPU / CPU / memory / ephemeral storage of a trainer deployment and the request "
    "rate, concurrency, latency percentiles and by-status volume of HTTP traffic into its pods. "
    f"`gpu_memory_usage_bytes` and `gpu_utilization` (top level and per node): {PER_RANK}",
    openapi_extra=_BODY_DOC,
)
def trainer_metrics(
    service: ServiceDep,
    trainer: Annotated[TrainerDeploymentInfo, Depends(readable_trainer)],
    b: Annotated[LoopsMetricsRequest, Depends(loops_body)],
) -> LoopsMetricsResponse:
    """``GetLoopsDeploymentMetricsResponseV1`` for the window (default: the last hour)."""
    plan = build_loops_plan(
        trainer.id,
        loops_nodes(trainer),
        b.start_epoch_millis,
        b.end_epoch_millis,
        b.step_seconds,
        b.time_divisor_seconds,
        service.clock(),
        scrape_interval_s=service.config.scrape_interval,
    )
    started = time.perf_counter()
    result = execute_loops(plan, service.store)
    service.metrics.query_latency.labels("LOOPS").observe(time.perf_counter() - started)
    return LoopsMetricsResponse(deployment_id=trainer.id, metrics=loops_metrics(result))
