"""The model metrics endpoints (spec ``environment-metrics.md``): environment and deployment scope.

Both answer ``GetModelMetricsResponseV1``; the query semantics are in ``docs/query-semantics.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BeforeValidator

from servemetrics.api.deps import (
    DEPLOYMENT_ALIASES,
    Auth,
    ReadModel,
    RegistryDep,
    ServiceDep,
    resolve_deployment,
    resolve_environment,
)
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.schemas import MetricsResponse, metrics_response
from servemetrics.api.service import Service
from servemetrics.api.team_scope import no_other_teams
from servemetrics.catalog.splits import Split
from servemetrics.query.custom import custom_metric
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.registry.records import ModelInfo
from servemetrics.timeutil import MAX_TS_MS, Timeline

router = APIRouter(tags=["metrics"])
QUERY_PARAMETERS = frozenset({"mode", "start_epoch_millis", "end_epoch_millis", "metrics", "group_by"})

ModeQ = Annotated[
    Mode,
    BeforeValidator(lambda v: v.upper() if isinstance(v, str) else v),
    Query(description="CURRENT (default), SUMMARY or SERIES (any case)."),
]
StartQ = Annotated[
    int | None, Query(ge=0, le=MAX_TS_MS, description="Window start, epoch ms (default: end - 1 h).")
]
EndQ = Annotated[int | None, Query(ge=0, le=MAX_TS_MS, description="Window end, epoch ms (default: now).")]
MetricsQ = Annotated[
    list[str] | None,
    Query(description="Repeatable metric names (default: replicas, requests, end-to-end latency)."),
]
GroupByQ = Annotated[
    Split | None,
    BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
    Query(
        description="Drill-down, our extension (not in the spec): split every requested metric by "
        "replica, gpu, deployment, status_code (exact codes) or team (Model API metrics; any case); "
        "each label set carries that label, one per part present in the window. A metric that does not "
        "accept the value is a 400 (docs/query-semantics.md, Drill-down). Absent: the spec's answer."
    ),
]


@dataclass(frozen=True)
class MetricsParams:
    """The query parameters both metrics endpoints take (epoch ms; ``metrics`` None = default set)."""

    mode: Mode
    start_epoch_millis: int | None
    end_epoch_millis: int | None
    metrics: list[str] | None
    group_by: Split | None = None


def metrics_params(
    request: Request,
    mode: ModeQ = Mode.CURRENT,
    start_epoch_millis: StartQ = None,
    end_epoch_millis: EndQ = None,
    metrics: MetricsQ = None,
    group_by: GroupByQ = None,
) -> MetricsParams:
    """Validated query parameters; 400 naming any parameter the endpoints do not take (and a
    ``group_by`` outside replica, gpu, deployment, status_code, team)."""
    reject_unknown_params(request, QUERY_PARAMETERS)
    return MetricsParams(mode, start_epoch_millis, end_epoch_millis, metrics, group_by)


Params = Annotated[MetricsParams, Depends(metrics_params)]


def _answer(
    service: Service, model_id: str, p: MetricsParams, timeline_of: Callable[[int, int], Timeline]
) -> MetricsResponse:
    """The metrics body; a bad window or metric name raises (400 by ``install_error_handlers``)."""
    plan = build_plan(
        model_id,
        p.mode,
        p.start_epoch_millis,
        p.end_epoch_millis,
        p.metrics,
        timeline_of,
        service.clock(),
        group_by=p.group_by,
        custom_of=lambda name: custom_metric(service.store, model_id, name),
    )
    started = time.perf_counter()
    result = execute(plan, service.store)
    service.metrics.query_latency.labels(p.mode.value).observe(time.perf_counter() - started)
    return metrics_response(result)


def _flight(scope: str, model: ModelInfo, name: str, p: MetricsParams) -> Hashable | None:
    """The single-flight key of a request (``ReadPool``): everything its answer depends on; None (not
    shared) unless both ends of its window are given."""
    if p.start_epoch_millis is None or p.end_epoch_millis is None:
        return None
    metrics = None if p.metrics is None else tuple(p.metrics)
    window = (p.mode, p.start_epoch_millis, p.end_epoch_millis, metrics, p.group_by)
    return (scope, model.organization_id, model.id, name, window)


@router.get("/v1/models/{model_id}/environments/{env_name}/metrics", response_model=MetricsResponse)
async def environment_metrics(
    service: ServiceDep, registry: RegistryDep, model: ReadModel, key: Auth, env_name: str, params: Params
) -> MetricsResponse:
    """Metrics aggregated across every deployment that served the environment, split at promotions."""
    no_other_teams(key, params.group_by, params.metrics)

    def answer() -> MetricsResponse:
        env = resolve_environment(registry, model, env_name)
        return _answer(
            service,
            model.id,
            params,
            lambda s, e: registry.environments.serving_timeline(model.id, env.name, s, e),
        )

    return await service.reads.run(_flight("environment", model, env_name, params), answer)


@router.get("/v1/models/{model_id}/deployments/{deployment_id}/metrics", response_model=MetricsResponse)
async def deployment_metrics(
    service: ServiceDep,
    registry: RegistryDep,
    model: ReadModel,
    key: Auth,
    deployment_id: str,
    params: Params,
) -> MetricsResponse:
    """Metrics of one deployment (``production`` / ``development`` name that environment's deployment)."""
    no_other_teams(key, params.group_by, params.metrics)

    def answer() -> MetricsResponse:
        dep = resolve_deployment(registry, model, deployment_id)
        return _answer(service, model.id, params, lambda s, e: [(s, frozenset({dep.id}))])

    # an alias names whichever deployment the environment has when the answer is computed: not shared
    flight = (
        None if deployment_id in DEPLOYMENT_ALIASES else _flight("deployment", model, deployment_id, params)
    )
    return await service.reads.run(flight, answer)
