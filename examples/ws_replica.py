"""A WebSocket echo replica, to put behind the gateway (docs/gateway.md "WebSockets"; the tests use it).

- ``/websocket`` upgrades and echoes every message as it came: text as text, binary as binary, byte for
  byte. It offers the subprotocol ``echo.v1``. Text commands:
  - ``close CODE [REASON]``: the replica closes the connection with that code (and reason);
  - ``drop``: the replica drops the TCP connection without a close frame (a replica dying mid-connection);
  - ``headers``: answers a JSON object of the handshake's request headers (names in lower case).
  ``?refuse=STATUS`` answers the upgrade with that HTTP status (and a short text body) instead of 101.
- ``GET /health`` answers 200; ``GET /metrics`` an empty Prometheus exposition (the service scrapes it).

    python examples/ws_replica.py --port 9102
    websocat -H 'Authorization: Api-Key $KEY' ws://localhost:8321/v1/models/m1/environments/production/websocket
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

ECHO = Subprotocol("echo.v1")


def answer_http(connection: ServerConnection, request: Request) -> Response | None:
    """``/health``, ``/metrics`` and ``?refuse=`` answered in HTTP; None lets ``/websocket`` upgrade."""
    url = urlsplit(request.path)
    if url.path == "/health":
        return connection.respond(HTTPStatus.OK, "ok\n")
    if url.path == "/metrics":
        return connection.respond(HTTPStatus.OK, "")
    if url.path != "/websocket":
        return connection.respond(HTTPStatus.NOT_FOUND, f"no {url.path}\n")
    refuse = parse_qs(url.query).get("refuse")
    if refuse:
        return connection.respond(HTTPStatus(int(refuse[0])), "refused by the replica\n")
    return None


def select_subprotocol(connection: ServerConnection, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """``echo.v1`` when the client offers it, else none (a client offering nothing is served too)."""
    return ECHO if ECHO in offered else None


async def echo(connection: ServerConnection) -> None:
    """Echo each message until the client closes, or run its command (module docstring)."""
    async for message in connection:
        if isinstance(message, str) and message.startswith("close "):
            code, _, reason = message[len("close ") :].partition(" ")
            await connection.close(int(code), reason)
            return
        if message == "drop":
            connection.transport.abort()
            return
        if message == "headers":
            request = connection.request
            assert request is not None
            await connection.send(json.dumps({k.lower(): v for k, v in request.headers.raw_items()}))
            continue
        await connection.send(message)


async def main(port: int) -> None:
    """Serve on 127.0.0.1:``port`` until stopped."""
    async with serve(
        echo, "127.0.0.1", port, process_request=answer_http, select_subprotocol=select_subprotocol
    ) as server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=9102)
    try:
        asyncio.run(main(parser.parse_args().port))
    except KeyboardInterrupt:
        pass
