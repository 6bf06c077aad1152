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
- vLLM series of d1 (``source="vllm"``, two data-parallel engine cores ``engine="0"`` and ``"1"``;
  ``engine_samples``): running 3 + 2 = 5, waiting 1 + 0, KV-cache usage 0.25 and 0.75 (mean 0.5) every
  10 s; per step (15 s into it, engine 0 only) generation tokens +600, TTFT buckets le=0.1 +10,
  le=0.5 +20, +Inf +20, _sum +4, inter-token latency buckets le=0.02 +50, le=0.05 +100, +Inf +100,
  _sum +2.5. x1 and d2 have no engine series.
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


TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"


def _per_step(name: str, inc: float, **labels: str) -> list:
    return series(name, [(-15 + 30 * k, inc * k) for k in range(122)], deployment_id="d1", **labels)


def engine_samples() -> list:
    """d1's vLLM series of the module docstring."""
    every_10s = range(-60, 3601, 10)
    out: list = []
    for engine, running, waiting, kv in (("0", 3, 1, 0.25), ("1", 2, 0, 0.75)):
        labels = {"deployment_id": "d1", "source": "vllm", "engine": engine}
        out += series("vllm:num_requests_running", [(s, running) for s in every_10s], **labels)
        out += series("vllm:num_requests_waiting", [(s, waiting) for s in every_10s], **labels)
        out += series("vllm:kv_cache_usage_perc", [(s, kv) for s in every_10s], **labels)
    e0 = {"source": "vllm", "engine": "0"}
    out += _per_step("vllm:generation_tokens_total", 600, **e0)
    for name, buckets, total in ((TTFT, {"0.1": 10, "0.5": 20}, 4.0), (ITL, {"0.02": 50, "0.05": 100}, 2.5)):
        count = max(buckets.values())
        for le, inc in {**buckets, "+Inf": count}.items():
            out += _per_step(f"{name}_bucket", inc, le=le, **e0)
        out += _per_step(f"{name}_sum", total, **e0)
        out += _per_step(f"{name}_count", count, **e0)
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
        engine_samples(),
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
def pinned_service(
    tmp: Path, store: MemoryStore | None = None, decls: dict | None = None
) -> Iterator[Pinned]:
    """The service above (or one over ``store`` and ``decls``, same clock) on 127.0.0.1:<free port>;
    stopped at exit."""
    store = make_store() if store is None else store
    decls = declarations() if decls is None else decls
    app = build_app(tmp, decls, clock=lambda: NOW, store=store, gateway=False)
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
