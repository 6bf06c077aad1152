"""Inference paths of the gateway, its keyed ``/gateway/metrics`` and ``InferenceRouter`` (answers them).

Paths (docs/gateway.md): ``POST /v1/models/{model_id}/environments/{env_name}/predict``,
``POST /v1/models/{model_id}/deployment/{deployment_id}/predict`` and
``/v1/models/{model_id}/environments/{env_name}/sync/{path}`` (any method, passed to the replica's
``/{path}``); WebSocket upgrades at ``…/environments/{env_name}/websocket``,
``…/deployment/{deployment_id}/websocket`` and ``…/development/websocket`` (``WEBSOCKET_ROUTES``,
relayed by ``gateway.websocket``). The same without ``/v1/models/{model_id}`` take the model from a
``Host: model-{model_id}.<anything>`` header. ``POST /v1/chat/completions`` and
``POST /v1/completions`` are the Model API calls (``model_api_call``; docs/model-apis.md). Auth: a key
that may invoke the model (``can_invoke``); another organization's model, or one outside a scoped key,
is a 404.

``FAST_ROUTES`` is the one table of these paths. ``InferenceRouter`` (an ASGI middleware mounted
outside the FastAPI app) answers them from it, before FastAPI's routing, dependency and exception
layers (the hot path); the FastAPI routes made from the same table (``router``) put them in the
OpenAPI document. Any other path or method goes on to the FastAPI app.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import HTTPConnection
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from servemetrics.api.auth_limit import client_address
from servemetrics.api.deps import (
    Auth,
    GatewayDep,
    RegistryDep,
    gateway_of,
    parse_authorization,
    require_org_metrics_read,
    service_of,
)
from servemetrics.api.errors import ApiError, bad_request, forbidden, not_found, unauthorized
from servemetrics.gateway import Gateway
from servemetrics.gateway import websocket as websockets
from servemetrics.gateway.errors import error_response
from servemetrics.gateway.model_api_calls import CallError, ModelApiGateway, parse_call
from servemetrics.gateway.proxy import Relay
from servemetrics.registry import KeyInfo, ModelInfo, can_invoke, team_bound
from servemetrics.registry.model_apis import ModelApiInfo

router = APIRouter(tags=["inference"])
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
HOST_PREFIX = "model-"


def _gateway(request: HTTPConnection) -> Gateway:
    """The gateway, for the endpoints ``InferenceRouter`` calls outside dependency injection."""
    return gateway_of(service_of(request))


async def invoking_key(request: HTTPConnection) -> KeyInfo:
    """The caller's stored key: 401 missing or bad, 429 a client address over the failed-authentication
    limit (``FailedAuthLimiter``, as every other path)."""
    view = _gateway(request).view
    limiter, address = service_of(request).auth_limiter, client_address(request.client)
    raw = parse_authorization(request.headers.get("authorization"))
    limiter.check(address)
    key = limiter.counted(address, await view.key(raw))
    if key is None:
        raise unauthorized(
            "invalid API key: send `Authorization: Api-Key <key>` with a key of your organization"
        )
    return key


def count_refused(request: HTTPConnection, path: str, status: int) -> None:
    """Count a call to the gateway's ``path`` refused with ``status`` before it reached a model or Model
    API (``servemetrics_gateway_refused_requests_total``; ``SelfMetrics.gateway_refused``)."""
    route = "model_api" if path.endswith("/completions") else "model"
    service_of(request).metrics.gateway_refused.labels(route, str(status)).inc()


async def invoking_model(request: HTTPConnection, model_id: str | None) -> ModelInfo:
    """The model the caller may invoke: 401 bad key, 429 a client address over the failed-authentication
    limit (``invoking_key``), 404 unknown / another organization's, 403 a key type that may not invoke
    it (each counted by ``count_refused``). ``model_id`` None: taken from the ``Host`` header."""
    try:
        return await _invoking_model(request, model_id)
    except ApiError as exc:
        count_refused(request, request.url.path, exc.status)
        raise


async def _invoking_model(request: HTTPConnection, model_id: str | None) -> ModelInfo:
    view = _gateway(request).view
    key = await invoking_key(request)
    if model_id is None:
        model_id = model_from_host(request.headers.get("host", ""))
    model = await view.model(model_id, key.organization_id)
    if model is None or (key.model_ids is not None and model_id not in key.model_ids):
        raise not_found(f"no model {model_id!r}; list your models with GET /v1/models")
    if not can_invoke(key, model_id):
        raise forbidden(
            f"a {key.type} key cannot invoke models; use a WORKSPACE_INVOKE key (scoped to this model), "
            "a WORKSPACE_MANAGE_ALL or a PERSONAL key"
        )
    return model


def model_from_host(host: str) -> str:
    """``abc`` from ``model-abc.example.com[:port]``; 404 when the host has no such form."""
    label = host.split(".", 1)[0]
    if not label.startswith(HOST_PREFIX) or "." not in host or len(label) == len(HOST_PREFIX):
        raise not_found(
            "no model in the path or the Host header: call /v1/models/{model_id}/... or send "
            "`Host: model-{model_id}.<your domain>`"
        )
    return label[len(HOST_PREFIX) :]


async def predict_environment(request: Request, model_id: str, env_name: str) -> Response | Relay:
    """Forward the body to ``POST /predict`` of a replica serving the environment; streams the answer."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_environment(request, model, env_name, "predict")


