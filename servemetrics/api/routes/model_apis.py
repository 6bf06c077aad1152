"""The Model API management routes (platform-facts §3; the SDK's ``get_model_apis`` and
``get_model_apis_model_api_name``): ``GET /v1/model_apis`` and ``GET /v1/model_apis/{model_api_name}``.

Any key of the organization may list and read its Model APIs (callers need the names and the limits
in effect for their team); another organization's Model API, or an unknown name, is a 404 in the house's
``{"error": …}`` shape. ``GET /v1/model_apis/{model_api_name}/metrics`` answers the model metrics
response for the Model API's series, one label set per team. docs/model-apis.md describes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from servemetrics.api.deps import Auth, RegistryDep, ServiceDep, require_org_metrics_read
from servemetrics.api.errors import bad_request, not_found
from servemetrics.api.model_api_shapes import decode_cursor, encode_cursor, model_api
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.routes.metrics import EndQ, MetricsQ, ModeQ, StartQ
from servemetrics.api.schemas import MetricsResponse, metrics_response
from servemetrics.api.service import Service
from servemetrics.api.team_scope import team_scope
from servemetrics.catalog import CATALOG
from servemetrics.catalog.model_apis import DEFAULT_MODEL_API_METRICS, PREFIX
from servemetrics.catalog.splits import Split
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.registry import KeyInfo, Registry
from servemetrics.registry.model_apis import ModelApiInfo
from servemetrics.timeutil import Timeline

router = APIRouter(tags=["model_apis"])
MAX_PAGE = 1000
"""``limit`` of ``GET /v1/model_apis``: 1 to 1000, default 100 (the SDK's ``GetModelApisParams``)."""


def resolve_model_api(registry: Registry, key: KeyInfo, name: str) -> ModelApiInfo:
    """The key's organization's Model API ``name``; 404 when it has none of that name (also when another
    organization has one) and when the key is scoped to models that do not include the one serving it
    (what a model-scoped key cannot see, it is not told exists: the model routes' rule)."""
    found = registry.model_apis.model_api(key.organization_id, name)
    if found is None or (key.model_ids is not None and found.model_id not in key.model_ids):
        raise not_found(f"no Model API {name!r}; list your organization's with GET /v1/model_apis")
    return found


def invoke_url(request: Request) -> str:
    """This service's base URL, under which the OpenAI-shaped routes (``/v1/chat/completions``) live."""
    return str(request.base_url).rstrip("/")


def _shape(service: Service, request: Request, api: ModelApiInfo, key: KeyInfo) -> dict[str, Any]:
    last = service.last_used(api.organization_id, api.name)
    return model_api(api, key.team_id, invoke_url(request), last)


@router.get("/v1/model_apis")
def list_model_apis(
    request: Request,
    service: ServiceDep,
    registry: RegistryDep,
    key: Auth,
    cursor: Annotated[str | None, Query(description="pagination.cursor of the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Items per page (1-1000).")] = 100,
    added_only: Annotated[bool, Query(description="Every Model API here is the workspace's own.")] = False,
) -> dict[str, Any]:
    """``ModelAPIsResponse``: the organization's Model APIs by name, ``limit`` a page, after the one the
    ``cursor`` names; ``pagination.has_more`` / ``cursor`` say where the next page starts. ``added_only``
    changes nothing: a self-hosted Model API is always its organization's own. A model-scoped key lists
    those its models serve."""
    reject_unknown_params(request, ("cursor", "limit", "added_only"))
    apis = registry.model_apis.list_model_apis(key.organization_id)
    if key.model_ids is not None:  # a model-scoped key: the Model APIs its models serve
        apis = [a for a in apis if a.model_id in key.model_ids]
    if cursor is not None:
        after = decode_cursor(cursor)
        apis = [a for a in apis if a.name > after]
    page, more = apis[:limit], len(apis) > limit
    return {
        "items": [_shape(service, request, a, key) for a in page],
        "pagination": {"has_more": more, "cursor": encode_cursor(page[-1].name) if more else None},
    }


@router.get("/v1/model_apis/{model_api_name}")
def get_model_api(
    request: Request, service: ServiceDep, registry: RegistryDep, key: Auth, model_api_name: str
) -> dict[str, Any]:
    """``ModelAPI`` ``model_api_name`` of the key's organization, with the rate limits in effect for the
    key's team; 404 for an unknown name or another organization's."""
    reject_unknown_params(request, ())
    return _shape(service, request, resolve_model_api(registry, key, model_api_name), key)


METRICS_PARAMS = ("mode", "start_epoch_millis", "end_epoch_millis", "metrics", "team_ids", "team_ids[]")


def requested_teams(request: Request) -> list[str]:
    """``team_ids[]`` / ``team_ids`` (repeatable, comma-separated values too), order kept, once each."""
    values = [*request.query_params.getlist("team_ids[]"), *request.query_params.getlist("team_ids")]
    return list(dict.fromkeys(t.strip() for v in values for t in v.split(",") if t.strip()))


def _timeline(registry: Registry, api: ModelApiInfo) -> Callable[[int, int], Timeline]:
    """Who served ``api`` over a window: its deployment, or its environment's serving timeline."""
    if api.deployment_id is not None:
        deployment = api.deployment_id
        return lambda s, e: [(s, frozenset({deployment}))]
    env = api.environment or "production"
    return lambda s, e: registry.environments.serving_timeline(api.model_id, env, s, e)


def _only_model_api_metrics(names: list[str] | None) -> None:
    """400 for a catalog metric that is not a Model API's (names outside the catalog are the plan's)."""
    given = [n.strip() for name in names or () for n in name.split(",") if n.strip()]
    other = [n for n in given if n in CATALOG and not n.startswith(PREFIX)]
    if other:
        raise bad_request(
            f"{', '.join(other[:10])}: not Model API metrics; ask for {PREFIX}* names here "
            "(docs/catalog.md), a model's metrics at /v1/models/{model_id}/environments/{env_name}/metrics"
        )


@router.get("/v1/model_apis/{model_api_name}/metrics", response_model=MetricsResponse)
async def model_api_metrics(
    request: Request,
    service: ServiceDep,
    registry: RegistryDep,
    key: Auth,
    model_api_name: str,
    mode: ModeQ = Mode.CURRENT,
    start_epoch_millis: StartQ = None,
    end_epoch_millis: EndQ = None,
    metrics: MetricsQ = None,
) -> MetricsResponse:
    """``GetModelMetricsResponseV1`` of the Model API's series (modes, windows and steps as the model
    metrics endpoints, docs/query-semantics.md), every label set led by ``team_id`` (one per team that
    called: the ``team`` split), for the teams ``team_scope`` allows; default metrics
    ``DEFAULT_MODEL_API_METRICS``. 403 a key that may not read metrics; 404 another organization's or an
    unknown Model API (or one whose model a scoped key does not cover); 400 bad parameters."""
    reject_unknown_params(request, METRICS_PARAMS)
    api = resolve_model_api(registry, key, model_api_name)
    require_org_metrics_read(key, "Model API metrics")
    teams = [t.team_id for t in registry.model_apis.list_teams(key.organization_id)]
    parts = team_scope(key, requested_teams(request), teams)
    _only_model_api_metrics(metrics)

    def answer() -> MetricsResponse:
        plan = build_plan(
            api.model_id,
            mode,
            start_epoch_millis,
            end_epoch_millis,
            metrics,
            _timeline(registry, api),
            service.clock(),
            group_by=Split.TEAM,
            matchers=(("model_api", api.name),),
            parts=parts,
            defaults=DEFAULT_MODEL_API_METRICS,
        )
        return metrics_response(execute(plan, service.store))

    flight = None
    if start_epoch_millis is not None and end_epoch_millis is not None:
        window = (mode, start_epoch_millis, end_epoch_millis, tuple(metrics or ()), parts)
        flight = ("model_api", key.organization_id, api.name, window)
    return await service.reads.run(flight, answer)
