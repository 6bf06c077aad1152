"""A custom model server with its own ``prometheus_client`` metrics ("bring your own server", issue 15).

It counts requests and their latency the way prometheus-fastapi-instrumentator does, under its names
(``http_requests_total{handler, method, status}`` with grouped status classes such as ``2xx``, and the
``http_request_duration_seconds{handler, method}`` histogram), for every route, ``/health`` and
``/metrics`` included, and exposes metrics of its own: a ``queue_depth`` gauge, a ``tokenizer_seconds``
histogram and ``--extra N`` series of ``extra_series_total{i}`` (to exceed ``custom_series_limit``), plus
``baseten_private_gauge``, a name the service reserves. servemetrics maps the request metrics onto
``baseten_inference_requests_total`` and ``baseten_end_to_end_response_time_seconds`` and keeps the rest
as custom metrics (docs/ingest.md "Custom servers", "Custom metrics").

The gateway's contract (README "Bring your own server"): ``POST /predict`` answers the body it is sent
(here ``{"ok": true}``), ``GET /health`` answers 200 while healthy.

``POST /predict?status=500&seconds=0.7`` answers that status and records ``seconds`` as the request's
latency (exact values for tests; default: the time taken). ``--queue-depth`` sets ``queue_depth`` and
``--tokenizer 0.05,0.3`` records those ``tokenizer_seconds`` observations at start.

    python examples/custom_server.py --port 9201 [--extra 6] [--queue-depth 7] [--tokenizer 0.05,0.3]
    curl -X POST 'localhost:9201/predict?seconds=0.2' -d '{"prompt": "hi"}'
"""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

REGISTRY = CollectorRegistry()
REQUESTS = Counter(
    "http_requests",
    "Requests by handler, method and status class.",
    ["handler", "method", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "http_request_duration_seconds",
    "Request latency by handler and method.",
    ["handler", "method"],
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
QUEUE = Gauge("queue_depth", "Requests waiting in the server's own queue.", registry=REGISTRY)
TOKENIZER = Histogram(
    "tokenizer_seconds", "Tokenizer time per request.", buckets=(0.1, 0.5, 1.0), registry=REGISTRY
)
EXTRA = Counter("extra_series", "Filler series (one per i).", ["i"], registry=REGISTRY)
RESERVED = Gauge("baseten_private_gauge", "A name in the service's reserved namespace.", registry=REGISTRY)


def _number(query: dict[str, list[str]], name: str) -> float | None:
    return float(query[name][0]) if name in query else None


class Handler(BaseHTTPRequestHandler):
    """``POST /predict``, ``GET /health``, ``GET /metrics``; every request counted."""

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: no line per request."""

    def _answer(
        self, status: int, body: bytes, content_type: str, seconds: float | None, started: float
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        path = urlparse(self.path).path
        REQUESTS.labels(path, self.command, f"{status // 100}xx").inc()
        LATENCY.labels(path, self.command).observe(time.monotonic() - started if seconds is None else seconds)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        started = time.monotonic()
        path = urlparse(self.path).path
        if path == "/metrics":
            self._answer(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST, None, started)
        elif path == "/health":
            self._answer(200, b'{"healthy": true}', "application/json", None, started)
        else:
            self._answer(404, b'{"error": "no such path"}', "application/json", None, started)

    def do_POST(self) -> None:  # noqa: N802
        started = time.monotonic()
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if url.path == "/predict":
            status = int(_number(query, "status") or 200)
            body = json.dumps({"ok": status < 400}).encode()
            self._answer(status, body, "application/json", _number(query, "seconds"), started)
        else:
            self._answer(404, b'{"error": "no such path"}', "application/json", None, started)


def main() -> None:
    """Serve on ``--port`` until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9201)
    parser.add_argument("--extra", type=int, default=0, help="extra_series_total series (i = 0 .. N-1)")
    parser.add_argument("--queue-depth", type=float, default=0.0)
    parser.add_argument("--tokenizer", default="", help="comma-separated tokenizer_seconds observations")
    args = parser.parse_args()
    RESERVED.set(1)
    QUEUE.set(args.queue_depth)
    for seconds in filter(None, args.tokenizer.split(",")):
        TOKENIZER.observe(float(seconds))
    for i in range(args.extra):
        EXTRA.labels(str(i)).inc(i + 1)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