async def predict_deployment(request: Request, model_id: str, deployment_id: str) -> Response | Relay:
    """Forward the body to ``POST /predict`` of a replica of the deployment."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_deployment(request, model, deployment_id, "predict")


async def sync_environment(request: Request, model_id: str, env_name: str, path: str) -> Response | Relay:
    """Pass any method on to the replica's ``/{path}`` (custom routes)."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_environment(request, model, env_name, path)


async def host_predict_environment(request: Request, env_name: str) -> Response | Relay:
    """``predict_environment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_environment(request, model, env_name, "predict")


async def host_predict_deployment(request: Request, deployment_id: str) -> Response | Relay:
    """``predict_deployment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_deployment(request, model, deployment_id, "predict")


async def host_sync_environment(request: Request, env_name: str, path: str) -> Response | Relay:
    """``sync_environment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_environment(request, model, env_name, path)


def _model_api_gateway(request: HTTPConnection) -> ModelApiGateway:
    found = service_of(request).model_api_gateway
    if found is None:
        raise ApiError(503, "the gateway is not enabled in this service")
    return found


async def model_api_call(request: Request, path: str) -> Response | Relay:
    """A Model API call (docs/model-apis.md "Serving"): 401 / 429 as ``invoking_key``; 400 a body that is
    not an OpenAI request with ``model``; 404 no such Model API in the key's organization (or its model
    outside a scoped key); 403 a key type that may not invoke (each counted by ``count_refused``; a 413
    for a body over its limit is counted by ``bodyguard``); then ``ModelApiGateway.serve``."""
    arrived = time.perf_counter()
    try:
        key, api, body, stream = await _admitted_call(request)
    except ApiError as exc:
        count_refused(request, request.url.path, exc.status)
        raise
    return await _model_api_gateway(request).serve(request, key, api, body, stream, path, arrived)


async def _admitted_call(request: Request) -> tuple[KeyInfo, ModelApiInfo, bytes, bool]:
    """The checks of ``model_api_call``: (key, Model API, body, whether a stream is asked for)."""
    key = await invoking_key(request)
    body = await request.body()
    try:
        call = parse_call(body)
    except CallError as exc:
        raise bad_request(str(exc)) from None
    serving = _model_api_gateway(request)
    api = await serving.model_api(key.organization_id, call.model)
    if api is None or (key.model_ids is not None and api.model_id not in key.model_ids):
        raise not_found(f"no Model API {call.model!r}; list your organization's with GET /v1/model_apis")
    if not can_invoke(key, api.model_id):
        raise forbidden(
            f"a {key.type} key cannot call Model APIs; use a WORKSPACE_INVOKE, WORKSPACE_MANAGE_ALL or "
            "PERSONAL key"
        )
    return key, api, body, call.stream


async def chat_completions(request: Request) -> Response | Relay:
    """OpenAI ``POST /v1/chat/completions`` to the Model API named by the body's ``model``."""
    return await model_api_call(request, "v1/chat/completions")


