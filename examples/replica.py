"""A small model replica that serves ``/metrics`` with ``prometheus_client`` (for the example and tests).

It exports the platform's request metrics under their canonical names and a replicas gauge, plus the
process collector (CPU seconds, resident memory). Requests are recorded by ``POST /observe`` (exact, for
tests) or simulated with ``--simulate RPS`` (for the example).

It also serves as a model behind the gateway (docs/gateway.md):

- ``POST /predict`` streams ``tokens`` tokens (chunked; ``text/event-stream`` events when the request
  accepts them or ``sse=1``), one every ``token_ms`` ms (``--token-ms``, default 20), after ``delay_ms``
  ms. ``status=500`` (any code) answers that status with a short JSON body instead. Every answer names
  the replica (``--name``) in ``X-Replica``; ``server_timing=<value>`` adds a ``Server-Timing: <value>``
  header (``inference;dur=123.4``: the inference time the gateway meters, docs/gateway.md). Other paths
  (``/echo`` ...) answer the method, path and body.
- ``GET /health`` is 200 while healthy; ``POST /health?healthy=0`` makes it answer 503 (``=1`` heals).
  ``--healthy-after S`` makes it 503 for the first ``S`` seconds after start (a model loading).

    python examples/replica.py --port 9101 [--simulate 5] [--token-ms 20] [--name r1] [--healthy-after 3]
    curl -X POST 'localhost:9101/observe?status=200&seconds=0.25&count=3'
    curl -N -X POST 'localhost:9101/predict?tokens=5&delay_ms=100' -d '{"prompt": "hi"}'
"""

from __future__ import annotations

import argparse
import json
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


class Model:
    """What ``/predict`` and ``/health`` do (set from the command line)."""

    name = "replica"
    token_ms = 20.0
    healthy = True
    healthy_from = 0.0  # time.monotonic() from which /health may answer 200 (--healthy-after)


class Handler(BaseHTTPRequestHandler):
    """``GET /metrics``, ``GET /health``, ``POST /observe``, ``POST /predict``, ``POST /health`` and
    an echo of any other path and method (HEAD: its headers only; HTTP/1.1 with keep-alive, so a
    gateway can pool connections).

    ``TCP_NODELAY`` is set and a whole answer goes out in one write: with Nagle on, a body written
    after its headers waits for the client's delayed ACK of the headers (about 40 ms on Linux)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        """Status line, headers and ``body`` in one write."""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self._headers_buffer.append(b"\r\n" + body)  # type: ignore[attr-defined]
        self.flush_headers()

    def _reply(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *extra]
        self._send(status, [*headers, ("X-Replica", Model.name)], body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _predict(self, q: dict[str, str]) -> None:
        # when this replica began the request (CLOCK_MONOTONIC, s): tests compare it across requests
        started = (("X-Replica-Started", f"{time.monotonic():.6f}"),)
        body = self._body()
        time.sleep(float(q.get("delay_ms", "0")) / 1000)
        status = int(q.get("status", "200"))
        timing = started + ((("Server-Timing", q["server_timing"]),) if "server_timing" in q else ())
        if status != 200:
            error = json.dumps({"error": f"asked for {status}", "replica": Model.name}).encode()
            self._reply(status, error, extra=timing)
            return
        sse = q.get("sse") == "1" or "text/event-stream" in self.headers.get("Accept", "")
        token_s = float(q.get("token_ms", Model.token_ms)) / 1000
        tokens = int(q.get("tokens", "5"))

        def chunk(i: int) -> bytes:
            token = f"{Model.name}-tok{i} (in {len(body)} B)"
            data = f"data: {token}\n\n".encode() if sse else f"{token}\n".encode()
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        headers = [
            ("Content-Type", "text/event-stream" if sse else "text/plain; charset=utf-8"),
            ("Transfer-Encoding", "chunked"),
            ("X-Replica", Model.name),
            *timing,
        ]
        # headers and the first token in one write; later tokens one write each, the last with the end
        first = chunk(0) if tokens > 0 else b""
        self._send(200, headers, first + (b"0\r\n\r\n" if tokens <= 1 else b""))
        for i in range(1, tokens):
            time.sleep(token_s)
            self.wfile.write(chunk(i) + (b"0\r\n\r\n" if i == tokens - 1 else b""))

    def do_GET(self) -> None:  # noqa: N802
        path = urlparse(self.path).path
        if path == "/health":
            ok = Model.healthy and time.monotonic() >= Model.healthy_from
            self._reply(200 if ok else 503, json.dumps({"status": "ok" if ok else "unhealthy"}).encode())
            return
        if path != "/metrics":
            self._echo()
            return
        body = generate_latest(REGISTRY)
        self._send(200, [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))], body)

    def do_POST(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/predict":
            self._predict(q)
            return
        if url.path == "/health":
            Model.healthy = q.get("healthy", "1") != "0"
            self._reply(200, json.dumps({"healthy": Model.healthy}).encode())
            return
        if url.path != "/observe":
            self._echo()
            return
        self._body()
        observe(q.get("status", "200"), float(q.get("seconds", "0.1")), int(q.get("count", "1")))
        self._send(204, [("Content-Length", "0")])

    def _echo(self) -> None:
        body = self._body().decode("utf-8", "replace")
        out = {"method": self.command, "path": self.path, "body": body, "replica": Model.name}
        self._reply(200, json.dumps(out).encode())

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _echo  # noqa: N815

    def do_HEAD(self) -> None:  # noqa: N802
        """The echo's status and headers without its body (every method the gateway passes on is answered)."""
        out = {"method": self.command, "path": self.path, "body": "", "replica": Model.name}
        length = len(json.dumps(out).encode())
        headers = [("Content-Type", "application/json"), ("Content-Length", str(length))]
        self._send(200, [*headers, ("X-Replica", Model.name)])

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
    parser.add_argument("--token-ms", type=float, default=20.0, help="ms between streamed tokens of /predict")
    parser.add_argument("--name", default=None, help="replica name in answers (default replica-PORT)")
    parser.add_argument("--healthy-after", type=float, default=0.0, help="/health is 503 this long (s)")
    args = parser.parse_args()
    Model.healthy_from = time.monotonic() + args.healthy_after
    Model.name = args.name or f"replica-{args.port}"
    Model.token_ms = args.token_ms
    if args.simulate > 0:
        threading.Thread(target=simulate, args=(args.simulate,), daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
