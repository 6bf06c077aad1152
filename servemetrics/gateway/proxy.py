"""Sending a request to a replica (``Upstream``), relaying its answer without buffering, timing it.

``Upstream`` is the gateway's own HTTP/1.1 client: keep-alive connections pooled per replica, the
request written in one go, the answer's body read by its framing (length, chunked or to the close).
It replaces ``httpx`` on the request path, whose connection pool cost about 1 ms of CPU a request and
grew with the number of pooled connections (docs/gateway.md, Performance).

``Relay`` is a ``StreamingResponse`` over the replica's raw body chunks (chunked or
``text/event-stream`` alike): each chunk is sent as it arrives. Time to first byte is taken when the
first body chunk has been handed to the server, end-to-end when the last has; both in seconds from
the request's arrival. ``done`` runs exactly once, however the response ends (finished, client gone,
replica error).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

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
        upstream: UpstreamResponse,
        arrived: float,
        done: Callable[[Relay], None],
        extra_headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(self._chunks(), status_code=upstream.status_code)
        self.raw_headers = [*response_headers(upstream.headers), *extra_headers]
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
        """Stream the body; stop at once when the client disconnects (as ``StreamingResponse`` does,
        with one plain task watching ``receive`` instead of a task group per response)."""
        task = asyncio.current_task()
        assert task is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            task.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async for chunk in self._chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # the client left: the relay ends here, like a finished one
        finally:
            watcher.cancel()
            try:
                await self.upstream.aclose()
            finally:
                if self.end_to_end_s is None:
                    self.end_to_end_s = time.perf_counter() - self.arrived
                if self.first_byte_s is None:
                    self.first_byte_s = self.end_to_end_s
                self._done(self)


# -- the upstream client ---------------------------------------------------------------------------


class UpstreamError(Exception):
    """The replica failed after the connection was made (or the connection timed out): a 502."""


class Refused(UpstreamError):
    """The replica refused the connection: the request never reached it (try another replica)."""


_NO_BODY_STATUS = frozenset({204, 304})


class _Conn:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        self.writer.close()


class UpstreamResponse:
    """A replica's answer: ``status_code``, raw ``headers`` and the body to stream once with
    ``aiter_raw()`` (the bytes as sent, less the chunked framing); ``aclose()`` hands the connection
    back to the pool when the body was read to its end, else closes it."""

    def __init__(
        self, pool: Upstream, key: str, conn: _Conn, status: int, headers: list[tuple[bytes, bytes]],
        framing: str, length: int, keep_alive: bool, read_timeout_s: float,
    ) -> None:  # fmt: skip
        self._pool, self._key, self._conn = pool, key, conn
        self.status_code = status
        self.headers = headers
        self._framing = framing  # "none", "length", "chunked" or "close"
        self._length = length
        self._keep_alive = keep_alive
        self._timeout = read_timeout_s
        self._complete = framing == "none"

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        reader, timeout = self._conn.reader, self._timeout
        try:
            if self._framing == "length":
                left = self._length
                while left > 0:
                    async with asyncio.timeout(timeout):
                        data = await reader.read(min(left, 65536))
                    if not data:
                        raise UpstreamError("the replica closed the connection inside the body")
                    left -= len(data)
                    yield data
            elif self._framing == "chunked":
                while True:
                    async with asyncio.timeout(timeout):
                        line = await reader.readuntil(b"\r\n")
                        size = int(line.split(b";", 1)[0].strip(), 16)
                        if size == 0:
                            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                                pass  # trailers: dropped
                            break
                        data = await reader.readexactly(size + 2)
                    yield data[:-2]
            elif self._framing == "close":
                while True:
                    async with asyncio.timeout(timeout):
                        data = await reader.read(65536)
                    if not data:
                        break
                    yield data
        except TimeoutError as exc:  # before OSError, its base class
            raise UpstreamError(f"no body bytes for {timeout:g} s") from exc
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise UpstreamError(f"reading the body failed: {exc!r}") from exc
        self._complete = True

    async def aclose(self) -> None:
        """Give the connection back (a whole body was read and keep-alive holds), else close it."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        if self._complete and self._keep_alive and self._framing != "close":
            self._pool.release(self._key, conn)
        else:
            conn.close()


