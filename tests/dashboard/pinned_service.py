"""A small service of our own for the browser tests: a pinned clock, a hand-made MemoryStore, served by
a real uvicorn on a free port (in a thread of the test process, like ``tests/api/`` but over real HTTP).

Time: the clock is ``NOW`` = T0 + 1 h (T0 = 2026-01-01T00:00:00Z); the browser's Date is pinned to the
same instant, so "Last 1 hour" is [T0, T0 + 3600 s] with 30 s steps: value set k starts at T0 + 30 k s.

Data (model m1, deployment d1 serving ``production`` since 2025-12-31; model m2, deployment x1):
- ``baseten_replicas_active`` of d1: 2 every 10 s, except no sample in [T0 + 1800 s, T0 + 1830 s):
  step 60 is null (a gap).
- ``baseten_end_to_end_response_time_seconds`` of d1: one sample per step at 15 s into it (first one at
  T0 - 15 s); per step the buckets grow by le=0.1: 40, le=0.5: 80, le=1.0: 85, +Inf: 100; _sum by 60.
- ``baseten_inference_requests_total{status_code=200}`` of d1: +30 per step.
- ``baseten_gpu_memory_used`` of d1: 2048 MiB; ``baseten_gpu_utilization``: 0.5.
- x1 (model m2, 1 x L4): ``baseten_replicas_active`` 1 throughout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from servemetrics.store.memory import MemoryStore
from tests.apptools import build_app, org
from tests.processes import free_port, wait_http
from tests.query.helpers import T0, at, series, store_with

NOW = at(3600)
KEY = "sm-dashboard-pinned-key"
REVOCABLE_KEY = "sm-dashboard-revocable-key"
HIST = "baseten_end_to_end_response_time_seconds"
GAP_STEP = 60
"""Index of the value set with no replicas sample: [T0 + 1800 s, T0 + 1830 s)."""


def _hist_samples() -> list:
    out = []
    per_step = {"0.1": 40, "0.5": 80, "1.0": 85, "+Inf": 100}
    for k in range(122):
        t = -15 + 30 * k
        for le, inc in per_step.items():
            out += series(f"{HIST}_bucket", [(t, inc * k)], deployment_id="d1", le=le)
        out += series(f"{HIST}_sum", [(t, 60 * k)], deployment_id="d1")
        out += series(f"{HIST}_count", [(t, 100 * k)], deployment_id="d1")
    return out


def make_store() -> MemoryStore:
    """The data described in the module docstring."""
    replicas = [(s, 2) for s in range(-60, 3601, 10) if not 1800 <= s < 1830]
    return store_with(
        series("baseten_replicas_active", replicas, deployment_id="d1"),
        _hist_samples(),
        series(
            "baseten_inference_requests_total",
            [(-15 + 30 * k, 30 * k) for k in range(122)],
            deployment_id="d1",
            status_code="200",
        ),
        series("baseten_gpu_memory_used", [(s, 2048) for s in range(-60, 3601, 10)], deployment_id="d1"),
        series("baseten_gpu_utilization", [(s, 0.5) for s in range(-60, 3601, 10)], deployment_id="d1"),
        series(
            "baseten_replicas_active",
            [(s, 1) for s in range(-60, 3601, 10)],
            model_id="m2",
            deployment_id="x1",
        ),
    )


def declarations() -> dict:
    """Organization acme with ``KEY`` and ``REVOCABLE_KEY``; models m1 (d1 serving ``production``, d2)
    and m2 (x1)."""
    production = {"name": "production", "promotions": [{"deployment": "d1", "at": "2025-12-31T00:00:00Z"}]}
    keys = {KEY: "WORKSPACE_MANAGE_ALL", REVOCABLE_KEY: "WORKSPACE_EXPORT_METRICS"}
    return {
        "organizations": [org("acme", keys)],
        "models": [
            {
                "id": "m1",
                "name": "llama",
                "organization": "acme",
                "deployments": [
                    {"id": "d1", "name": "v1", "instance_type": {"gpu_type": "H100", "gpu_count": 2}},
                    {"id": "d2", "name": "v2"},
                ],
                "environments": [production],
            },
            {
                "id": "m2",
                "name": "whisper",
                "organization": "acme",
                "deployments": [{"id": "x1", "instance_type": {"gpu_type": "L4", "gpu_count": 1}}],
            },
        ],
    }


@dataclass
class Pinned:
    """A running pinned service: ``base`` URL and the FastAPI ``app`` (its registry for revocations)."""

    base: str
    app: FastAPI


@contextmanager
def pinned_service(tmp: Path) -> Iterator[Pinned]:
    """The service above on 127.0.0.1:<free port>; stopped at exit."""
    app = build_app(tmp, declarations(), clock=lambda: NOW, store=make_store(), gateway=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        yield Pinned(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        time.sleep(0)


__all__ = ["GAP_STEP", "KEY", "NOW", "REVOCABLE_KEY", "T0", "Pinned", "pinned_service"]
