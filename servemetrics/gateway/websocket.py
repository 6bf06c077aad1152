"""WebSocket connections through the gateway (docs/gateway.md "WebSockets").

A client's upgrade is routed like a ``predict`` request (deployment, backpressure slot, least busy
active replica; a replica refusing the TCP connection is skipped for the next), then the gateway opens
a WebSocket of its own to the replica's ``/websocket`` and relays text and binary messages both ways,
as they come, byte for byte. The connection holds its slot and counts as outstanding on its replica
until it closes.

Closing, either side first: the code and reason of a close frame go on to the other side. Codes that
never travel in a close frame are replaced when passed on: 1005 (the frame had no code) by 1000; a
replica gone without a close frame (1006) closes the client with 1011; a client gone without one, the
replica with 1001. The connection is counted once, in ``baseten_inference_requests_total`` with
``status_code`` = the close code of the side that closed first (1011 for a replica gone; 1006 for a
client gone). Before the upgrade is accepted, the answers are HTTP, as for ``predict`` (401/403/404
from auth, 429, 502, 503; a replica that answers the upgrade with a status other than 101 has that
answer relayed), and metered as such.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

from servemetrics.gateway.errors import no_active_replica, replica_failed
from servemetrics.gateway.proxy import Blocked, Refused, UpstreamError, request_headers, response_headers
from servemetrics.netpolicy import NetPolicy
from servemetrics.netpolicy import Refused as PolicyRefused
from servemetrics.registry import ModelInfo

if TYPE_CHECKING:
    from servemetrics.gateway.gateway import Attempt, Gateway

REPLICA_PATH = "websocket"
"""The replica's path WebSocket connections go to (``/websocket``, as ``predict`` goes to ``/predict``)."""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest message relayed from the replica (uvicorn's own limit for the client's messages)."""
_HANDSHAKE = frozenset(
    {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"}
)
_TO_CLIENT = {1005: 1000, 1006: 1011, 1015: 1011}
"""Close codes that never go in a close frame -> what the client is sent instead (a replica gone: 1011)."""
_TO_REPLICA = {1005: 1000, 1006: 1001, 1015: 1001}
"""The same towards the replica (a client gone: 1001, going away)."""
REPLICA_GONE = 1011
"""The code a connection is counted with when the replica went without a close frame."""


class Denied(UpstreamError):
    """The replica answered the upgrade with ``response`` (its status, not 101): relayed to the client."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"the replica answered the upgrade with {response.status_code}")
        self.response = response


class _Connect(connect):
    """``websockets``' ``connect`` that hands a redirect back as the replica's answer instead of
    following it (the gateway relays what the replica says, as for HTTP)."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


def upstream_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The client's handshake headers to send to the replica: those of ``proxy.request_headers`` less
    the handshake's own (the gateway's connection makes its key, version, extensions; subprotocols are
    offered as the client offered them)."""
    kept = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request_headers(raw)]
    return [(k, v) for k, v in kept if k.lower() not in _HANDSHAKE]


async def open_replica(
    base_url: str,
    target: str,
    headers: list[tuple[str, str]],
    subprotocols: list[Subprotocol],
    policy: NetPolicy | None,
    timeout_s: float,
) -> ClientConnection:
    """A WebSocket to ``base_url`` (``http://host:port``) at ``target`` (path and query), handshake done
    within ``timeout_s`` seconds.

    Raises:
        Blocked: ``policy`` refuses the replica's address (nothing was sent).
        Refused: the replica refused the TCP connection (try another replica).
        Denied: the replica answered the upgrade with another status than 101.
        UpstreamError: a timeout or a malformed handshake.
    """
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise Refused(f"only http:// replicas are supported, not {base_url!r}")
    port = parts.port or 80
    try:
        async with asyncio.timeout(timeout_s):
            hosts = [parts.hostname] if policy is None else await policy.resolve(parts.hostname, port)
            return await _first_of(hosts, port, f"ws://{parts.netloc}{target}", headers, subprotocols)
    except PolicyRefused as exc:
        raise Blocked(str(exc)) from exc
    except InvalidStatus as exc:
        raise Denied(_answer(exc)) from exc
    except TimeoutError as exc:  # before OSError, its base class
        raise UpstreamError(f"no WebSocket handshake within {timeout_s:g} s") from exc
    except OSError as exc:
        raise Refused(f"connection refused: {exc!r}") from exc
    except InvalidHandshake as exc:
        raise UpstreamError(f"the WebSocket handshake failed: {exc}") from exc


async def _first_of(
    hosts: list[str], port: int, url: str, headers: list[tuple[str, str]], subprotocols: list[Subprotocol]
) -> ClientConnection:
    """The WebSocket ``url`` opened at the first of ``hosts`` (names or checked addresses) that takes the
    TCP connection; the last ``OSError`` when none does."""
    for i, host in enumerate(hosts):
        try:
            return await _Connect(
                url,
                additional_headers=headers,
                subprotocols=subprotocols or None,
                compression=None,
                user_agent_header=None,
                proxy=None,
                open_timeout=None,
                max_size=MAX_MESSAGE_BYTES,
                host=host,
                port=port,
            )
        except OSError:
            if i == len(hosts) - 1:
                raise
    raise OSError("no address to connect to")


def _answer(refusal: InvalidStatus) -> Response:
    """The replica's HTTP answer to the upgrade as a response to relay: its status, body and headers
    (less hop-by-hop, ``Server`` and ``Date``, as ``proxy.response_headers``; the length recomputed)."""
    answer = refusal.response
    response = Response(bytes(answer.body or b""), answer.status_code)
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.raw_items()]
    response.raw_headers += [(k, v) for k, v in response_headers(raw) if k.lower() != b"content-length"]
    return response


async def deny(websocket: WebSocket, response: Response) -> None:
    """Answer the upgrade with ``response`` (HTTP), through the ASGI denial-response extension; a
    server without it closes the handshake (1008 for a 4xx, 1011 otherwise: its client sees a 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(1008 if 400 <= response.status_code < 500 else 1011)


async def serve(
    gateway: Gateway,
    websocket: WebSocket,
    model: ModelInfo,
    target: tuple[str, str] | Response,
    arrived: float,
) -> None:
    """Serve the upgrade ``websocket`` of ``model`` to deployment ``target`` (``Gateway.environment_target``
    / ``deployment_target``; an error answer is sent as it is) through ``gateway`` (its gates, replicas
    and metrics); ``arrived``: ``time.perf_counter()`` at arrival. Returns when the connection ends."""
    if isinstance(target, Response):
        await deny(websocket, target)
        return
    attempt = await gateway.admit(model, target, b"", arrived)
    if isinstance(attempt, Response):
        await deny(websocket, attempt)
        return
    try:
        upstream = await _open(gateway, websocket, attempt, target[0])
    except BaseException:
        attempt.abandon()
        raise
    if isinstance(upstream, Response):
        await deny(websocket, upstream)
        return
    assert attempt.replica is not None
    extra = [
        (b"x-servemetrics-deployment-id", target[0].encode()),
        (b"x-servemetrics-replica", attempt.replica[1].encode()),
    ]
    code = REPLICA_GONE
    attempt.opened()
    try:
        await websocket.accept(upstream.subprotocol, extra)
        code = await relay(websocket, upstream)
    finally:
        upstream.transport.abort()  # closed already, unless this was cancelled
        attempt.closed(code)


async def _open(
    gateway: Gateway, websocket: WebSocket, attempt: Attempt, dep_id: str
) -> ClientConnection | Response:
    """A WebSocket to the least busy active replica (one refusing the connection: the next), held as
    ``attempt.replica``; else the metered answer (503 none left, 502 a failure, the replica's own answer
    to the upgrade)."""
    query = websocket.url.query
    target = f"/{REPLICA_PATH}?{query}" if query else f"/{REPLICA_PATH}"
    headers = upstream_headers(websocket.headers.raw)
    subprotocols = [Subprotocol(p) for p in websocket.scope.get("subprotocols", [])]
    tried: set[str] = set()
    while (replica := gateway.pick(dep_id, tried)) is not None:
        key = gateway.hold(replica)
        opened: ClientConnection | None = None
        try:
            opened = await open_replica(
                replica.base_url,
                target,
                headers,
                subprotocols,
                gateway.policy_of(replica),
                gateway.options.connect_timeout_s,
            )
            attempt.replica = key
            return opened
        except Refused:
            tried.add(replica.name)
        except Denied as exc:
            return attempt.answer(exc.response)
        except (Blocked, UpstreamError) as exc:
            return attempt.answer(replica_failed(replica.name, dep_id, exc, isinstance(exc, Blocked)))
        finally:
            if opened is None:  # else attempt.closed() gives the replica back
                gateway.release(key)
    return attempt.answer(no_active_replica(dep_id))


async def relay(websocket: WebSocket, upstream: ClientConnection) -> int:
    """Relay messages both ways until one side closes, pass the close on to the other side, and return
    the code the connection is counted with (module docstring)."""
    to_replica = asyncio.ensure_future(_client_to_replica(websocket, upstream))
    to_client = asyncio.ensure_future(_replica_to_client(websocket, upstream))
    try:
        await asyncio.wait((to_replica, to_client), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_replica, to_client):
            task.cancel()
        await asyncio.gather(to_replica, to_client, return_exceptions=True)
    if _finished(to_replica):  # the client closed first
        code, reason = to_replica.result()
        with contextlib.suppress(Exception):
            await upstream.close(_TO_REPLICA.get(code, code), reason)
        return code
    if not _finished(to_client):  # sending to the client failed: it is gone
        with contextlib.suppress(Exception):
            await upstream.close(_TO_REPLICA[1006])
        return 1006
    code = upstream.close_code or 1006
    reason = upstream.close_reason or ""
    with contextlib.suppress(Exception):  # the client may be gone as well
        await websocket.close(_TO_CLIENT.get(code, code), reason)
    return REPLICA_GONE if code == 1006 else code


def _finished(task: asyncio.Future[Any]) -> bool:
    """The task ended by itself (not cancelled) without an exception."""
    return task.done() and not task.cancelled() and task.exception() is None


async def _client_to_replica(websocket: WebSocket, upstream: ClientConnection) -> tuple[int, str]:
    """The client's messages to the replica until the client closes: its close code and reason. Ends
    without a result (an exception) when the replica's side closed."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return int(message.get("code", 1005)), str(message.get("reason") or "")
        text = message.get("text")
        await upstream.send(text if text is not None else message.get("bytes") or b"")


async def _replica_to_client(websocket: WebSocket, upstream: ClientConnection) -> None:
    """The replica's messages to the client until the replica's side closes (its close frame, or the
    connection lost); ends with an exception when the client's side broke."""
    try:
        async for message in upstream:
            if isinstance(message, str):
                await websocket.send({"type": "websocket.send", "text": message})
            else:
                await websocket.send({"type": "websocket.send", "bytes": message})
    except ConnectionClosed:
        pass