async def completions(request: Request) -> Response | Relay:
    """OpenAI ``POST /v1/completions`` to the Model API named by the body's ``model``."""
    return await model_api_call(request, "v1/completions")


async def websocket_environment(websocket: WebSocket, model_id: str | None, env_name: str) -> None:
    """Relay the WebSocket to a replica (``/websocket``) of a deployment serving the environment."""
    model = await invoking_model(websocket, model_id)
    arrived, gateway = time.perf_counter(), _gateway(websocket)
    target = await gateway.environment_target(model, env_name)
    await websockets.serve(gateway, websocket, model, target, arrived)


async def websocket_deployment(websocket: WebSocket, model_id: str | None, deployment_id: str) -> None:
    """Relay the WebSocket to a replica of the deployment (``development``: that environment's)."""
    model = await invoking_model(websocket, model_id)
    arrived, gateway = time.perf_counter(), _gateway(websocket)
    target = await gateway.deployment_target(model, deployment_id)
    await websockets.serve(gateway, websocket, model, target, arrived)


async def websocket_development(websocket: WebSocket, model_id: str | None = None) -> None:
    """``websocket_deployment`` to the ``development`` environment's deployment."""
    await websocket_deployment(websocket, model_id, "development")


async def host_websocket_environment(websocket: WebSocket, env_name: str) -> None:
    """``websocket_environment`` with the model in ``Host: model-{model_id}.…``."""
    await websocket_environment(websocket, None, env_name)


async def host_websocket_deployment(websocket: WebSocket, deployment_id: str) -> None:
    """``websocket_deployment`` with the model in ``Host: model-{model_id}.…``."""
    await websocket_deployment(websocket, None, deployment_id)


Endpoint = Callable[..., Awaitable[Any]]
"""``endpoint(request, **path_params)``: the gateway's answer (a response, called as an ASGI app)."""


@dataclass(frozen=True)
class InferenceRoute:
    """One inference path: its template (FastAPI / starlette syntax), methods and endpoint."""

    path: str
    methods: tuple[str, ...]
    endpoint: Endpoint
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", compile_path(self.path)[0])


_POST, _ANY = ("POST",), tuple(METHODS)
FAST_ROUTES: tuple[InferenceRoute, ...] = tuple(
    InferenceRoute(path, methods, endpoint)
    for path, methods, endpoint in (
        ("/v1/models/{model_id}/environments/{env_name}/predict", _POST, predict_environment),
        ("/v1/models/{model_id}/deployment/{deployment_id}/predict", _POST, predict_deployment),
        ("/v1/models/{model_id}/environments/{env_name}/sync/{path:path}", _ANY, sync_environment),
        ("/environments/{env_name}/predict", _POST, host_predict_environment),
        ("/deployment/{deployment_id}/predict", _POST, host_predict_deployment),
        ("/environments/{env_name}/sync/{path:path}", _ANY, host_sync_environment),
        ("/v1/chat/completions", _POST, chat_completions),
        ("/v1/completions", _POST, completions),
    )
)
"""The inference paths, in matching order: ``InferenceRouter`` answers them, ``router`` documents them."""

