"""One real service for the CLI tests: the whole app (``tests/apptools.build_app``) served by uvicorn on
a free loopback port in a thread, its clock pinned at ``NOW`` = T0 + 1 h (T0 = 2026-01-01T00:00:00Z), the
client commands' clock too (``CLOCK``, UTC, passed as the Typer context's ``obj``).

Registry: organization acme with keys ``MANAGE`` (WORKSPACE_MANAGE_ALL) and ``INVOKE``
(WORKSPACE_INVOKE); models m1 ``llama`` (deployments d1 ``v1`` 1xH100 serving ``production`` since
2025-12-31, d2 ``v2``), m2 and m3 both ``whisper``; trainer t1 (nodes leader-0, worker-1: the Loops test
data set, ``tests/loops/data.py``, window [T0, T0 + 120 s) at 30 s).

Samples of replica r1 of d1, imported through the service with ``servemetrics import --url`` (``FILE``):
one sample every 30 s at T0 + 30 k s, k = -1 … 120 (the last one at ``NOW``):
- ``baseten_replicas_active`` 1 for k < 60, then 3: each 30 s step holds one sample, so SERIES steps
  0-59 read 1, 60-119 read 3; SUMMARY (the mean over the hour) 2; CURRENT 3.
- ``baseten_inference_requests_total{status_code="200"}`` = 60 (k + 1): 60 requests per step, 2/s;
  ``{status_code="500"}`` = 3 (k + 1): 0.1/s. SUMMARY over [T0, NOW): 7200 (2/s) and 360 (0.1/s).
- ``baseten_end_to_end_response_time_seconds``: per step 63 requests, cumulative buckets le 0.1 +20,
  0.5 +50, 1 +60, +Inf +63, sum +15.75 s. Quantiles: p50 rank 31.5 in (0.1, 0.5]:
  0.1 + 0.4 × 11.5 / 30 = 0.253333; p90 rank 56.7 in (0.5, 1]: 0.5 + 0.5 × 6.7 / 10 = 0.835; p95 rank
  59.85: 0.5 + 0.5 × 9.85 / 10 = 0.9925; p99 rank 62.37 in +Inf: the highest finite bound, 1; avg
  15.75 / 63 = 0.25.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from servemetrics.cli import app
from servemetrics.client.window import Clock
from servemetrics.store.memory import MemoryStore
from tests.apptools import build_app, org
from tests.loops import data as loops_data
from tests.loops.test_api import trainer
from tests.processes import free_port, wait_http
from tests.query.helpers import T0, at

NOW = at(3600)
CLOCK = Clock(lambda: NOW, UTC)
MANAGE = "sm-cli-manage-key"
INVOKE = "sm-cli-invoke-key"
HIST = "baseten_end_to_end_response_time_seconds"
CLEAN_ENV = {
    "SERVEMETRICS_URL": None,
    "SERVEMETRICS_API_KEY": None,
    "SERVEMETRICS_PROFILE": None,
    "XDG_CONFIG_HOME": "/nonexistent-servemetrics-cli-test",
}
"""The environment of every invocation: none of the caller's settings, and no profile file."""


def declarations() -> dict:
    """The registry of the module docstring."""
    production = {"name": "production", "promotions": [{"deployment": "d1", "at": "2025-12-31T00:00:00Z"}]}
    llama = {
        "id": "m1",
        "name": "llama",
        "organization": "acme",
        "deployments": [
            {"id": "d1", "name": "v1", "instance_type": {"gpu_type": "H100", "gpu_count": 1}},
            {"id": "d2", "name": "v2"},
        ],
        "environments": [production],
    }
    whispers = [{"id": m, "name": "whisper", "organization": "acme"} for m in ("m2", "m3")]
    return {
        "organizations": [org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL", INVOKE: "WORKSPACE_INVOKE"})],
        "models": [llama, *whispers],
        "loops": [trainer("t1", "acme", {"model": "m1", "deployment": "d1"})],
    }


def import_file(path: Path) -> Path:
    """Write the OpenMetrics file of the module docstring (timestamps in seconds) to ``path``."""
    t0 = T0 // 1000
    lines = [
        "# TYPE baseten_replicas_active gauge",
        "# TYPE baseten_inference_requests counter",
        f"# TYPE {HIST} histogram",
    ]
    for k in range(-1, 121):
        t = t0 + 30 * k
        n = k + 1
        lines.append(f"baseten_replicas_active {1 if k < 60 else 3} {t}")
        lines.append(f'baseten_inference_requests_total{{status_code="200"}} {60 * n} {t}')
        lines.append(f'baseten_inference_requests_total{{status_code="500"}} {3 * n} {t}')
        for le, per_step in (("0.1", 20), ("0.5", 50), ("1.0", 60), ("+Inf", 63)):
            lines.append(f'{HIST}_bucket{{le="{le}"}} {per_step * n} {t}')
        lines.append(f"{HIST}_sum {15.75 * n} {t}")
        lines.append(f"{HIST}_count {63 * n} {t}")
    path.write_text("\n".join(lines) + "\n# EOF\n")
    return path


@dataclass(frozen=True)
class Served:
    """The running service: its ``base`` URL."""

    base: str


def invoke(args: list[str], **env: str | None) -> tuple[int, str, str]:
    """``servemetrics ARGS`` in this process on ``CLOCK`` (Typer's CliRunner, the real app): its exit
    code, stdout and stderr."""
    result = CliRunner().invoke(app, args, obj=CLOCK, env={**CLEAN_ENV, **env})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The service of the module docstring, its samples imported."""
    tmp = tmp_path_factory.mktemp("cli")
    store = loops_data.load(MemoryStore())
    web = build_app(tmp, declarations(), clock=lambda: NOW, store=store, gateway=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(web, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/healthz")
        args = ["import", str(import_file(tmp / "r1.om")), "--model", "m1", "--deployment", "d1"]
        code, _, stderr = invoke([*args, "--replica", "r1", "--url", base, "--api-key", MANAGE])
        assert (code, stderr.splitlines()[-1]) == (0, f"stored {122 * 9:,} samples"), stderr
        yield Served(base)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
