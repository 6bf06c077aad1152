"""The spec's error body, ``{"error": message}`` (plus ``retry_after`` and a ``Retry-After`` header).

The gateway's own answers (404, 429, 502, 503) and the inference router's rendering of ``ApiError`` use
this one function; ``api/errors.py`` renders the same shape for the rest of the API (it may import it
from here: the gateway never imports ``api``).
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
