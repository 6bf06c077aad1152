"""The API's errors, rendered in one place as the spec's ``{"error": "..."}`` (``error_response``).

``install_error_handlers`` maps ``ApiError`` (any status, ``retry_after`` for 429), request validation
(400), the registry's ``NotFound`` (404), ``Conflict`` (409) and ``InvalidValue`` (400), the query's
``WindowError``, ``UnknownMetricError``, ``SplitError`` and ``NotHistogramError`` (400), the network
policy's ``Refused`` (400) and ``StoreUnavailableError`` (503), so routes raise and never catch to translate.

Status codes (DESIGN "Errors, auth, tenancy"): 400 bad input, 401 no or bad key, 403 a key that may not
do this, 404 no such model / deployment / environment (including another organization's), 409 conflict,
429 rate limited (body also carries ``retry_after`` in seconds), 503 the sample store's engine is down or
answers nonsense (``StoreUnavailableError``). Bad input never gives a 5xx.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from servemetrics.gateway.errors import error_response
from servemetrics.netpolicy import Refused
from servemetrics.query.bounds import NotHistogramError
from servemetrics.query.errors import SplitError, UnknownMetricError, WindowError
from servemetrics.registry import Conflict, InvalidValue, NotFound
from servemetrics.store.errors import StoreUnavailableError


class ApiError(Exception):
    """An error to return to the client: ``status`` code and a message saying what to fix."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def bad_request(message: str) -> ApiError:
    """400 with ``message``."""
    return ApiError(400, message)


def not_found(message: str) -> ApiError:
    """404 with ``message``."""
    return ApiError(404, message)


def unauthorized(message: str) -> ApiError:
    """401 with ``message``."""
    return ApiError(401, message)


def forbidden(message: str) -> ApiError:
    """403 with ``message``."""
    return ApiError(403, message)


_PLAIN = {
    "model_attributes_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "extra_forbidden": "unknown field; remove it",
}
"""Plainer words for pydantic error types whose own message does not say what to send."""


def _body_fields(request: Request | None) -> str:
    """``name (required), promotion_settings, …``: the JSON fields the matched route's body takes."""
    route = request.scope.get("route") if request is not None else None
    field = getattr(route, "body_field", None)
    info = getattr(field, "field_info", None)
    fields = getattr(getattr(info, "annotation", None), "model_fields", None)
    if not fields:
        return "the fields this endpoint takes"
    return "the fields " + ", ".join(
        f"{name} (required)" if info.is_required() else name for name, info in fields.items()
    )


def _sent_json(request: Request | None) -> bool:
    content_type = request.headers.get("content-type", "") if request is not None else "application/json"
    return "json" in content_type.lower()


def _describe_validation(exc: RequestValidationError, request: Request | None = None) -> str:
    errors = exc.errors()
    for err in errors:
        if err.get("type") == "json_invalid":
            detail = (err.get("ctx") or {}).get("error") or err.get("msg", "JSON decode error")
            loc = tuple(err.get("loc", ()))
            at = f" at character {loc[-1]}" if len(loc) == 2 and isinstance(loc[-1], int) else ""
            return f"the request body is not valid JSON: {detail}{at}; send a JSON object"
        if err.get("type") == "missing" and tuple(err.get("loc", ())) == ("body",):
            return f"the request body is missing; send a JSON object with {_body_fields(request)}"
        if tuple(err.get("loc", ())) == ("body",) and not _sent_json(request):
            return (
                "the request body must be JSON: send it with the header Content-Type: application/json "
                f"(curl: -H 'Content-Type: application/json'), a JSON object with {_body_fields(request)}"
            )
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body", "path"))
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        message = _PLAIN.get(str(err.get("type")), message)
        parts.append(f"{where or 'request'}: {message}")
    return "invalid request: " + "; ".join(parts)


STATUS_OF: dict[type[Exception], int] = {
    NotFound: 404,
    Conflict: 409,
    InvalidValue: 400,
    WindowError: 400,
    UnknownMetricError: 400,
    SplitError: 400,
    NotHistogramError: 400,
    Refused: 400,
}
"""Exceptions of the layers below rendered as ``{"error": str(exc)}`` with this status."""


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.retry_after)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(400, _describe_validation(exc, request))


async def _store_down(_: Request, exc: Exception) -> JSONResponse:
    response = error_response(503, str(exc))
    response.headers["Retry-After"] = "5"
    return response


async def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, str(exc.detail))


async def _mapped(_: Request, exc: Exception) -> JSONResponse:
    status = next(STATUS_OF[c] for c in type(exc).__mro__ if c in STATUS_OF)
    return error_response(status, str(exc))


def install_error_handlers(app: FastAPI) -> None:
    """Make every error of ``app`` a JSON ``{"error": ...}`` body with the right status code."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StoreUnavailableError, _store_down)
    app.add_exception_handler(StarletteHTTPException, _http)
    for error in STATUS_OF:
        app.add_exception_handler(error, _mapped)