class Upstream:
    """HTTP/1.1 keep-alive connections to the replicas, pooled per replica (base URL).

    Lean on purpose: one write per request, headers parsed once, no cookies, redirects or
    decompression (the body is relayed as the replica sent it). ``connect_timeout_s`` bounds a new
    connection, ``read_timeout_s`` each wait for the replica's bytes.
    """

    def __init__(self, connect_timeout_s: float, read_timeout_s: float, max_idle: int = 512) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_idle = max_idle
        self._idle: dict[str, list[_Conn]] = {}
        self._addr: dict[str, tuple[str, int, bytes]] = {}

    def release(self, key: str, conn: _Conn) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < self.max_idle and not conn.reader.at_eof():
            conn.reused = True
            idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    def _address(self, base_url: str) -> tuple[str, int, bytes]:
        addr = self._addr.get(base_url)
        if addr is None:
            parts = urlsplit(base_url)
            if parts.scheme != "http" or not parts.hostname:
                raise Refused(f"only http:// replicas are supported, not {base_url!r}")
            port = parts.port or 80
            addr = self._addr[base_url] = (parts.hostname, port, parts.netloc.encode("latin-1"))
        return addr

    async def _connect(self, base_url: str) -> _Conn:
        idle = self._idle.get(base_url)
        while idle:
            conn = idle.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.close()
        host, port, _ = self._address(base_url)
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(host, port, limit=65536)
        except TimeoutError as exc:
            raise UpstreamError(f"connecting took over {self.connect_timeout_s:g} s") from exc
        except OSError as exc:
            raise Refused(f"connection refused: {exc!r}") from exc
        return _Conn(reader, writer)

    async def send(
        self, method: str, base_url: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        """Send one request, read the status line and headers; the body streams from the answer."""
        host = self._address(base_url)[2]
        lines = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"Host: ", host, b"\r\n"]
        for name, value in headers:
            lines += (name, b": ", value, b"\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % len(body))
        lines += (b"\r\n", body)
        payload = b"".join(lines)
        while True:
            conn = await self._connect(base_url)
            try:
                conn.writer.write(payload)
                async with asyncio.timeout(self.read_timeout_s):
                    head = await conn.reader.readuntil(b"\r\n\r\n")
                    while head[9:10] == b"1" and head[9:12] != b"101":  # 100 Continue, 103 ...: skip
                        head = await conn.reader.readuntil(b"\r\n\r\n")
            except TimeoutError as exc:  # before OSError, its base class
                conn.close()
                raise UpstreamError(f"no answer for {self.read_timeout_s:g} s") from exc
            except (OSError, asyncio.IncompleteReadError) as exc:
                conn.close()
                if conn.reused and not getattr(exc, "partial", b""):
                    continue  # a kept-alive connection the replica had closed: nothing was read, retry
                raise UpstreamError(f"the replica failed before answering: {exc!r}") from exc
            except asyncio.LimitOverrunError as exc:
                conn.close()
                raise UpstreamError("the replica's headers are over 64 KiB") from exc
            break
        try:
            return self._parse(base_url, conn, method, head)
        except (ValueError, IndexError) as exc:
            conn.close()
            raise UpstreamError(f"malformed answer from the replica: {head[:200]!r}") from exc

    def _parse(self, key: str, conn: _Conn, method: str, head: bytes) -> UpstreamResponse:
        status_line, _, rest = head[:-4].partition(b"\r\n")
        version, status_s = status_line.split(b" ", 2)[:2]
        status = int(status_s)
        headers: list[tuple[bytes, bytes]] = []
        length = -1
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        for line in rest.split(b"\r\n") if rest else ():
            name, _, value = line.partition(b":")
            value = value.strip()
            headers.append((name, value))
            lname = name.lower()
            if lname == b"content-length":
                length = int(value)
            elif lname == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lname == b"connection":
                v = value.lower()
                keep_alive = b"close" not in v and (keep_alive or b"keep-alive" in v)
        if method == "HEAD" or status in _NO_BODY_STATUS or 100 <= status < 200:
            framing = "none"
        elif chunked:
            framing = "chunked"
        elif length >= 0:
            framing = "length" if length else "none"
        else:
            framing = "close"
        return UpstreamResponse(
            self, key, conn, status, headers, framing, length, keep_alive, self.read_timeout_s
        )
