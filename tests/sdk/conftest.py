"""One real `servemetrics serve` for the SDK suite (its own CI step, `scripts/test-sdk`): the platform's
official Python SDK (PyPI `baseten` 0.13.1, the `sdk` extra) drives it through
`ManagementClient(api_key=…, base_url_override=URL).api`, unchanged.

The service holds organization acme (key `MANAGE`, WORKSPACE_MANAGE_ALL) with
- model `m1` (`llama`): deployment `d1` (1xH100) whose replica `r1` is scraped every second from a real
  dcgm-exporter exposition (`shared/fixtures/exposition/dcgm_exporter_k8s_pod_sample.prom`: GPU 0 at
  48 °C, 1 MiB of frame buffer, `DCGM_FI_PROF_GR_ENGINE_ACTIVE` 0.004656), `production` promoted to it;
  the request counter of replica `r-hist` imported for a past window (`Service.history`);
- model `m2` (`playground`) for the changes: deployments `e1` (1xL4, replica `r1`, `production`),
  `e2` (2xA100), `e3` (CPU, replica `r1`), environment `staging` with no deployment (the tests add
  `canary` and `blue`);
- trainer `t1` (sampler `m1`/`d1`), its leader node `n0` (GPU rank 0) scraped from the same exposition;
- team `team-a` (key `TEAM_A`, WORKSPACE_INVOKE) and the Model API `chat` on `m1`'s production
  (`MODEL_APIS`: 60 requests and 10,000 tokens a minute, team-a 5 requests);
and organization other (key `OTHER`) with model `m9` (Model API `theirs`), whose deployment `x1`
(`production`) has the two pods of a kube-state-metrics exposition
(`tests/fixtures/kube_state_startups.prom`) as replicas, each scraping it (their startup timestamps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from baseten.client import ManagementClient
from baseten.client.managementapi import ApiClient

from tests.apptools import auth
from tests.conftest import REPO_ROOT, SHARED
from tests.processes import (
    free_port,
    promoted,
    start_service,
    stop,
    wait_for_scrapes,
    wait_http,
    write_service_config,
)

MANAGE = "sdk-manage-key"
OTHER = "sdk-other-key"
TEAM_A = "sdk-team-a-key"
"""A WORKSPACE_INVOKE key of acme's team `team-a` (the Model API `chat` limits it to 5 requests / minute)."""
DCGM = SHARED / "fixtures" / "exposition" / "dcgm_exporter_k8s_pod_sample.prom"
KSM = REPO_ROOT / "tests" / "fixtures" / "kube_state_startups.prom"
KSM_PODS = ("llm-7f9c-x2k4p", "llm-7f9c-q8n2m")
"""The pods of `KSM`, each a replica of `x1` (its README row has their timestamps)."""
COUNTS = (0, 3, 7, 2, 6)
"""The imported `baseten_inference_requests_total{status_code="200"}` of `r-hist`, 15 s apart: a reset
at the 4th, so the increase is 3 + 4 + 2 + 4 = 13."""


@dataclass(frozen=True)
class Service:
    """The running service: its URL, the SDK's API client for `MANAGE` and for `OTHER`, `history`,
    the `[start, end)` window in epoch ms holding the imported counter, and the client for `TEAM_A`."""

    base: str
    api: ApiClient
    other: ApiClient
    history: tuple[int, int]
    team_a: ApiClient


def _exporter() -> tuple[ThreadingHTTPServer, int]:
    """A real HTTP server on a free port answering ``/ksm/metrics`` with the kube-state-metrics fixture
    `KSM` and every other path with the DCGM fixture, in a thread."""
    dcgm, ksm = DCGM.read_bytes(), KSM.read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = ksm if self.path == "/ksm/metrics" else dcgm
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


PLAYGROUND: dict[str, Any] = {
    "id": "m2",
    "name": "playground",
    "organization": "acme",
    "deployments": [
        {
            "id": "e1",
            "name": "one",
            "instance_type": {"gpu_type": "L4", "gpu_count": 1},
            "replicas": [{"id": "r1"}],
        },
        {"id": "e2", "name": "two", "instance_type": {"gpu_type": "A100", "gpu_count": 2}},
        {"id": "e3", "name": "three", "replicas": [{"id": "r1"}]},
    ],
    "environments": [promoted("production", "e1"), {"name": "staging"}],
}
"""Model m2, what the tests change (its deployments scrape nothing)."""


