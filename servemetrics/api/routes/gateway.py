"""Inference paths of the gateway, its ``/gateway/metrics``, and the cache-invalidating middleware.

Paths (docs/gateway.md): ``POST /v1/models/{model_id}/environments/{env_name}/predict``,
``POST /v1/models/{model_id}/deployment/{deployment_id}/predict`` and
``/v1/models/{model_id}/environments/{env_name}/sync/{path}`` (any method, passed to the replica's
``/{path}``). The same without ``/v1/models/{model_id}`` take the model from a
``Host: model-{model_id}.<anything>`` header. Auth: a key that may invoke the model (``can_invoke``);
another organization's model, or one outside a scoped key, is a 404.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servemetrics.api.deps import parse_authorization
from servemetrics.api.errors import ApiError, forbidden, not_found, unauthorized
from servemetrics.gateway import Gateway
from servemetrics.registry import ModelInfo, can_invoke

router = APIRouter(tags=["inference"])
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
HOST_PREFIX = "model-"


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


async def invoking_model(request: Request, model_id: str | None) -> ModelInfo:
    """The model the caller may invoke: 401 bad key, 404 unknown / another organization's, 403 a key
    type that may not invoke it. ``model_id`` None: taken from the ``Host`` header."""
    view = _gateway(request).view
    key = await view.key(parse_authorization(request.headers.get("authorization")))
    if key is None:
        raise unauthorized(
            "invalid API key: send `Authorization: Api-Key <key>` with a key of your organization"
        )
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


@router.post("/v1/models/{model_id}/environments/{env_name}/predict")
async def predict_environment(request: Request, model_id: str, env_name: str) -> Response:
    """Forward the body to ``POST /predict`` of a replica serving the environment; streams the answer."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_environment(request, model, env_name, "predict")


@router.post("/v1/models/{model_id}/deployment/{deployment_id}/predict")
async def predict_deployment(request: Request, model_id: str, deployment_id: str) -> Response:
    """Forward the body to ``POST /predict`` of a replica of the deployment."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_deployment(request, model, deployment_id, "predict")


@router.api_route("/v1/models/{model_id}/environments/{env_name}/sync/{path:path}", methods=METHODS)
async def sync_environment(request: Request, model_id: str, env_name: str, path: str) -> Response:
    """Pass any method on to the replica's ``/{path}`` (custom routes)."""
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_environment(request, model, env_name, path)


@router.post("/environments/{env_name}/predict")
async def host_predict_environment(request: Request, env_name: str) -> Response:
    """``predict_environment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_environment(request, model, env_name, "predict")


@router.post("/deployment/{deployment_id}/predict")
async def host_predict_deployment(request: Request, deployment_id: str) -> Response:
    """``predict_deployment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_deployment(request, model, deployment_id, "predict")


@router.api_route("/environments/{env_name}/sync/{path:path}", methods=METHODS)
async def host_sync_environment(request: Request, env_name: str, path: str) -> Response:
    """``sync_environment`` with the model in ``Host: model-{model_id}.…``."""
    model = await invoking_model(request, None)
    return await _gateway(request).to_environment(request, model, env_name, path)


@router.get("/gateway/metrics", include_in_schema=False)
async def gateway_metrics(request: Request) -> Response:
    """The gateway's request and replica series (Prometheus text format; no key needed, like /metrics)."""
    return Response(_gateway(request).metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


def is_inference_path(path: str) -> bool:
    """True for the gateway's own paths (they never change the registry)."""
    return path.endswith("/predict") or "/sync/" in path or path.startswith("/gateway/")


Handler = Callable[[Request, str | None, str, str], Awaitable[Response]]


async def _env(request: Request, model_id: str | None, env_name: str, path: str) -> Response:
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_environment(request, model, env_name, path)


async def _dep(request: Request, model_id: str | None, deployment_id: str, path: str) -> Response:
    model = await invoking_model(request, model_id)
    return await _gateway(request).to_deployment(request, model, deployment_id, path)


_SEG = "([^/]+)"
FAST_ROUTES: tuple[tuple[re.Pattern[str], frozenset[str], Handler, bool], ...] = tuple(
    (re.compile(pattern), frozenset(methods), handler, has_model)
    for pattern, methods, handler, has_model in (
        (f"/v1/models/{_SEG}/environments/{_SEG}/predict", ["POST"], _env, True),
        (f"/v1/models/{_SEG}/deployment/{_SEG}/predict", ["POST"], _dep, True),
        (f"/v1/models/{_SEG}/environments/{_SEG}/sync/(.*)", METHODS, _env, True),
        (f"/environments/{_SEG}/predict", ["POST"], _env, False),
        (f"/deployment/{_SEG}/predict", ["POST"], _dep, False),
        (f"/environments/{_SEG}/sync/(.*)", METHODS, _env, False),
    )
)
"""The routes above as (path pattern, methods, handler, model in the path): what ``InvalidateOnChange``
serves directly, without FastAPI's routing, dependency and exception layers (same answers)."""


async def serve_inference(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answer an inference request without the router (False: not one, let the app answer it)."""
    path, method = scope["path"], scope["method"]
    for pattern, methods, handler, has_model in FAST_ROUTES:
        m = pattern.fullmatch(path)
        if m is None or method not in methods:
            continue
        groups = m.groups()
        model_id, target = (groups[0], groups[1]) if has_model else (None, groups[0])
        rest = groups[-1] if len(groups) > (2 if has_model else 1) else "predict"
        request = Request(scope, receive)
        try:
            response = await handler(request, model_id, target, rest)
        except ApiError as exc:
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
            body: dict[str, object] = {"error": exc.message}
            if exc.retry_after is not None:
                body["retry_after"] = exc.retry_after
            response = JSONResponse(body, status_code=exc.status, headers=headers)
        await response(scope, receive, send)
        return True
    return False


class InvalidateOnChange:
    """ASGI middleware: a successful change under ``/v1/`` (any method but GET / HEAD / OPTIONS, not
    an inference path) drops the gateway's cached registry state as its response starts, so the next
    request routes by the new state (promotions, pause, cancel, replicas, keys).

    It also serves the inference paths itself (``serve_inference``): the hot path skips the router."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and await serve_inference(scope, receive, send):
            return
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or not path.startswith("/v1/")
            or is_inference_path(path)
        ):
            await self.app(scope, receive, send)
            return

        async def send_and_invalidate(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                gateway = getattr(scope["app"].state, "gateway", None)
                if gateway is not None:
                    gateway.invalidate()
            await send(message)

        await self.app(scope, receive, send_and_invalidate)
