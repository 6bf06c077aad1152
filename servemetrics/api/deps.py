"""FastAPI dependencies: the running service and its parts (``ServiceDep``, ``RegistryDep``, ``StoreDep``,
``ClockDep``, ``GatewayDep``), the caller's API key, and model / deployment / environment lookups. Routes
take what they need from here and never read ``request.app.state``.

Every lookup is scoped to the caller's organization: another organization's model (or one outside a
scoped key's ``model_ids``) is a 404, never a 403. A key whose type may not do something at all (an
invoke-only key reading metrics, an export key promoting) gets a 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Request
from starlette.requests import HTTPConnection

from servemetrics.api.auth_limit import client_address
from servemetrics.api.errors import ApiError, forbidden, not_found, unauthorized
from servemetrics.api.service import Clock, Service
from servemetrics.gateway import Gateway
from servemetrics.gateway.queued import QueuedRequests
from servemetrics.registry import (
    DeploymentInfo,
    EnvironmentInfo,
    KeyInfo,
    ModelInfo,
    Registry,
    can_manage,
    can_read_metrics,
)
from servemetrics.registry.keys import can_read_some_metrics
from servemetrics.store import Store

_HOW = "send `Authorization: Api-Key <key>` or `Authorization: Bearer <key>`"
DEPLOYMENT_ALIASES = ("production", "development")
"""Deployment ids that name the deployment an environment of that name points at."""


async def get_service(request: Request) -> Service:
    """The running service (``app.state.service``, set by ``create_app``'s lifespan)."""
    return service_of(request)


ServiceDep = Annotated[Service, Depends(get_service)]


async def get_registry(service: ServiceDep) -> Registry:
    """The service's registry."""
    return service.registry


async def get_store(service: ServiceDep) -> Store:
    """The service's sample store."""
    return service.store


async def get_clock(service: ServiceDep) -> Clock:
    """The service's epoch-ms clock (what "now" is for window defaults; tests pin it)."""
    return service.clock


def service_of(request: HTTPConnection) -> Service:
    """The running service of ``request`` (for ASGI code outside FastAPI's dependency injection, such as
    the inference router's endpoints)."""
    service: Service = request.app.state.service
    return service


def gateway_of(service: Service) -> Gateway:
    """The service's gateway; 503 when the service runs without one."""
    if service.gateway is None:
        raise ApiError(503, "the gateway is not enabled in this service")
    return service.gateway


async def get_gateway(service: ServiceDep) -> Gateway:
    """The service's gateway (``gateway_of``) as a dependency."""
    return gateway_of(service)


def queued_of(service: Service) -> QueuedRequests:
    """The service's queued (async) requests; 503 when the service runs without a gateway."""
    if service.queued is None:
        raise ApiError(503, "async requests are not enabled in this service")
    return service.queued


RegistryDep = Annotated[Registry, Depends(get_registry)]
StoreDep = Annotated[Store, Depends(get_store)]
ClockDep = Annotated[Clock, Depends(get_clock)]
GatewayDep = Annotated[Gateway, Depends(get_gateway)]


def parse_authorization(header: str | None) -> str:
    """The key in ``Bearer <key>`` or ``Api-Key <key>``; raises 401 saying which header to send."""
    if not header:
        raise unauthorized(f"missing API key: {_HOW}")
    scheme, _, key = header.strip().partition(" ")
    if scheme.lower() not in ("bearer", "api-key") or not key.strip():
        raise unauthorized(f"malformed Authorization header: {_HOW}")
    return key.strip()


KEY_STATE = "servemetrics_api_key"
"""Where ``api/bodyguard.BodyGuard`` keeps ``(raw key, KeyInfo)`` of a request it checked first."""


def key_of(
    service: Service, client: tuple[str, int] | None, authorization: str | None
) -> tuple[str, KeyInfo]:
    """``(raw key, stored key)`` of an ``Authorization`` header sent from ``client`` (the connection's
    remote ``(host, port)``), counted by the service's ``FailedAuthLimiter``.

    Raises:
        ApiError: 401 when the header is missing or malformed (not counted) or names no stored key
            (counted as a failure of the client); 429 with ``retry_after`` seconds when the client is
            over the failed-authentication limit (before the key is looked up).
    """
    raw, address = parse_authorization(authorization), client_address(client)
    service.auth_limiter.check(address)
    key = service.auth_limiter.counted(address, service.registry.tenancy.authenticate(raw))
    if key is None:
        raise unauthorized(f"invalid API key: {_HOW} with a key of your organization")
    return raw, key


def check_key(service: Service, client: tuple[str, int] | None, authorization: str | None) -> KeyInfo:
    """The stored key of an ``Authorization`` header from ``client`` (``key_of``; same errors)."""
    return key_of(service, client, authorization)[1]


def authenticate(
    request: Request,
    service: ServiceDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> KeyInfo:
    """The caller's key: the one ``BodyGuard`` already checked when it did, else ``check_key`` (401 when
    the header is missing, malformed or names no stored key, 429 when the client address is over the
    failed-authentication limit); then counted against the management API's limit of the key on the
    matched route (``api_limit.ApiRateLimiter.check``: 429 with ``retry_after`` over it), before the
    route does any work. FastAPI caches it: one count per request."""
    checked = getattr(request.state, KEY_STATE, None)
    if checked is not None and authorization is not None and checked[0] == parse_authorization(authorization):
        key: KeyInfo = checked[1]
    else:
        key = check_key(service, request.client, authorization)
    route = request.scope.get("route")  # the matched APIRoute; its path is the whole template, as
    template = getattr(route, "path", None)  # app.py includes every router without a prefix of its own
    if isinstance(template, str):
        service.api_limiter.check(key.id, request.method, template)
    return key


Auth = Annotated[KeyInfo, Depends(authenticate)]


def require_manage(key: Auth) -> KeyInfo:
    """The caller's key if it may manage (PERSONAL or WORKSPACE_MANAGE_ALL), else 403."""
    if not can_manage(key):
        raise forbidden(f"a {key.type} key cannot change models; use a WORKSPACE_MANAGE_ALL or PERSONAL key")
    return key


ManageAuth = Annotated[KeyInfo, Depends(require_manage)]


def resolve_model(registry: Registry, key: KeyInfo, model_id: str) -> ModelInfo:
    """Model ``model_id`` visible to ``key``; 404 if missing, another organization's or out of scope."""
    model = registry.tenancy.model(model_id, key.organization_id)
    if model is None or (key.model_ids is not None and model_id not in key.model_ids):
        raise not_found(f"no model {model_id!r}; list your models with GET /v1/models")
    return model


def _cannot_read(key: KeyInfo, what: str) -> ApiError:
    return forbidden(
        f"a {key.type} key cannot read {what}; use a WORKSPACE_EXPORT_METRICS, "
        "WORKSPACE_MANAGE_ALL or PERSONAL key"
    )


def require_org_metrics_read(key: KeyInfo, what: str = "metrics") -> None:
    """Raise 403 ("a <type> key cannot read ``what``; use …") unless the key's type may read metrics of
    its organization (``registry.keys.METRICS_READ_KEY_TYPES``; a scoped key: of its models).

    Called in the route body (not as a dependency) so that a route's other checks keep their order."""
    if not can_read_some_metrics(key):
        raise _cannot_read(key, what)


def require_metrics_read(registry: RegistryDep, key: Auth, model_id: Annotated[str, Path()]) -> ModelInfo:
    """The path's model if the key may read its metrics and state; 403 for a key type that never may."""
    model = resolve_model(registry, key, model_id)
    if not can_read_metrics(key, model_id):
        raise _cannot_read(key, "metrics")
    return model


def require_manage_model(
    registry: RegistryDep, key: ManageAuth, model_id: Annotated[str, Path()]
) -> ModelInfo:
    """The path's model if the key may manage it (404 before 403: another org's model stays invisible)."""
    return resolve_model(registry, key, model_id)


ReadModel = Annotated[ModelInfo, Depends(require_metrics_read)]
ManageModel = Annotated[ModelInfo, Depends(require_manage_model)]


def resolve_deployment(registry: Registry, model: ModelInfo, deployment_id: str) -> DeploymentInfo:
    """Deployment ``deployment_id`` of the model (``production`` / ``development`` = that environment's
    current deployment); 404 when there is none."""
    wanted = deployment_id
    if deployment_id in DEPLOYMENT_ALIASES:
        env = registry.environments.environment(model.id, deployment_id)
        wanted = env.current_deployment_id if env and env.current_deployment_id else ""
    found = registry.deployments.deployment(model.id, wanted) if wanted else None
    if found is None:
        raise not_found(
            f"model {model.id!r} has no deployment {deployment_id!r}; list them with "
            f"GET /v1/models/{model.id}/deployments"
        )
    return found


def resolve_environment(registry: Registry, model: ModelInfo, env_name: str) -> EnvironmentInfo:
    """Environment ``env_name`` of the model; 404 when there is none."""
    found = registry.environments.environment(model.id, env_name)
    if found is None:
        raise not_found(
            f"model {model.id!r} has no environment {env_name!r}; list them with "
            f"GET /v1/models/{model.id}/environments"
        )
    return found
