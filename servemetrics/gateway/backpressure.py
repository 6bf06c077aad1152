"""Per-deployment admission: at most ``capacity`` requests in flight, the rest queued FIFO or rejected.

``capacity`` is the deployment's ``concurrency_target`` x its replicas passing health checks. Policies
(``request_backpressure_settings.policy``): ``QUEUE_ON_FULL`` (the default) waits in a bounded FIFO
queue; ``REJECT_ON_FULL`` is refused at once. A full queue or a wait longer than ``queue_timeout_s`` is
refused too (``Full``), with a retry hint in seconds.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

QUEUE_ON_FULL = "QUEUE_ON_FULL"
REJECT_ON_FULL = "REJECT_ON_FULL"


class Full(Exception):
    """The deployment is at capacity; ``retry_after_s`` is whole seconds to wait before retrying."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Gate:
    """Admission control of one deployment.

    Args:
        capacity: requests allowed in flight at once.
        queue_limit: queued requests allowed (QUEUE_ON_FULL); beyond it requests are refused.
        queue_timeout_s: seconds a request may wait in the queue before it is refused.
    """

    def __init__(self, capacity: int, queue_limit: int = 1000, queue_timeout_s: float = 60.0) -> None:
        self.capacity = capacity
        self.queue_limit = queue_limit
        self.queue_timeout_s = queue_timeout_s
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.mean_latency_s = 0.0

    @property
    def queued(self) -> int:
        """Requests waiting for a slot."""
        return len(self._waiters)

    def retry_after_s(self) -> int:
        """Seconds a refused client should wait: the mean response time rounded up, at least 1."""
        return max(1, math.ceil(self.mean_latency_s))

    async def enter(self, policy: str | None) -> None:
        """Take a slot, waiting in the queue under QUEUE_ON_FULL; raises ``Full`` when refused."""
        if self.in_flight < self.capacity and not self._waiters:
            self.in_flight += 1
            return
        if policy == REJECT_ON_FULL:
            raise Full(f"the deployment is at capacity ({self.capacity} in flight)", self.retry_after_s())
        if len(self._waiters) >= self.queue_limit:
            raise Full(f"the deployment's queue is full ({self.queue_limit} waiting)", self.retry_after_s())
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.queue_timeout_s)
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                self.leave()  # a slot was granted as we gave up: hand it on
            else:
                fut.cancel()
                if fut in self._waiters:
                    self._waiters.remove(fut)
            if isinstance(exc, TimeoutError):
                raise Full(
                    f"waited {self.queue_timeout_s:g} s in the deployment's queue", self.retry_after_s()
                ) from None
            raise

    def leave(self, latency_s: float | None = None) -> None:
        """Free a slot (and fold ``latency_s`` into the mean used for retry hints)."""
        self.in_flight -= 1
        if latency_s is not None:
            self.mean_latency_s = 0.9 * self.mean_latency_s + 0.1 * latency_s
        self._wake()

    def set_capacity(self, capacity: int) -> None:
        """Change the capacity (replicas came or went); admits queued requests that now fit."""
        self.capacity = capacity
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.capacity:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)
