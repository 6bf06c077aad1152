"""A running service with Model APIs in front of one OpenAI-format replica: the setup the Model API
end-to-end and browser tests share (issue 17's review asked for one).

``examples/openai_replica.py`` is replica r1 of deployment d1 of model m1 (organization acme,
``production`` promoted to d1); the organizations, further models and Model APIs are the caller's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import openai

from tests.processes import (
    free_port,
    promoted,
    start,
    start_service,
    stop,
    wait_http,
    wait_until,
    write_service_config,
)

PROMPT = [{"role": "user", "content": "five words in this prompt"}]
"""Five prompt words: five input tokens to the test replica."""


def openai_client(base: str, key: str) -> openai.OpenAI:
    """The ``openai`` client of ``key`` at the service ``base`` (no retries: every 429 reaches the test)."""
    return openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=30)


@contextlib.contextmanager
def model_api_service(
    tmp: Path,
    organizations: list[dict[str, Any]],
    model_apis: list[dict[str, Any]],
    ready_key: str,
    more_models: Sequence[dict[str, Any]] = (),
) -> Iterator[str]:
    """The service (its base URL) once a call of ``ready_key`` to Model API ``chat`` is routed to the
    replica (one metered call of 1 output token); both processes stopped at the end."""
    rport, sport = free_port(), free_port()
    replica = start(["examples/openai_replica.py", "--port", str(rport)], tmp / "replica.log")
    target = f"http://127.0.0.1:{rport}/metrics"
    m1 = {
        "id": "m1",
        "organization": "acme",
        "deployments": [{"id": "d1", "replicas": [{"id": "r1", "targets": [target]}]}],
        "environments": [promoted("production", "d1")],
    }
    write_service_config(tmp, sport, organizations, [m1, *more_models], model_apis=model_apis)
    service = start_service(tmp)
    base = f"http://127.0.0.1:{sport}"
    try:
        wait_http(f"http://127.0.0.1:{rport}/health")
        wait_http(f"{base}/healthz")
        with openai_client(base, ready_key) as client:

            def ready() -> bool:
                try:
                    client.chat.completions.create(model="chat", messages=PROMPT, max_tokens=1)
                except openai.APIStatusError:
                    return False  # 503 until the replica's first health check passes
                return True

            wait_until(ready, "the replica to be routed to", 30)
        yield base
    finally:
        stop(service)
        stop(replica)
