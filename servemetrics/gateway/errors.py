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
