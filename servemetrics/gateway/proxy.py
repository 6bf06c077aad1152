"""Sending a request to a replica (``Upstream``), relaying its answer without buffering, timing it.

``Upstream`` is the gateway's own HTTP/1.1 client: keep-alive connections pooled per replica, the
request written in one go, the answer parsed by ``httptools`` (llhttp, as in uvicorn) as it arrives.
It replaces ``httpx`` on the request path, whose connection pool cost about 1 ms of CPU a request and
grew with the number of pooled connections (docs/gateway.md, Performance).

``Relay`` is an ASGI app that streams the replica's raw body chunks (chunked or ``text/event-stream``
alike) to the client: each chunk is sent as it arrives. Time to first byte is taken when the
first body chunk has been handed to the server, end-to-end when the last has; both in seconds from
the request's arrival. ``done`` runs exactly once, however the response ends (finished, client gone,
replica error).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import httptools
from starlette.types import Receive, Scope, Send

from servemetrics.netpolicy import NetPolicy
from servemetrics.netpolicy import Refused as PolicyRefused

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
_NOT_RELAYED = HOP_BY_HOP | {"server", "date"}
"""The replica's headers the client never sees: hop-by-hop, and ``Server`` / ``Date``, which our own
HTTP server sends on every answer (two of each otherwise, issue 15)."""


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's headers to send to the replica: hop-by-hop, ``Host``, ``Authorization`` (the
    caller's API key stays with the gateway) and ``Content-Length`` (recomputed) are dropped."""
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _NOT_FORWARDED]


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The replica's headers to send to the client (hop-by-hop, ``Server`` and ``Date`` dropped: ours are
    sent; the body is relayed raw, so ``Content-Length`` and ``Content-Encoding`` stay true)."""
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _NOT_RELAYED]


class Relay:
    """An ASGI app (a response) that streams ``upstream``'s answer to the client, then calls
    ``done(relay)`` once.

    ``status_code`` and ``raw_headers`` are the replica's (hop-by-hop dropped, ``extra_headers`` added).
    Attributes set while streaming: ``first_byte_s`` and ``end_to_end_s`` (seconds since
    ``arrived``, a ``time.perf_counter()`` reading) and ``sent_bytes``. ``metered_status`` is the status
    the answer is counted with: the replica's when its whole body was handed to the server (also when
    the client leaves, or uvicorn's ``receive`` reports the finished response as a disconnect, during
    the last sends); ``CLIENT_GONE`` (499) when the client left while the replica's body was still
    coming; ``BAD_GATEWAY`` (502) when the replica failed inside the body (the client already has the
    replica's status line and a cut body; it must not count as 200).
    """

    CLIENT_GONE = 499
    """nginx's "client closed request", the status proxies count such a request with."""
    BAD_GATEWAY = 502

    def __init__(
        self,
        upstream: UpstreamResponse,
        arrived: float,
        done: Callable[[Relay], None],
        extra_headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        self.status_code = upstream.status_code
        self.metered_status = upstream.status_code
        self.raw_headers = [*response_headers(upstream.headers), *extra_headers]
        self.upstream = upstream
        self.arrived = arrived
        self.first_byte_s: float | None = None
        self.end_to_end_s: float | None = None
        self.sent_bytes = 0
        self._done = done
        self.on_chunk: Callable[[bytes, float], None] | None = None
        """Called with each body chunk once it was handed to the server, and its time (seconds since
        ``arrived``): a reader of the answer (the Model API paths' ``openai_meter``)."""
        self.after: Callable[[Relay], None] | None = None
        """Called once after ``done`` (also when the response ended early)."""

    async def _chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self.upstream.aiter_raw():
            if not chunk:
                continue
            yield chunk
            self.sent_bytes += len(chunk)
            if self.first_byte_s is None:
                self.first_byte_s = time.perf_counter() - self.arrived
            if self.on_chunk is not None:
                self.on_chunk(chunk, time.perf_counter() - self.arrived)
        self.end_to_end_s = time.perf_counter() - self.arrived

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the body; stop at once when the client disconnects (as starlette's
        ``StreamingResponse`` does, with one plain task watching ``receive`` instead of a task group
        per response)."""
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
        except UpstreamError:
            self.metered_status = self.BAD_GATEWAY
            raise  # the server closes the connection: the client sees a cut body
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # the client left: the relay ends here
            if not self.upstream.body_done:  # else it left (or uvicorn said so) once it had it all
                self.metered_status = self.CLIENT_GONE
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
                if self.after is not None:
                    self.after(self)


# -- the upstream client ---------------------------------------------------------------------------


class UpstreamError(Exception):
    """The replica failed after the connection was made (or the connection timed out): a 502."""


class Refused(UpstreamError):
    """The replica refused the connection: the request never reached it (try another replica)."""


class Blocked(UpstreamError):
    """The network policy refuses the replica's address (``netpolicy``): nothing was sent."""


class _Conn:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        self.writer.close()


_HEAD_LIMIT = 65536


class UpstreamResponse:
    """A replica's answer: ``status_code``, raw ``headers`` and the body to stream once with
    ``aiter_raw()`` (the bytes as sent, less the chunked framing); ``aclose()`` hands the connection
    back to the pool when the parser saw the whole message and keep-alive holds, else closes it.

    The answer is parsed by ``httptools.HttpResponseParser`` (llhttp), fed from the connection's
    reader; this object is its callback protocol. 1xx interim answers are skipped, trailers dropped.
    """

    def __init__(self, pool: Upstream, key: str, conn: _Conn, head_only: bool, read_timeout_s: float) -> None:
        self._pool, self._key, self._conn = pool, key, conn
        self._head_only = head_only  # an answer to HEAD: no body, whatever its headers say
        self._timeout = read_timeout_s
        self._parser = httptools.HttpResponseParser(self)
        self.status_code = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []  # parsed body pieces not yet yielded
        self._received = b""  # the answer's first bytes (for error messages; empty: nothing came)
        self._head_done = False
        self._complete = False
        self._keep_alive = False
        self._dirty = False  # bytes the message did not account for: never pool the connection
        self._sized = False  # Content-Length or chunked: a close before the end is an error

    # -- parser callbacks

    def on_message_begin(self) -> None:
        if self._head_done:
            self._dirty = True  # a second answer to one request

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_done:
            return  # a trailer: dropped
        self.headers.append((name, value))
        lname = name.lower()
        if lname == b"content-length" or (lname == b"transfer-encoding" and b"chunked" in value.lower()):
            self._sized = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # 100 Continue, 103 Early Hints ...: skipped
            self.headers = []
            self._sized = False
            return
        self.status_code = status
        self._head_done = True
        if self._head_only:
            self._complete = True
            self._keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self._complete:
            self._dirty = True  # a body to HEAD
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._head_done and not self._complete:
            self._complete = True
            # here: llhttp clears the message's flags (Connection: close ...) once this returns
            self._keep_alive = self._parser.should_keep_alive()

    # -- reading

    def _feed(self, data: bytes) -> None:
        if not self._received:
            self._received = data[:200]
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # 101 Switching Protocols: no HTTP body follows
            self._complete = self._dirty = True
        except httptools.HttpParserError as exc:
            raise UpstreamError(
                f"malformed answer from the replica ({exc}); it began {self._received!r}"
            ) from exc

    async def start(self, payload: bytes) -> bool:
        """Write the request (``payload``: its bytes) and read the answer's status line and headers.

        Returns:
            False when the connection was a kept-alive one the replica had closed and nothing came
            back (the request never reached it: send it again on another connection; this one is
            closed), else True.

        Raises:
            UpstreamError: no answer within the read timeout, a failure before the head, or a bad head.
        """
        conn = self._conn
        try:
            conn.writer.write(payload)
            async with asyncio.timeout(self._timeout):
                await self._read_head()
        except TimeoutError as exc:  # before OSError, its base class
            conn.close()
            raise UpstreamError(f"no answer for {self._timeout:g} s") from exc
        except OSError as exc:
            conn.close()
            if conn.reused and not self._received:
                return False
            raise UpstreamError(f"the replica failed before answering: {exc!r}") from exc
        except UpstreamError:
            conn.close()
            raise
        except asyncio.CancelledError:  # the client left: hang up, the replica may stop working on it
            conn.close()
            raise
        return True

    async def _read_head(self) -> None:
        reader, got = self._conn.reader, 0
        while not self._head_done:
            data = await reader.read(65536)
            if not data:
                raise ConnectionResetError("the replica closed the connection")
            self._feed(data)
            got += len(data)
            if got > _HEAD_LIMIT and not self._head_done:
                raise UpstreamError(f"the replica's headers are over {_HEAD_LIMIT // 1024} KiB")

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        reader, timeout = self._conn.reader, self._timeout
        while True:
            if self._body:
                chunks, self._body = self._body, []
                for chunk in chunks:
                    yield chunk
            if self._complete:
                return
            try:
                async with asyncio.timeout(timeout):
                    data = await reader.read(65536)
            except TimeoutError as exc:  # before OSError, its base class
                raise UpstreamError(f"no body bytes for {timeout:g} s") from exc
            except OSError as exc:
                raise UpstreamError(f"reading the body failed: {exc!r}") from exc
            if data:
                self._feed(data)
            elif self._sized:
                raise UpstreamError("the replica closed the connection inside the body")
            else:
                self._complete = True  # no length, not chunked: the body ends with the connection

    @property
    def body_done(self) -> bool:
        """True once the whole body was parsed and every piece of it yielded by ``aiter_raw``."""
        return self._complete and not self._body

    async def aclose(self) -> None:
        """Give the connection back (the whole message was parsed and keep-alive holds), else close it."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        if self._complete and self._keep_alive and not self._dirty:
            self._pool.release(self._key, conn)
        else:
            conn.close()


class Upstream:
    """HTTP/1.1 keep-alive connections to the replicas, pooled per replica (base URL).

    Lean on purpose: one write per request, the answer parsed by llhttp, no cookies, redirects or
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

    async def _connect(self, base_url: str, policy: NetPolicy | None) -> tuple[str, _Conn]:
        """A pooled or new connection and its pool key (connections checked by a policy are pooled
        apart from trusted ones, so a checked request never reuses an unchecked connection)."""
        key = base_url if policy is None else f"checked {base_url}"
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return key, conn
            conn.close()
        host, port, _ = self._address(base_url)
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                hosts = [host] if policy is None else await policy.resolve(host, port)
                reader, writer = await _open(hosts, port)
        except PolicyRefused as exc:
            raise Blocked(str(exc)) from exc
        except TimeoutError as exc:
            raise UpstreamError(f"connecting took over {self.connect_timeout_s:g} s") from exc
        except OSError as exc:
            raise Refused(f"connection refused: {exc!r}") from exc
        return key, _Conn(reader, writer)

    async def send(
        self,
        method: str,
        base_url: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        policy: NetPolicy | None = None,
    ) -> UpstreamResponse:
        """Send one request, read the status line and headers; the body streams from the answer.

        ``policy``: the replica's address is resolved and checked before a new connection is made (None:
        a trusted replica). Raises ``Blocked`` when the policy refuses it, ``Refused`` when the replica
        refuses the connection, ``UpstreamError`` when it fails."""
        host = self._address(base_url)[2]
        lines = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"Host: ", host, b"\r\n"]
        for name, value in headers:
            lines += (name, b": ", value, b"\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % len(body))
        lines += (b"\r\n", body)
        payload = b"".join(lines)
        while True:
            key, conn = await self._connect(base_url, policy)
            response = UpstreamResponse(self, key, conn, method == "HEAD", self.read_timeout_s)
            if await response.start(payload):
                return response
            # a kept-alive connection the replica had closed: nothing was read, send again


async def _open(hosts: list[str], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of ``hosts`` (names or checked addresses) that takes it; the last
    ``OSError`` when none does."""
    for i, host in enumerate(hosts):
        try:
            return await asyncio.open_connection(host, port, limit=65536)
        except OSError:
            if i == len(hosts) - 1:
                raise
    raise OSError("no address to connect to")
