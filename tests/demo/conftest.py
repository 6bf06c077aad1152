"""Fixtures of the demo's tests: a demo replica's handler on a real port."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from servemetrics.demo import replica
from servemetrics.demo.model import CharModel, ModelSize
from tests.processes import free_port, wait_until


@pytest.fixture
def served(monkeypatch) -> Iterator[tuple[str, CollectorRegistry]]:
    """The replica's handler on a real port with a small trained model and a fresh vLLM registry."""
    reg = CollectorRegistry()
    model = CharModel(ModelSize(context=3, embed=8, hidden=32, steps=150), text="the boat came home. " * 40)
    monkeypatch.setattr(replica.State, "model", model)
    monkeypatch.setattr(replica.State, "engine", replica.make_engine("vllm", reg, "m"))
    monkeypatch.setattr(replica.State, "token_s", 0.0)
    port = free_port()
    server = replica.ThreadingHTTPServer(("127.0.0.1", port), replica.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}", reg
    finally:
        server.shutdown()
        server.server_close()


def wait_engine_idle(timeout: float = 10.0) -> None:
    """Until the served replica's engine has no request running: a streamed answer reaches the client
    before the handler tells the engine it finished."""
    wait_until(lambda: not replica.State.engine.running, "the replica's engine to finish", timeout)
