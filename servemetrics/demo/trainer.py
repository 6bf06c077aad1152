"""The demo's trainer process: a small linear model trained by SGD over HTTP, with Knative queue-proxy
style request metrics, and the replayed exporters of its nodes.

- ``POST /v1/train_step`` takes ``{"x": [[float, ...], ...], "y": [float, ...], "lr": 0.0001-1 (0.05)}``
  (1-256 rows of ``FEATURES`` numbers) and runs one SGD step of the shared linear model on it, answering
  ``{"step", "loss"}``. A body that is not such an object is a 400 naming the problem; ``"fault": true``
  is a 500 (the load generator's stand-in for a crashed step).
- ``GET /metrics``: what a Knative queue-proxy (OpenCensus era, ``exporters.md`` §3.1) exposes for the
  trainer pod: ``revision_app_request_count{response_code, response_code_class}`` (prometheus_client adds
  ``_total``, which the knative adapter also maps), ``revision_app_request_latencies`` (milliseconds, the
  queue-proxy's buckets) and ``revision_queue_depth`` (requests in the handler now).
- ``GET /nodes/<node>/dcgm/metrics``, ``/nodes/<node>/kubelet/metrics``, ``/nodes/<node>/stats/summary``:
  the node's replayed exporters (``trainer_replay``); ``--node leader-0=namespace_a/pod_a`` names a node
  and the pod its Summary API document reports for the trainer.
- ``GET /health``: 200.

    python -m servemetrics.demo.trainer --port 9501 \
        --node leader-0=namespace_a/pod_a --node worker-1=namespace_b/pod_b
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from servemetrics.demo import trainer_replay
from servemetrics.demo.busy import BusyMeter, utilisation

FEATURES = 8
KNATIVE_MS_BUCKETS = (
    5,
    10,
    20,
    40,
    60,
    80,
    100,
    150,
    200,
    250,
    300,
    350,
    400,
    450,
    500,
    600,
    700,
    800,
    900,
    1000,
    2000,
    5000,
    10000,
    20000,
    50000,
    100000,
)
"""The queue-proxy's latency buckets in ms (``exporters.md`` §3.1)."""
_TAGS = {
    "namespace_name": "loops",
    "service_name": "demo-trainer",
    "configuration_name": "demo-trainer",
    "revision_name": "demo-trainer-00001",
    "pod_name": "demo-trainer-00001-deployment-0",
    "container_name": "queue-proxy",
}
REGISTRY = CollectorRegistry()
REQUESTS = Counter(
    "revision_app_request_count",
    "The number of requests that are routed to user-container",
    [*_TAGS, "response_code", "response_code_class"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "revision_app_request_latencies",
    "The response latencies of requests that are routed to user-container",
    [*_TAGS, "response_code", "response_code_class"],
    buckets=KNATIVE_MS_BUCKETS,
    registry=REGISTRY,
)
DEPTH = Gauge(
    "revision_queue_depth",
    "The current number of items in the serving and waiting queue",
    list(_TAGS),
    registry=REGISTRY,
).labels(**_TAGS)


class BadInput(ValueError):
    """The request body is not a valid training step (a 400)."""


def parse_step(body: bytes) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """``(x, y, lr, fault)`` from a JSON body, or BadInput saying what to send."""
    try:
        req = json.loads(body or b"null")
    except ValueError as exc:
        raise BadInput(f"the body is not JSON ({exc})") from None
    if not isinstance(req, dict):
        raise BadInput('send a JSON object: {"x": [[...]], "y": [...]}')
    try:
        x = np.asarray(req.get("x"), dtype=np.float64)
        y = np.asarray(req.get("y"), dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInput("x must be rows of numbers and y numbers") from None
    if x.ndim != 2 or x.shape[1] != FEATURES or not 1 <= x.shape[0] <= 256 or y.shape != (x.shape[0],):
        raise BadInput(f"x must be 1-256 rows of {FEATURES} numbers and y one number per row")
    lr = req.get("lr", 0.05)
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not 1e-4 <= lr <= 1:
        raise BadInput("lr must be a number from 0.0001 to 1")
    return x, y, float(lr), req.get("fault") is True


class Model:
    """A linear model ``y = x @ w`` trained by SGD on squared error, shared by the handler threads."""

    def __init__(self) -> None:
        self.w = np.zeros(FEATURES)
        self.steps = 0
        self.lock = threading.Lock()

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> tuple[int, float]:
        """One SGD step; returns the step number and the batch's mean squared error before it."""
        with self.lock:
            err = x @ self.w - y
            self.w -= lr * 2 * x.T @ err / len(y)
            self.steps += 1
            return self.steps, float(np.mean(err**2))


class Handler(BaseHTTPRequestHandler):
    """The trainer's HTTP routes (see the module docstring)."""

    protocol_version = "HTTP/1.1"
    model = Model()
    nodes: dict[str, tuple[str, str]] = {}
    started = time.monotonic()
    busy = BusyMeter()
    gpus = trainer_replay.NodeGpus()
    readings: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        path = urlparse(self.path).path
        parts = path.strip("/").split("/")
        t = time.monotonic() - self.started
        if path == "/metrics":
            self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
        elif path == "/health":
            self._send(200, b'{"status": "ok"}')
        elif len(parts) >= 3 and parts[0] == "nodes" and parts[1] in self.nodes:
            self._node(parts[1], "/".join(parts[2:]), t)
        else:
            self._send(404, b'{"error": "GET /metrics, /health or /nodes/<node>/{dcgm,kubelet}/metrics"}')

    def _node(self, node: str, what: str, t: float) -> None:
        text = "text/plain; version=0.0.4; charset=utf-8"
        if what == "dcgm/metrics":
            self._send(200, self._dcgm(node), text)
        elif what == "kubelet/metrics":
            self._send(200, trainer_replay.kubelet(node, t).encode(), text)
        elif what == "stats/summary":
            namespace, pod = self.nodes[node]
            self._send(200, trainer_replay.summary(t, pod, namespace))
        else:
            self._send(404, b'{"error": "use dcgm/metrics, kubelet/metrics or stats/summary"}')

    def _dcgm(self, node: str) -> bytes:
        """``node``'s DCGM text, its GPUs as busy as the trainer was since the previous scrape of it."""
        reading = (time.monotonic(), self.busy.busy_seconds())
        with self.lock:
            before = self.readings.get(node, reading)
            self.readings[node] = reading
            return self.gpus.dcgm(node, utilisation(before, reading), reading[0]).encode()

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlparse(self.path).path != "/v1/train_step":
            self._send(404, b'{"error": "POST /v1/train_step"}')
            return
        started = time.perf_counter()
        DEPTH.inc()
        try:
            status, answer = self._train(body)
        finally:
            DEPTH.dec()
        code = str(status)
        labels = {**_TAGS, "response_code": code, "response_code_class": f"{code[0]}xx"}
        self._send(status, json.dumps(answer).encode())
        REQUESTS.labels(**labels).inc()
        LATENCY.labels(**labels).observe((time.perf_counter() - started) * 1000.0)

    def _train(self, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            x, y, lr, fault = parse_step(body)
        except BadInput as exc:
            return 400, {"error": str(exc)}
        if fault:
            return 500, {"error": "the training step failed (fault requested)"}
        self.busy.enter()
        try:
            step, loss = self.model.step(x, y, lr)
            time.sleep(0.005 + 0.0002 * len(y))  # stands for the GPU work of a step
        finally:
            self.busy.leave()
        return 200, {"step": step, "loss": loss}

    def log_message(self, *args: object) -> None:
        pass


def _node(value: str) -> tuple[str, tuple[str, str]]:
    node, _, pod = value.partition("=")
    namespace, _, name = pod.partition("/")
    if not node or not namespace or not name:
        raise argparse.ArgumentTypeError(
            f"{value!r}: write NODE=NAMESPACE/POD, e.g. leader-0=namespace_a/pod_a"
        )
    return node, (namespace, name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="The demo trainer: SGD over HTTP, queue-proxy metrics, node replays."
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--node", type=_node, action="append", default=[], help="NODE=NAMESPACE/POD")
    args = parser.parse_args(argv)
    Handler.nodes = dict(args.node)
    Handler.started = time.monotonic()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
