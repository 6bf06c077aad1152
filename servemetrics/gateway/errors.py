"""The spec's error body, ``{"error": message}`` (plus ``retry_after`` and a ``Retry-After`` header).

The one renderer of that body: the gateway's own answers (404, 429, 502, 503), the inference router's
rendering of ``ApiError`` and ``api/errors.py``'s exception handlers for the rest of the API all use it
(it lives here because the gateway never imports ``api``).
"""

from __future__ import annotations

from starlette.responses import JSONResponse


def error_response(status: int, message: str, retry_after_s: int | None = None) -> JSONResponse:
    """``{"error": message}`` with ``status``; with ``retry_after_s`` (whole seconds) also
    ``"retry_after": retry_after_s`` in the body and a ``Retry-After`` header."""
    if retry_after_s is None:
        return JSONResponse({"error": message}, status_code=status)
    return JSONResponse(
        {"error": message, "retry_after": retry_after_s},
        status_code=status,
        headers={"Retry-After": str(retry_after_s)},
    )


def replica_failed(replica: str, deployment_id: str, exc: Exception, unreachable: bool) -> JSONResponse:
    """The 502 of a replica the gateway could not use: ``unreachable`` (the network policy or the
    connection blocked it, ``proxy.Blocked``) or failed mid-request (``proxy.UpstreamError``). The HTTP
    and the WebSocket paths answer with it alike."""
    what = "is not reachable" if unreachable else "failed"
    return error_response(502, f"replica {replica!r} of {deployment_id!r} {what}: {exc}")


def no_active_replica(deployment_id: str) -> JSONResponse:
    """The 503 (``Retry-After: 1``) when every replica of ``deployment_id`` was tried or none is active."""
    return error_response(503, f"deployment {deployment_id!r} has no active replica", 1)