MODEL_APIS: list[dict[str, Any]] = [
    {
        "name": "chat",
        "organization": "acme",
        "model": "m1",
        "display_name": "Chat",
        "context_length": 8192,
        "limits": {"requests_per_minute": 60, "tokens_per_minute": 10000},
        "team_limits": {"team-a": {"requests_per_minute": 5}},
    },
    {"name": "theirs", "organization": "other", "model": "m9"},
]
"""acme's Model API `chat` (served by `m1`'s production) and other's `theirs`."""


def _config(tmp: Path, port: int, exporter: str) -> None:
    """The config of the module docstring; the replica scrapes ``exporter``/metrics, the trainer node
    ``exporter``/node/metrics (the same exposition under a path of its own)."""
    llama = {
        "id": "m1",
        "name": "llama",
        "organization": "acme",
        "deployments": [
            {
                "id": "d1",
                "name": "v1",
                "instance_type": {"gpu_type": "H100", "gpu_count": 1},
                "replicas": [{"id": "r1", "targets": [f"{exporter}/metrics"]}],
            }
        ],
        "environments": [promoted("production", "d1")],
    }
    trainer = {
        "id": "t1",
        "name": "rl trainer",
        "organization": "acme",
        "sampler": {"model": "m1", "deployment": "d1"},
        "nodes": [
            {
                "id": "n0",
                "role": "leader",
                "gpu_ranks": [0],
                "targets": [{"url": f"{exporter}/node/metrics", "kind": "dcgm"}],
            }
        ],
    }
    organizations = [
        {
            "name": "acme",
            "teams": [{"id": "team-a"}],
            "api_keys": [
                {"key": MANAGE, "type": "WORKSPACE_MANAGE_ALL"},
                {"key": TEAM_A, "type": "WORKSPACE_INVOKE", "team": "team-a"},
            ],
        },
        {"name": "other", "api_keys": [{"key": OTHER, "type": "WORKSPACE_MANAGE_ALL"}]},
    ]
    pods = [{"id": pod, "targets": [f"{exporter}/ksm/metrics"]} for pod in KSM_PODS]
    other_model = {
        "id": "m9",
        "name": "theirs",
        "organization": "other",
        "deployments": [{"id": "x1", "name": "pods", "replicas": pods}],
        "environments": [promoted("production", "x1")],
    }
    write_service_config(
        tmp, port, organizations, [llama, PLAYGROUND, other_model], loops=[trainer], model_apis=MODEL_APIS
    )


def _import_history(base: str) -> tuple[int, int]:
    """Import `COUNTS` for replica `r-hist` of `d1`, 15 s apart from 30 min ago (a whole minute); the
    window `[first sample, first + 5 min)` in epoch ms."""
    t0 = int(time.time()) // 60 * 60 - 1800
    lines = ["# TYPE baseten_inference_requests counter"]
    lines += [
        f'baseten_inference_requests_total{{status_code="200"}} {v} {t0 + 15 * i}'
        for i, v in enumerate(COUNTS)
    ]
    resp = httpx.post(
        f"{base}/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r-hist"},
        content=("\n".join(lines) + "\n# EOF\n").encode(),
        headers=auth(MANAGE),
        timeout=30,
    )
    assert resp.status_code == 200 and resp.json()["samples"] == len(COUNTS), resp.text
    return t0 * 1000, (t0 + 300) * 1000


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service of this module's docstring, once the DCGM target of `d1` and of `t1` were scraped twice
    each (what the exporter serves is stored)."""
    tmp = tmp_path_factory.mktemp("sdk")
    exporter, exporter_port = _exporter()
    port = free_port()
    _config(tmp, port, f"http://127.0.0.1:{exporter_port}")
    proc = start_service(tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/healthz")
        history = _import_history(base)
        # the replica's and the trainer node's targets, each at least twice: 12 more scrapes of the four
        # registry targets (with x1's two), which take turns on their fixed ticks
        wait_for_scrapes(base, 12, source="registry")
        with (
            ManagementClient(api_key=MANAGE, base_url_override=base) as mine,
            ManagementClient(api_key=OTHER, base_url_override=base) as theirs,
            ManagementClient(api_key=TEAM_A, base_url_override=base) as team,
        ):
            yield Service(base, mine.api, theirs.api, history, team.api)
    finally:
        stop(proc)
        exporter.shutdown()
        exporter.server_close()
