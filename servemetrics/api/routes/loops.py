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

from fastapi import APIRouter, Depends, Path, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from servemetrics.api.deps import Auth, ReadModel, RegistryDep
from servemetrics.api.errors import bad_request, forbidden, not_found
from servemetrics.api.loops_schemas import PER_RANK, LoopsMetricsRequest, LoopsMetricsResponse
from servemetrics.api.routes.management import iso
from servemetrics.query.loops import execute_loops
from servemetrics.query.loops_plan import LoopsNode, build_loops_plan
from servemetrics.query.windows import WindowError
from servemetrics.registry import KeyInfo, Registry, TrainerDeploymentInfo, TrainerNode, can_read_metrics
from servemetrics.types import redact_url

router = APIRouter(prefix="/v1", tags=["loops"])
_LIST = "list your trainer deployments with GET /v1/loops/deployments"


def _readable(key: KeyInfo) -> None:
    # full-access keys may read any metrics; export keys those in their scope (checked by _visible)
    if not can_read_metrics(key, "") and key.type != "WORKSPACE_EXPORT_METRICS":
        raise forbidden(
            f"a {key.type} key cannot read metrics; use a WORKSPACE_EXPORT_METRICS, "
            "WORKSPACE_MANAGE_ALL or PERSONAL key"
        )


def _visible(key: KeyInfo, trainer: TrainerDeploymentInfo) -> bool:
    return key.model_ids is None or trainer.sampler_model_id in key.model_ids


def resolve_trainer(registry: Registry, key: KeyInfo, deployment_id: str) -> TrainerDeploymentInfo:
    """Trainer deployment ``deployment_id`` visible to ``key`` (404 otherwise), if the key may read
    metrics (403 for a key type that never may)."""
    trainer = registry.trainer_deployment(deployment_id, key.organization_id)
    if trainer is None or not _visible(key, trainer):
        raise not_found(f"no trainer deployment {deployment_id!r}; {_LIST}")
    _readable(key)
    return trainer


def readable_trainer(
    registry: RegistryDep, key: Auth, deployment_id: Annotated[str, Path()]
) -> TrainerDeploymentInfo:
    """The path's trainer deployment (``resolve_trainer``), resolved before the body is read: an unknown
    trainer is a 404 whatever the body."""
    return resolve_trainer(registry, key, deployment_id)


def _node_v1(node: TrainerNode) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "role": node.role,
        "gpu_ranks": list(node.gpu_ranks),
        "pod": node.pod,
        "namespace": node.namespace,
        "targets": [{"url": redact_url(t.url), "kind": t.kind} for t in node.targets],
    }


def trainer_v1(trainer: TrainerDeploymentInfo) -> dict[str, Any]:
    """``{id, name, created_at, sampler: {model_id, deployment_id, metrics_url} | null, nodes: [...]}``."""
    sampler = None
    if trainer.sampler_model_id:
        dep = trainer.sampler_deployment_id
        url = f"/v1/models/{trainer.sampler_model_id}/deployments/{dep}/metrics" if dep else None
        sampler = {"model_id": trainer.sampler_model_id, "deployment_id": dep, "metrics_url": url}
    return {
        "id": trainer.id,
        "name": trainer.name,
        "created_at": iso(trainer.created_at_ms),
        "sampler": sampler,
        "metrics_url": f"/v1/loops/deployments/{trainer.id}/metrics",
        "nodes": [_node_v1(n) for n in trainer.nodes],
    }


@router.get("/loops/deployments")
def list_trainer_deployments(registry: RegistryDep, key: Auth) -> dict[str, Any]:
    """``{deployments: [...]}``: the organization's trainer deployments with their nodes (leader first),
    targets and sampler (the model deployment whose metrics the model endpoints serve)."""
    _readable(key)
    found = registry.list_trainer_deployments(key.organization_id)
    return {"deployments": [trainer_v1(t) for t in found if _visible(key, t)]}


@router.get("/loops/deployments/{deployment_id}")
def get_trainer_deployment(registry: RegistryDep, key: Auth, deployment_id: str) -> dict[str, Any]:
    """One trainer deployment (the shape of a ``GET /v1/loops/deployments`` entry)."""
    return trainer_v1(resolve_trainer(registry, key, deployment_id))


@router.get("/models/{model_id}/loops_deployments")
def trainers_of_model(registry: RegistryDep, model: ReadModel) -> dict[str, Any]:
    """``{deployments: [...]}``: the trainer deployments whose sampler is this model (our extension)."""
    return {
        "deployments": [
            trainer_v1(t) for t in registry.list_trainer_deployments(model.organization_id, model.id)
        ]
    }


async def loops_body(request: Request) -> LoopsMetricsRequest:
    """The request body read as JSON whatever its Content-Type: the spec's own curl example sends it with
    ``--data`` (``application/x-www-form-urlencoded``). Empty or ``null``: every default. 400 otherwise
    (not JSON, not an object, a bad field)."""
    raw = await request.body()
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(
            f'the request body is not valid JSON ({exc}); send e.g. {{"step_seconds": 60}}'
        ) from None
    if data is None:
        return LoopsMetricsRequest()
    if not isinstance(data, dict):
        raise bad_request('the request body must be a JSON object, e.g. {"time_divisor_seconds": 60}')
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
    request: Request,
    trainer: Annotated[TrainerDeploymentInfo, Depends(readable_trainer)],
    b: Annotated[LoopsMetricsRequest, Depends(loops_body)],
) -> dict[str, Any]:
    """``GetLoopsDeploymentMetricsResponseV1`` for the window (default: the last hour)."""
    service = request.app.state.service
    try:
        plan = build_loops_plan(
            trainer.id,
            loops_nodes(trainer),
            b.start_epoch_millis,
            b.end_epoch_millis,
            b.step_seconds,
            b.time_divisor_seconds,
            service.clock(),
        )
    except WindowError as exc:
        raise bad_request(str(exc)) from exc
    started = time.perf_counter()
    metrics = execute_loops(plan, service.store)
    service.metrics.query_latency.labels("LOOPS").observe(time.perf_counter() - started)
    return {"deployment_id": trainer.id, "metrics": metrics}
