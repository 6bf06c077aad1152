"""A request cancelled while the replica has not answered yet (the client went away) gives back both
its gate slot and its outstanding count: a real ``Gateway`` over a real registry, in front of a local
TCP replica that answers its health checks but never the request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.types import Message

from servemetrics.gateway import GatewayOptions
from servemetrics.gateway.gateway import Gateway
from servemetrics.registry import Registry

HEALTHY = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class SilentReplica:
    """Answers ``GET /health`` with 200; any other request is read and then never answered."""

    def __init__(self) -> None:
        self.holding = asyncio.Event()  # set once a request is held unanswered
        self.hung_up = asyncio.Event()  # set when the gateway closed the held request's connection
        self._open: dict[asyncio.StreamWriter, asyncio.Task[None]] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[writer] = task
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"GET /health "):
                    self.holding.set()
                    await reader.read()  # until the gateway hangs up
                    self.hung_up.set()
                    return
                writer.write(HEALTHY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
            self._open.pop(writer, None)

    async def close(self) -> None:
        """Close the connections still open and wait for their handlers."""
        tasks = list(self._open.values())
        for writer in list(self._open):
            writer.close()
        await asyncio.gather(*tasks, return_exceptions=True)


def _request(path: str) -> Request:
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b'{"x": 1}', "more_body": False}

    return Request(scope, receive)


async def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout_s)


def test_a_request_cancelled_before_the_answer_head_gives_its_gate_slot_back(tmp_path):
    registry = Registry.open(f"sqlite:///{tmp_path / 'registry.sqlite3'}")
    registry.tenancy.ensure_organization("acme")
    registry.tenancy.ensure_model("m1", "llama", "acme")
    registry.deployments.create_deployment("m1", "d1", "first")

    async def run() -> None:
        replica = SilentReplica()
        server = await asyncio.start_server(replica.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        await asyncio.to_thread(
            registry.deployments.ensure_target, "m1", "d1", "r1", f"http://127.0.0.1:{port}/metrics"
        )
        options = GatewayOptions(health_interval_s=0.05, connect_timeout_s=2, upstream_timeout_s=60)
        gateway = Gateway(registry, lambda: int(time.time() * 1000), options)
        await gateway.start()
        try:
            await _until(lambda: gateway.gate("d1").capacity == 1)  # r1 passed its health check
            org = registry.tenancy.organization_id("acme")
            model = registry.tenancy.model("m1", org)
            assert model is not None
            task = asyncio.create_task(gateway.to_deployment(_request("/predict"), model, "d1", "predict"))
            await asyncio.wait_for(replica.holding.wait(), 10)  # the replica has the request
            gate = gateway.gate("d1")
            assert gate.in_flight == 1 and gateway._outstanding[("d1", "r1")] == 1
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert task.cancelled()
            assert gate.in_flight == 0  # the slot is back: the deployment keeps its capacity
            assert gateway._outstanding[("d1", "r1")] == 0
            await asyncio.wait_for(replica.hung_up.wait(), 10)  # and its connection is closed
        finally:
            await gateway.stop()
            await replica.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())
    registry.close()
