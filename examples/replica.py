"""A small model replica that serves ``/metrics`` with ``prometheus_client`` (for the example and tests).

It exports the platform's request metrics under their canonical names and a replicas gauge, plus the
process collector (CPU seconds, resident memory). Requests are recorded by ``POST /observe`` (exact, for
tests) or simulated with ``--simulate RPS`` (for the example).

    python examples/replica.py --port 9101 [--simulate 5]
    curl -X POST 'localhost:9101/observe?status=200&seconds=0.25&count=3'
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.process_collector import ProcessCollector

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
REQUESTS = Counter(
    "baseten_inference_requests", "Requests by status.", ["status_code", "is_async"], registry=REGISTRY
)
LATENCY = Histogram(
    "baseten_end_to_end_response_time_seconds",
    "End-to-end time.",
    ["is_async"],
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
ACTIVE = Gauge("baseten_replicas_active", "Active replicas.", registry=REGISTRY)
ACTIVE.set(1)


def observe(status: str, seconds: float, count: int = 1) -> None:
    """Record ``count`` requests with this status code and end-to-end time in seconds."""
    for _ in range(count):
        REQUESTS.labels(status, "false").inc()
        LATENCY.labels("false").observe(seconds)


class Handler(BaseHTTPRequestHandler):
    """``GET /metrics`` and ``POST /observe?status=&seconds=&count=``."""

    def do_GET(self) -> None:  # noqa: N802
        if urlparse(self.path).path != "/metrics":
            self.send_error(404)
            return
        body = generate_latest(REGISTRY)
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path != "/observe":
            self.send_error(404)
            return
        observe(q.get("status", "200"), float(q.get("seconds", "0.1")), int(q.get("count", "1")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def simulate(rps: float) -> None:
    """Record about ``rps`` requests per second forever (2 % 5xx, 3 % 4xx, lognormal latency)."""
    rng = random.Random(7)
    while True:
        time.sleep(1.0 / rps)
        r = rng.random()
        status = "500" if r < 0.02 else "429" if r < 0.05 else "200"
        observe(status, rng.lognormvariate(-2.0, 0.6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--simulate", type=float, default=0.0, help="requests per second to simulate")
    args = parser.parse_args()
    if args.simulate > 0:
        threading.Thread(target=simulate, args=(args.simulate,), daemon=True).start()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
