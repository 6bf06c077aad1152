"""The demo's load: Poisson arrivals through the gateway, and a local receiver for async webhooks.

Each arrival picks a request kind (weights in ``MIX``): valid predictions with small, medium or large
prompts (about 60 B, 1 KB, 16 KB) and 8, 32 or 64 tokens, a ``REPEAT`` share of them one of
``REPEATED`` fixed prompts of their size (so the replicas' prefix caches get hits); malformed bodies
(not JSON, no prompt, too many tokens: the replica answers 400); model faults (``"fault": true``: the
replica answers 500); and, when the service has the ``async_predict`` route, async requests whose
webhook points at ``WebhookReceiver``.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from servemetrics.demo.model import CORPUS

MIX = {"small": 40, "medium": 22, "large": 8, "malformed": 10, "fault": 6, "async": 14}
SIZES = {"small": (60, 8), "medium": (1024, 32), "large": (16384, 64)}
REPEAT = 0.3
"""Share of the valid prompts that repeat one of the fixed prompts of their size."""
REPEATED = 4
"""Fixed prompts per size."""
MALFORMED: list[bytes] = [
    b"this is not json",
    json.dumps({"text": "no prompt field"}).encode(),
    json.dumps({"prompt": "too many", "max_tokens": 10_000}).encode(),
    json.dumps(["a", "list"]).encode(),
]


def has_async_route(base: str) -> bool:
    """Whether the service's OpenAPI lists an ``…/async_predict`` path (the route may not exist yet)."""
    try:
        paths = httpx.get(f"{base}/openapi.json", timeout=10).json().get("paths", {})
    except (httpx.HTTPError, ValueError):
        return False
    return any(p.endswith("/async_predict") for p in paths)


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records every JSON body POSTed to it (async results)."""

    def __init__(self, port: int) -> None:
        self.received: list[dict[str, Any]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"unparsed": body.decode("utf-8", "replace")}
                with lock:
                    received.append(payload)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.url = f"http://127.0.0.1:{port}/webhook"
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LoadGenerator:
    """Sends Poisson arrivals at ``rate`` per second to the environment until ``stop``; counts outcomes."""

    def __init__(
        self, base: str, api_key: str, model: str, env: str, rate: float, webhook: str | None, seed: int = 1
    ) -> None:
        self.url = f"{base}/v1/models/{model}/environments/{env}"
        self.rate = rate
        self.webhook = webhook
        self.rng = random.Random(seed)
        self.text = " ".join(Path(CORPUS).read_text().split())
        self.repeated = {s: [self._new_prompt(s) for _ in range(REPEATED)] for s, _ in SIZES.values()}
        self.client = httpx.Client(headers={"Authorization": f"Api-Key {api_key}"}, timeout=60)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=48, thread_name_prefix="demo-load")
        self._thread = threading.Thread(target=self._arrivals, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop arrivals and wait for the requests in flight."""
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.client.close()

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def _prompt(self, size: int) -> str:
        """A prompt of ``size`` characters: one of the fixed ones (``REPEAT`` of the time) or a new one."""
        if self.rng.random() < REPEAT:
            return self.rng.choice(self.repeated[size])
        return self._new_prompt(size)

    def _new_prompt(self, size: int) -> str:
        start = self.rng.randrange(len(self.text))
        return ((self.text + " ") * (size // len(self.text) + 2))[start : start + size]

    def _arrivals(self) -> None:
        kinds = [k for k in MIX if k != "async" or self.webhook]
        weights = [MIX[k] for k in kinds]
        while not self._stop.wait(self.rng.expovariate(self.rate)):
            kind = self.rng.choices(kinds, weights)[0]
            self._pool.submit(self._send, kind, self._body(kind))

    def _body(self, kind: str) -> bytes:
        if kind == "malformed":
            return self.rng.choice(MALFORMED)
        size, tokens = SIZES["medium" if kind == "async" else kind if kind in SIZES else "small"]
        req: dict[str, Any] = {"prompt": self._prompt(size), "max_tokens": tokens}
        if kind == "fault":
            req["fault"] = True
        if kind == "async":
            return json.dumps({"model_input": req, "webhook_endpoint": self.webhook}).encode()
        return json.dumps(req).encode()

    def _send(self, kind: str, body: bytes) -> None:
        try:
            if kind == "async":
                resp = self.client.post(f"{self.url}/async_predict", content=body)
                self._count(f"async {resp.status_code}")
                return
            with self.client.stream("POST", f"{self.url}/predict", content=body) as resp:
                for _ in resp.iter_raw():
                    pass
            self._count(f"{resp.status_code // 100}xx")
        except httpx.HTTPError as exc:
            self._count(f"error {type(exc).__name__}")
