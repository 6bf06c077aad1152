"""``Upstream`` against a real local asyncio server that answers with scripted bytes, written in pieces
(each piece flushed, then a pause, so the client reads them one by one): the httptools parser path."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from servemetrics.gateway.proxy import Upstream, UpstreamError, UpstreamResponse

CLOSE = b"<close>"  # in a script: close the connection here


class Replica:
    """Answers each request (read up to its blank line) with the next script: a list of pieces, each
    bytes, ``CLOSE`` or an ``asyncio.Event`` to wait for before going on."""

    def __init__(self, *scripts: list[bytes | asyncio.Event]) -> None:
        self.scripts = list(scripts)
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.scripts:
                try:
                    self.requests.append(await reader.readuntil(b"\r\n\r\n"))
                except asyncio.IncompleteReadError:
                    return
                for piece in self.scripts.pop(0):
                    if isinstance(piece, asyncio.Event):
                        await piece.wait()
                    elif piece == CLOSE:
                        return
                    else:
                        writer.write(piece)
                        await writer.drain()
                        await asyncio.sleep(0.005)
        finally:
            writer.close()


def run(replica: Replica, body: Callable[[Upstream, str], Awaitable[None]]) -> None:
    async def main() -> None:
        server = await asyncio.start_server(replica.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        upstream = Upstream(connect_timeout_s=2, read_timeout_s=2)
        try:
            await body(upstream, f"http://127.0.0.1:{port}")
        finally:
            await upstream.aclose()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


async def read_all(response: UpstreamResponse) -> list[bytes]:
    try:
        return [chunk async for chunk in response.aiter_raw()]
    finally:
        await response.aclose()


def idle(upstream: Upstream, base: str) -> int:
    return len(upstream._idle.get(base, []))


def test_chunked_split_at_awkward_places_streams_and_keeps_the_connection():
    more = asyncio.Event()
    replica = Replica(
        [
            b"HTTP/1.",  # inside the version
            b"1 200 O",  # inside the reason
            b"K\r\nTransfer-Enc",  # inside a header name
            b"oding: chun",  # inside its value
            b"ked\r\nX-Token: a\r",  # between CR and LF
            b"\n\r\n5",  # the blank line and the first chunk size
            b"\r\nhel",  # inside the chunk's data
            b"lo\r",  # between the data and its CRLF
            more,  # the first chunk must reach the caller before the rest is sent
            b"\nC;ext=1\r\n world",  # a chunk extension
            b" again\r\n0\r\nX-Trailer",  # last chunk, a trailer split
            b": t\r\n\r\n",
        ],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
    )

    async def body(upstream: Upstream, base: str) -> None:
        response = await upstream.send("POST", base, "/predict", [(b"x-a", b"1")], b"12345678")
        assert response.status_code == 200
        assert response.headers == [(b"Transfer-Encoding", b"chunked"), (b"X-Token", b"a")]
        chunks: list[bytes] = []
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
            if b"".join(chunks) == b"hello":
                more.set()
        await response.aclose()
        assert b"".join(chunks) == b"hello world again"
        assert idle(upstream, base) == 1  # complete and keep-alive: pooled
        again = await upstream.send("GET", base, "/", [], b"")
        assert b"".join(await read_all(again)) == b"ok"
        assert replica.connections == 1

    run(replica, body)
    assert replica.requests[0].startswith(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"x-a: 1\r\nContent-Length: 8\r\n\r\n" in replica.requests[0]


def test_content_length_in_pieces_then_close_and_close_delimited():
    replica = Replica(
        [b"HTTP/1.1 201 Created\r\nContent-Le", b"ngth: 11\r\nX-B: b\r\n\r\nhello", b" world"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye"],
        [b"HTTP/1.1 200 OK\r\n\r\nto the ", b"close", CLOSE],  # no length, not chunked
    )

    async def body(upstream: Upstream, base: str) -> None:
        first = await upstream.send("GET", base, "/a", [], b"")
        assert (first.status_code, first.headers) == (201, [(b"Content-Length", b"11"), (b"X-B", b"b")])
        assert b"".join(await read_all(first)) == b"hello world"
        assert idle(upstream, base) == 1
        second = await upstream.send("GET", base, "/b", [], b"")
        assert b"".join(await read_all(second)) == b"bye"
        assert idle(upstream, base) == 0  # Connection: close
        third = await upstream.send("GET", base, "/c", [], b"")
        assert b"".join(await read_all(third)) == b"to the close"
        assert idle(upstream, base) == 0

    run(replica, body)
    assert replica.connections == 2


def test_no_body_answers_interim_answers_and_the_stale_connection_retry():
    replica = Replica(
        [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"],  # to HEAD: no body follows
        [b"HTTP/1.1 204 No Content\r\n\r\n"],
        [b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"],
        [CLOSE],  # the kept-alive connection was closed by the replica: retried on a new one
        [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh"],
    )

    async def body(upstream: Upstream, base: str) -> None:
        r = await upstream.send("POST", base, "/", [], b"x")
        assert (r.status_code, b"".join(await read_all(r))) == (200, b"hi")
        for method, status in (("HEAD", 200), ("GET", 204), ("GET", 304)):
            r = await upstream.send(method, base, "/", [], b"")
            assert (r.status_code, await read_all(r)) == (status, [])
            assert idle(upstream, base) == 1
        r = await upstream.send("GET", base, "/", [], b"")
        assert b"".join(await read_all(r)) == b"fresh"

    run(replica, body)
    assert replica.connections == 2


@pytest.mark.parametrize(
    ("script", "where", "message"),
    [
        ([b"HTTP/1.1 abc OK\r\n\r\n"], "head", "malformed answer from the replica"),
        ([b"SMTP ready\r\n\r\n"], "head", "malformed answer from the replica"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"zz\r\n"], "body", "malformed answer"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", CLOSE], "body", "inside the body"),
        ([b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000], "head", "headers are over 64 KiB"),
        ([CLOSE], "head", "failed before answering"),
    ],
)
def test_malformed_answers_are_upstream_errors(script: list[bytes], where: str, message: str):
    replica = Replica(script)

    async def body(upstream: Upstream, base: str) -> None:
        if where == "head":
            with pytest.raises(UpstreamError, match=message):
                await upstream.send("GET", base, "/", [], b"")
        else:
            response = await upstream.send("GET", base, "/", [], b"")
            with pytest.raises(UpstreamError, match=message):
                await read_all(response)
        assert idle(upstream, base) == 0

    run(replica, body)
