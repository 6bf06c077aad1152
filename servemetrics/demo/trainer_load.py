"""Load for the demo trainer: Poisson arrivals of training steps at a low rate, some bad and some faulty.

Mix (weights in ``MIX``): valid steps of 8 to 128 rows of a noisy linear target (200), malformed bodies
(wrong shape, not JSON, ``lr`` out of range: 400) and steps with ``"fault": true`` (500). Requests go
straight to the trainer, as they would reach the trainer pods through their Knative queue-proxy.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from servemetrics.demo.trainer import FEATURES

MIX = {"step": 85, "malformed": 10, "fault": 5}
MALFORMED: list[bytes] = [
    b"not json at all",
    json.dumps({"x": [[1.0, 2.0]], "y": [1.0]}).encode(),
    json.dumps({"x": [[0.0] * FEATURES], "y": [1.0], "lr": 5}).encode(),
]
TRUE_W = [0.5, -1.0, 2.0, 0.0, 1.5, -0.5, 0.25, 3.0]


class TrainerLoad:
    """Sends Poisson arrivals at ``rate`` per second to ``url`` (``…/v1/train_step``) until ``stop``."""

    def __init__(self, url: str, rate: float, seed: int = 2) -> None:
        self.url = url
        self.rate = rate
        self.rng = random.Random(seed)
        self.client = httpx.Client(timeout=30)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="demo-trainer-load")
        self._thread = threading.Thread(target=self._arrivals, daemon=True)

    def start(self) -> None:
        """Start the arrivals thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop arrivals and wait for the requests in flight."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.client.close()

    def body(self, kind: str) -> bytes:
        """A request body of ``kind`` (``step``, ``malformed`` or ``fault``)."""
        if kind == "malformed":
            return self.rng.choice(MALFORMED)
        rows = [[self.rng.gauss(0, 1) for _ in range(FEATURES)] for _ in range(self.rng.choice((8, 32, 128)))]
        ys = [sum(w * v for w, v in zip(TRUE_W, r, strict=True)) + self.rng.gauss(0, 0.1) for r in rows]
        return json.dumps(
            {"x": rows, "y": ys, "lr": 0.05, **({"fault": True} if kind == "fault" else {})}
        ).encode()

    def _arrivals(self) -> None:
        kinds, weights = list(MIX), list(MIX.values())
        while not self._stop.wait(self.rng.expovariate(self.rate)):
            kind = self.rng.choices(kinds, weights)[0]
            self._pool.submit(self._send, self.body(kind))

    def _send(self, body: bytes) -> None:
        try:
            status = self.client.post(self.url, content=body).status_code
            key = f"{status // 100}xx"
        except httpx.HTTPError as exc:
            key = f"error {type(exc).__name__}"
        with self._lock:
            self.counts[key] += 1
