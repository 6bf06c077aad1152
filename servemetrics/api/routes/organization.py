"""Organization-wide views: ``GET /v1/organization/gpu_usage`` (active GPUs over time).

The caller's key decides the organization and the models counted: keys that may read metrics
(WORKSPACE_EXPORT_METRICS, optionally scoped to model ids: only those models; WORKSPACE_MANAGE_ALL,
PERSONAL); other key types get 403. The computation is ``query.gpu_usage``; docs/dashboard-api.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BeforeValidator

from servemetrics.api.deps import Auth, ClockDep, RegistryDep, StoreDep, require_org_metrics_read
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.schemas import gpu_usage_body
from servemetrics.query.gpu_usage import GpuDeployment, GroupBy, gpu_usage
from servemetrics.registry import KeyInfo, Registry, can_read_metrics
from servemetrics.timeutil import MAX_TS_MS

router = APIRouter(tags=["organization"])
GPU_USAGE_PARAMETERS = frozenset({"start_epoch_millis", "end_epoch_millis", "group_by", "gpu_type"})
UNKNOWN_GPU_TYPE = "unknown"
"""GPU type reported for a deployment with GPUs whose type the registry does not know."""


def gpu_deployments(registry: Registry, key: KeyInfo) -> list[GpuDeployment]:
    """Deployments with ``gpu_count > 0`` of the models of the key's organization it may read."""
    out = []
    for model in registry.tenancy.list_models(key.organization_id):
        if not can_read_metrics(key, model.id):
            continue
        for d in registry.deployments.list_deployments(model.id):
            if d.gpu_count > 0:
                gpu_type = d.gpu_type or UNKNOWN_GPU_TYPE
                out.append(GpuDeployment(model.id, model.name, d.id, gpu_type, d.gpu_count))
    return out


@router.get("/v1/organization/gpu_usage")
def organization_gpu_usage(
    request: Request,
    registry: RegistryDep,
    store: StoreDep,
    clock: ClockDep,
    key: Auth,
    start_epoch_millis: Annotated[
        int | None, Query(ge=0, le=MAX_TS_MS, description="Window start, epoch ms (default: end - 1 h).")
    ] = None,
    end_epoch_millis: Annotated[
        int | None, Query(ge=0, le=MAX_TS_MS, description="Window end, epoch ms (default: now).")
    ] = None,
    group_by: Annotated[
        GroupBy,
        BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
        Query(description="gpu_type (default) or model."),
    ] = GroupBy.GPU_TYPE,
    gpu_type: Annotated[
        list[str] | None, Query(description="Repeatable GPU type filter (default: every type).")
    ] = None,
) -> dict[str, Any]:
    """Active GPUs (active replicas x GPUs per replica) per step, grouped by GPU type or by model."""
    reject_unknown_params(request, GPU_USAGE_PARAMETERS)
    require_org_metrics_read(key)
    types = [t.strip() for v in gpu_type or () for t in v.split(",") if t.strip()]
    usage = gpu_usage(
        store,
        gpu_deployments(registry, key),
        start_epoch_millis,
        end_epoch_millis,
        clock(),
        group_by,
        types or None,
    )
    return gpu_usage_body(usage)
