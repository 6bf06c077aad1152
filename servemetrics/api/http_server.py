"""The HTTP server's connection limits (config ``server``): uvicorn's options and a header read timeout.

uvicorn closes a kept-alive connection that stays idle after a response (``timeout_keep_alive``), but
has no timeout before a request's headers are complete: a connection that sends nothing, or sends its
headers a byte at a time (slowloris), stayed open for ever, and a thousand of them held a thousand
sockets. ``HeaderTimeout`` protocols close a connection whose request headers are not complete within
``server.header_timeout`` of the connection opening (or of the first byte of its next request);
``server.limit_concurrency`` caps connections and requests (uvicorn answers 503 past it); ``cli.serve``
passes them to uvicorn.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderTimeout(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers: ``header_timeout_s``
    seconds (set on a subclass, ``header_timeout_protocol``) from the connection opening or the first
    byte of a later request to the end of its headers; past it the connection is closed."""

    header_timeout_s = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the deadline of the first request's headers."""
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        """A request starts (the first byte of a request after a kept-alive one): its headers' deadline."""
        super().on_message_begin()
        if self._header_deadline is None:
            self._arm()

    def on_headers_complete(self) -> None:
        """The headers arrived in time: no deadline until the next request starts."""
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def header_timeout_protocol(timeout_s: float) -> type[HeaderTimeout]:
    """A ``HeaderTimeout`` protocol class whose deadline is ``timeout_s`` seconds (> 0)."""
    return type("HeaderTimeout", (HeaderTimeout,), {"header_timeout_s": float(timeout_s)})
