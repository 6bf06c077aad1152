"""Queued (async) inference paths of the gateway (docs/gateway.md "Async requests").

- ``POST /v1/models/{model_id}/environments/{env_name}/async_predict`` (and
  ``/environments/{env_name}/async_predict`` with ``Host: model-{model_id}.…``): body
  ``{"model_input": <any JSON>, "webhook_endpoint": "http(s)://…", "max_time_in_queue_seconds": int}``
  -> ``201 {"request_id"}``; the request is stored QUEUED and run when a replica is free.
- ``GET /v1/models/{model_id}/async_requests/{request_id}``: where the request is.
- ``DELETE`` the same path: cancel a QUEUED request (it is removed; 409 once it has started).

Auth as for ``predict``: a key that may invoke the model; another organization's request is a 404.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from servemetrics.api.deps import queued_of, service_of
from servemetrics.api.errors import ApiError, bad_request, not_found
from servemetrics.api.routes.gateway import invoking_model
from servemetrics.gateway.queued import QueuedOptions, QueuedRequests, status_view

router = APIRouter(tags=["inference"])
FIELDS = ("model_input", "webhook_endpoint", "max_time_in_queue_seconds")


def _queued(request: Request) -> QueuedRequests:
    return queued_of(service_of(request))


def parse_body(raw: bytes, options: QueuedOptions) -> tuple[str, str | None, int]:
    """(model_input as JSON text, webhook endpoint, max seconds in the queue); 400 naming what to fix."""
    if len(raw) > options.input_limit_bytes:
        raise bad_request(
            f"the body is {len(raw)} bytes; async requests take at most {options.input_limit_bytes}"
        )
    try:
        body: Any = json.loads(raw)
    except ValueError:
        raise bad_request(
            'the body is not JSON: send {"model_input": ..., "webhook_endpoint": "https://...", '
            '"max_time_in_queue_seconds": 600}'
        ) from None
    if not isinstance(body, dict):
        raise bad_request('the body must be a JSON object such as {"model_input": {...}}')
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise bad_request(f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
    if "model_input" not in body:
        raise bad_request('"model_input" is missing: it is the JSON sent to the model\'s /predict')
    webhook = body.get("webhook_endpoint")
    if webhook is not None:
        parts = urlsplit(webhook) if isinstance(webhook, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise bad_request('"webhook_endpoint" must be an http:// or https:// URL with a host')
    max_s = body.get("max_time_in_queue_seconds", options.default_max_time_in_queue_s)
    limit = options.max_time_in_queue_limit_s
    if isinstance(max_s, bool) or not isinstance(max_s, int) or not 1 <= max_s <= limit:
        raise bad_request(f'"max_time_in_queue_seconds" must be a whole number of seconds from 1 to {limit}')
    return json.dumps(body["model_input"]), webhook, max_s


async def _submit(request: Request, model_id: str | None, env_name: str) -> JSONResponse:
    model = await invoking_model(request, model_id)
    queued = _queued(request)
    model_input, webhook, max_s = parse_body(await request.body(), queued.options)
    egress = queued.gateway.egress
    if webhook is not None and egress is not None:
        await egress.webhooks.check_url_async(webhook, "webhook_endpoint")  # Refused: a 400
    view = queued.gateway.view
    if await view.serving(model.id, env_name) is None:
        raise not_found(f"model {model.id!r} has no environment {env_name!r}")
    request_id = await asyncio.to_thread(
        queued.store.create,
        model.organization_id,
        model.id,
        env_name,
        model_input,
        webhook,
        max_s,
        view.clock_ms(),
    )
    queued.wake()
    return JSONResponse({"request_id": request_id}, status_code=201)


@router.post("/v1/models/{model_id}/environments/{env_name}/async_predict", status_code=201)
async def async_predict_environment(request: Request, model_id: str, env_name: str) -> JSONResponse:
    """Queue an async request for the environment; returns its ``request_id``."""
    return await _submit(request, model_id, env_name)


@router.post("/environments/{env_name}/async_predict", status_code=201)
async def host_async_predict_environment(request: Request, env_name: str) -> JSONResponse:
    """``async_predict_environment`` with the model in ``Host: model-{model_id}.…``."""
    return await _submit(request, None, env_name)


async def _owned(request: Request, model_id: str, request_id: str) -> tuple[QueuedRequests, Any]:
    model = await invoking_model(request, model_id)
    queued = _queued(request)
    found = await asyncio.to_thread(queued.store.get, request_id, model.id, model.organization_id)
    if found is None:
        raise not_found(f"model {model_id!r} has no async request {request_id!r}")
    return queued, found


@router.get("/v1/models/{model_id}/async_requests/{request_id}")
async def async_request_status(request: Request, model_id: str, request_id: str) -> JSONResponse:
    """Where the async request is: status, times, attempts, webhook delivery."""
    _, found = await _owned(request, model_id, request_id)
    return JSONResponse(status_view(found))


@router.delete("/v1/models/{model_id}/async_requests/{request_id}")
async def cancel_async_request(request: Request, model_id: str, request_id: str) -> JSONResponse:
    """Cancel a QUEUED request (removed: its status is then a 404); 409 once it has started."""
    queued, found = await _owned(request, model_id, request_id)
    if not await asyncio.to_thread(queued.store.cancel, request_id):
        current = await asyncio.to_thread(queued.store.get, request_id)
        status = current.status if current is not None else found.status
        raise ApiError(409, f"the request is {status}: only a QUEUED request can be cancelled")
    return JSONResponse({"request_id": request_id, "canceled": True})
