"""Relaying a replica's response to the client without buffering, and timing it.

``Relay`` is a ``StreamingResponse`` over the replica's raw body chunks (chunked or
``text/event-stream`` alike): each chunk is sent as it arrives. Time to first byte is taken when the
first body chunk has been handed to the server, end-to-end when the last has; both in seconds from
the request's arrival. ``done`` runs exactly once, however the response ends (finished, client gone,
replica error).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable

import httpx
from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "authorization", "content-length"}


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's headers to send to the replica: hop-by-hop, ``Host``, ``Authorization`` (the
    caller's API key stays with the gateway) and ``Content-Length`` (recomputed) are dropped."""
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _NOT_FORWARDED]


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The replica's headers to send to the client (hop-by-hop dropped; the body is relayed raw, so
    ``Content-Length`` and ``Content-Encoding`` stay true)."""
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in HOP_BY_HOP]


def error(status: int, message: str, retry_after_s: int | None = None) -> JSONResponse:
    """``{"error": message}`` (plus ``retry_after`` and a ``Retry-After`` header when given)."""
    if retry_after_s is None:
        return JSONResponse({"error": message}, status_code=status)
    return JSONResponse(
        {"error": message, "retry_after": retry_after_s},
        status_code=status,
        headers={"Retry-After": str(retry_after_s)},
    )


class Relay(StreamingResponse):
    """Stream ``upstream``'s body to the client; then call ``done(relay)`` once.

    Attributes set while streaming: ``first_byte_s`` and ``end_to_end_s`` (seconds since
    ``arrived``, a ``time.perf_counter()`` reading) and ``sent_bytes``.
    """

    def __init__(
        self,
        upstream: httpx.Response,
        arrived: float,
        done: Callable[[Relay], None],
        extra_headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(self._chunks(), status_code=upstream.status_code)
        self.raw_headers = [*response_headers(upstream.headers.raw), *extra_headers]
        self.upstream = upstream
        self.arrived = arrived
        self.first_byte_s: float | None = None
        self.end_to_end_s: float | None = None
        self.sent_bytes = 0
        self._done = done

    async def _chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self.upstream.aiter_raw():
            if not chunk:
                continue
            yield chunk
            self.sent_bytes += len(chunk)
            if self.first_byte_s is None:
                self.first_byte_s = time.perf_counter() - self.arrived
        self.end_to_end_s = time.perf_counter() - self.arrived

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self.upstream.aclose()
            finally:
                if self.end_to_end_s is None:
                    self.end_to_end_s = time.perf_counter() - self.arrived
                if self.first_byte_s is None:
                    self.first_byte_s = self.end_to_end_s
                self._done(self)
