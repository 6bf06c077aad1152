"""The status a relayed answer is counted with (issue 17's review: a cut stream was counted as the
replica's 200): the replica's when its whole body reached the client, 499 when the client left before
the end, 502 when the replica failed inside the body. ``Relay`` is driven as the ASGI server drives it,
against a real local replica (``tests.gateway.test_upstream.Replica``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from servemetrics.gateway.proxy import Relay, Upstream, UpstreamError
from tests.gateway.test_upstream import CLOSE, Replica, run

HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


async def _relay(
    upstream: Upstream, base: str, receive: Any, on_send: Any = None
) -> tuple[Relay, list[Relay], list[dict[str, Any]]]:
    """A relay of ``GET /`` to the client ``receive`` / a recording ``send``; (relay, its done calls, what
    it sent). An error of the relay propagates after ``done``."""
    answer = await upstream.send("GET", base, "/", [], b"")
    done: list[Relay] = []
    sent: list[dict[str, Any]] = []
    relay = Relay(answer, time.perf_counter(), done.append)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if on_send is not None:
            on_send(message)

    await relay({"type": "http"}, receive, send)
    return relay, done, sent


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def test_a_whole_body_counts_with_the_replicas_status() -> None:
    replica = Replica([HEAD, b"3\r\nabc\r\n", b"0\r\n\r\n"])

    async def body(upstream: Upstream, base: str) -> None:
        relay, done, sent = await _relay(upstream, base, _never)
        assert done == [relay] and (relay.status_code, relay.metered_status) == (200, 200)
        assert b"".join(m.get("body", b"") for m in sent) == b"abc"

    run(replica, body)


def test_a_replica_failing_inside_the_body_counts_as_502() -> None:
    replica = Replica([HEAD, b"3\r\nabc\r\n", CLOSE])  # closes before the last chunk

    async def body(upstream: Upstream, base: str) -> None:
        done: list[Relay] = []
        answer = await upstream.send("GET", base, "/", [], b"")
        relay = Relay(answer, time.perf_counter(), done.append)
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        with pytest.raises(UpstreamError):
            await relay({"type": "http"}, _never, send)
        assert done == [relay] and (relay.status_code, relay.metered_status) == (200, 502)
        assert sent[0]["status"] == 200 and sent[-1]["body"] == b"abc"  # the client has a cut body

    run(replica, body)


def test_a_client_leaving_before_the_end_counts_as_499() -> None:
    release = asyncio.Event()
    first_sent = asyncio.Event()
    replica = Replica([HEAD, b"3\r\nabc\r\n", release, b"0\r\n\r\n"])

    async def leaves() -> dict[str, Any]:
        await first_sent.wait()
        return {"type": "http.disconnect"}

    def on_send(message: dict[str, Any]) -> None:
        if message.get("body"):
            first_sent.set()

    async def body(upstream: Upstream, base: str) -> None:
        try:
            relay, done, _ = await _relay(upstream, base, leaves, on_send)
        finally:
            release.set()
        assert done == [relay] and (relay.status_code, relay.metered_status) == (200, 499)

    run(replica, body)


def test_a_disconnect_once_the_whole_body_was_handed_on_counts_with_the_replicas_status() -> None:
    """uvicorn's ``receive`` answers ``http.disconnect`` as soon as the response is complete; when the
    last send yields (a paused transport), the relay sees that before it ends: not a client gone."""
    ended = asyncio.Event()
    replica = Replica([HEAD, b"3\r\nabc\r\n", b"0\r\n\r\n"])

    async def after_the_end() -> dict[str, Any]:
        await ended.wait()
        return {"type": "http.disconnect"}

    async def body(upstream: Upstream, base: str) -> None:
        answer = await upstream.send("GET", base, "/", [], b"")
        done: list[Relay] = []
        relay = Relay(answer, time.perf_counter(), done.append)

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message["more_body"]:
                ended.set()
                await asyncio.sleep(0.05)  # the write drains: the watcher runs meanwhile

        await relay({"type": "http"}, after_the_end, send)
        assert done == [relay] and (relay.status_code, relay.metered_status) == (200, 200)

    run(replica, body)
