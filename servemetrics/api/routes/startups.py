"""Startup times (the dashboard's Startup time card; the platform's routes as its SDK ``baseten`` 0.13.1
calls them): ``GET /v1/models/{model_id}/deployments/{deployment_id}/startups`` and ``/startups/summary``,
and the environment forms ``/v1/models/{model_id}/environments/{env_name}/startups[/summary]``.

Reads need a key that may read the model's metrics (``require_metrics_read``: another organization's
model is a 404, no key a 401). A deployment's answers hold its replicas' attempts; an environment's hold
those of every deployment that served it in the window (``serving_timeline``), each item naming the
environment. Answers: ``api/startup_answers.py``; docs/management.md "Startup times".
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from servemetrics.api.deps import ReadModel, RegistryDep, ServiceDep, resolve_deployment, resolve_environment
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.service import Service
from servemetrics.api.startup_answers import StartupQuery, attempts_page, summary
from servemetrics.registry import ModelInfo, Registry
from servemetrics.registry.startup_marks import Attempt
from servemetrics.timeutil import MAX_TS_MS

router = APIRouter(prefix="/v1", tags=["startups"])
SUMMARY_PARAMETERS = frozenset({"start_epoch_millis", "end_epoch_millis", "min_duration_ms"})
LIST_PARAMETERS = (
    SUMMARY_PARAMETERS | {"cursor", "limit", "outcomes", "phase", "search", "sort_by"} | {"direction"}
)

StartQ = Annotated[int, Query(ge=0, le=MAX_TS_MS, description="Window start, epoch ms (required).")]
EndQ = Annotated[int, Query(ge=0, le=MAX_TS_MS, description="Window end, epoch ms (required).")]
MinQ = Annotated[int | None, Query(ge=0, description="Only attempts that lasted at least this many ms.")]


def summary_query(
    request: Request, start_epoch_millis: StartQ, end_epoch_millis: EndQ, min_duration_ms: MinQ = None
) -> StartupQuery:
    """The summary's query parameters (400 for any other, a missing window or an end not after the start)."""
    reject_unknown_params(request, SUMMARY_PARAMETERS)
    return StartupQuery(start_epoch_millis, end_epoch_millis, min_duration_ms).check()


def list_query(
    request: Request,
    start_epoch_millis: StartQ,
    end_epoch_millis: EndQ,
    min_duration_ms: MinQ = None,
    cursor: Annotated[str | None, Query(description="The previous page's pagination.cursor.")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Items per page (1-100).")] = 50,
    outcomes: Annotated[list[str] | None, Query(description="Repeatable: SUCCESS, FAILED, STALLED.")] = None,
    phase: Annotated[str | None, Query(description="Only attempts that spent time in this phase.")] = None,
    search: Annotated[str | None, Query(description="Replica id (exact) or deployment name (part).")] = None,
    sort_by: Annotated[
        str | None, Query(description="STARTED_AT (default), READY_AT, DURATION or OUTCOME.")
    ] = None,
    direction: Annotated[str | None, Query(description="desc (default) or asc.")] = None,
) -> StartupQuery:
    """The listing's query parameters (400 for any other or a value outside its set)."""
    reject_unknown_params(request, LIST_PARAMETERS)
    return StartupQuery(
        start_epoch_millis,
        end_epoch_millis,
        min_duration_ms,
        tuple(o.upper() for o in outcomes or ()),
        phase.upper() if phase else None,
        search or None,
        (sort_by or "STARTED_AT").upper(),
        (direction or "desc").lower(),
        limit,
        cursor,
    ).check()


ListQuery = Annotated[StartupQuery, Depends(list_query)]
SummaryQuery = Annotated[StartupQuery, Depends(summary_query)]


def _stall_ms(service: Service) -> int:
    return round(service.config.health.startup_stall_timeout * 1000)


def _of_deployment(
    registry: Registry, model: ModelInfo, deployment_id: str, q: StartupQuery
) -> list[Attempt]:
    dep = resolve_deployment(registry, model, deployment_id)
    return registry.startups.recent([dep.id], q.start_ms, q.end_ms)


def _of_environment(registry: Registry, model: ModelInfo, env_name: str, q: StartupQuery) -> list[Attempt]:
    env = resolve_environment(registry, model, env_name)
    timeline = registry.environments.serving_timeline(model.id, env.name, q.start_ms, q.end_ms)
    serving = sorted({d for _, deployments in timeline for d in deployments})
    return registry.startups.recent(serving, q.start_ms, q.end_ms)


@router.get("/models/{model_id}/deployments/{deployment_id}/startups")
def deployment_startups(
    service: ServiceDep, registry: RegistryDep, model: ReadModel, deployment_id: str, q: ListQuery
) -> dict[str, Any]:
    """``StartupAttempts`` of the deployment (``production`` / ``development``: that environment's)."""
    attempts = _of_deployment(registry, model, deployment_id, q)
    return attempts_page(attempts, q, service.clock(), _stall_ms(service), None)


@router.get("/models/{model_id}/deployments/{deployment_id}/startups/summary")
def deployment_startups_summary(
    service: ServiceDep, registry: RegistryDep, model: ReadModel, deployment_id: str, q: SummaryQuery
) -> dict[str, Any]:
    """``StartupSummary`` of the deployment."""
    return summary(_of_deployment(registry, model, deployment_id, q), q, service.clock(), _stall_ms(service))


@router.get("/models/{model_id}/environments/{env_name}/startups")
def environment_startups(
    service: ServiceDep, registry: RegistryDep, model: ReadModel, env_name: str, q: ListQuery
) -> dict[str, Any]:
    """``StartupAttempts`` of the deployments that served the environment in the window."""
    attempts = _of_environment(registry, model, env_name, q)
    return attempts_page(attempts, q, service.clock(), _stall_ms(service), env_name)


@router.get("/models/{model_id}/environments/{env_name}/startups/summary")
def environment_startups_summary(
    service: ServiceDep, registry: RegistryDep, model: ReadModel, env_name: str, q: SummaryQuery
) -> dict[str, Any]:
    """``StartupSummary`` of the deployments that served the environment in the window."""
    return summary(_of_environment(registry, model, env_name, q), q, service.clock(), _stall_ms(service))
