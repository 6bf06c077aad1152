"""The Model API management routes (platform-facts §3; the SDK's ``get_model_apis`` and
``get_model_apis_model_api_name``): ``GET /v1/model_apis`` and ``GET /v1/model_apis/{model_api_name}``.

Any key of the organization may list and read its Model APIs (callers need the names and the limits
in effect for their team); another organization's Model API, or an unknown name, is a 404 in the house's
``{"error": …}`` shape. docs/model-apis.md describes them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from servemetrics.api.deps import Auth, RegistryDep, ServiceDep
from servemetrics.api.errors import not_found
from servemetrics.api.model_api_shapes import decode_cursor, encode_cursor, model_api
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.service import Service
from servemetrics.registry import KeyInfo, Registry
from servemetrics.registry.model_apis import ModelApiInfo

router = APIRouter(tags=["model_apis"])
MAX_PAGE = 1000
"""``limit`` of ``GET /v1/model_apis``: 1 to 1000, default 100 (the SDK's ``GetModelApisParams``)."""


def resolve_model_api(registry: Registry, key: KeyInfo, name: str) -> ModelApiInfo:
    """The key's organization's Model API ``name``; 404 when it has none of that name (also when another
    organization has one)."""
    found = registry.model_apis.model_api(key.organization_id, name)
    if found is None:
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
    changes nothing: a self-hosted Model API is always its organization's own."""
    reject_unknown_params(request, ("cursor", "limit", "added_only"))
    apis = registry.model_apis.list_model_apis(key.organization_id)
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