WEBSOCKET_ROUTES: tuple[InferenceRoute, ...] = tuple(
    InferenceRoute(path, (), endpoint)
    for path, endpoint in (
        ("/v1/models/{model_id}/environments/{env_name}/websocket", websocket_environment),
        ("/v1/models/{model_id}/deployment/{deployment_id}/websocket", websocket_deployment),
        ("/v1/models/{model_id}/development/websocket", websocket_development),
        ("/environments/{env_name}/websocket", host_websocket_environment),
        ("/deployment/{deployment_id}/websocket", host_websocket_deployment),
        ("/development/websocket", websocket_development),
    )
)
"""The WebSocket paths (the platform's, docs/gateway.md "WebSockets"): ``InferenceRouter`` relays
WebSocket upgrades to them (OpenAPI has no WebSockets: not documented there)."""

_RELAYED: dict[int | str, dict[str, Any]] = {
    200: {"description": "The replica's answer: its status, headers and body, as it sent them"}
}
"""The documented answer of an inference path: whatever the replica sent, of any content type (the
FastAPI default would claim ``application/json``; schemathesis' ``content_type_conformance`` holds the
document to what is served, tests/reliability/test_schemathesis.py)."""

for _route in FAST_ROUTES:
    for _method in _route.methods:  # one route per method: each gets its own operationId
        router.add_api_route(
            _route.path,
            _route.endpoint,
            methods=[_method],
            response_model=None,
            response_class=Response,
            responses=_RELAYED,
        )


@router.get("/gateway/metrics", include_in_schema=False)
def gateway_metrics(registry: RegistryDep, gateway: GatewayDep, key: Auth) -> Response:
    """The gateway's request and replica series of the key's organization's models (a scoped key: of its
    ``model_ids``), Prometheus text format; 401 without a key, 403 for a key that may not read metrics
    (``deps.require_org_metrics_read``). The service itself reads them in-process, not here."""
    require_org_metrics_read(key, "the gateway's metrics")
    models = frozenset(m.id for m in registry.tenancy.list_models(key.organization_id))
    if key.model_ids is not None:
        models &= key.model_ids
    body = gateway.metrics.exposition_of(models, team_bound(key))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def is_inference_path(path: str) -> bool:
    """True for paths the gateway itself serves (``…/predict``, ``…/sync/…``, ``…/websocket``,
    ``/gateway/…``, the OpenAI ``…/completions``): only those can be one of ``FAST_ROUTES`` or
    ``WEBSOCKET_ROUTES``."""
    return (
        path.endswith(("/predict", "/websocket", "/completions"))
        or "/sync/" in path
        or path.startswith("/gateway/")
    )


def _route_path(scope: Scope) -> str:
    """The path the app's routes see: ``scope["path"]`` less a ``root_path`` it starts with (as
    starlette's router does), so a mounted app's inference paths are answered here too."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path


class InferenceRouter:
    """ASGI middleware: answers the requests that match ``FAST_ROUTES`` (path and method) and the
    WebSocket upgrades that match ``WEBSOCKET_ROUTES`` itself, with an ``ApiError`` rendered as
    ``{"error": …}`` (for an upgrade: its HTTP answer); passes every other request to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_inference_path(path := _route_path(scope)):
            method = scope["method"]
            for route in FAST_ROUTES:
                m = route.regex.match(path)
                if m is not None and method in route.methods:
                    await self._answer(route, m.groupdict(), scope, receive, send)
                    return
        elif scope["type"] == "websocket" and is_inference_path(path := _route_path(scope)):
            for route in WEBSOCKET_ROUTES:
                m = route.regex.match(path)
                if m is not None:
                    await self._relay(route, m.groupdict(), WebSocket(scope, receive, send))
                    return
        await self.app(scope, receive, send)

    @staticmethod
    async def _answer(
        route: InferenceRoute, params: dict[str, str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        request = Request(scope, receive)
        try:
            response = await route.endpoint(request, **params)
        except ApiError as exc:
            response = error_response(exc.status, exc.message, exc.retry_after)
        await response(scope, receive, send)

    @staticmethod
    async def _relay(route: InferenceRoute, params: dict[str, str], websocket: WebSocket) -> None:
        try:
            await route.endpoint(websocket, **params)
        except ApiError as exc:
            await websockets.deny(websocket, error_response(exc.status, exc.message, exc.retry_after))
