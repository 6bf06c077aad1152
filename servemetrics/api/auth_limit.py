"""Failed-authentication limiting per client address: ``FailedAuthLimiter``.

A request that presents a key which is not stored is a failure of its client (the remote address of the
connection). After ``max_failures`` failures within ``window_ms``, every request of that client that needs
a key is refused with 429 before its key is looked up (a correct key too: otherwise the 429 itself would
tell a wrong guess from a right one) until its oldest counted failure is ``window_ms`` old. Requests
without an ``Authorization`` header, or with a malformed one, are not guesses and are not counted;
successes do not reset the count (a client holding one valid key could otherwise reset it between
guesses). Configured by the config's ``auth_rate_limit`` (docs/security.md).

Times are epoch ms from the service's clock. Memory is bounded: at most ``max_clients`` addresses are
tracked (the one whose newest failure is oldest is forgotten first), each with at most ``max_failures``
timestamps.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from servemetrics.api.errors import ApiError

RATE_LIMITED = "Rate limit exceeded. Please try again later."
"""The 429 message (the spec's management API body, platform-facts §5)."""
T = TypeVar("T")
MAX_CLIENTS = 100_000
"""Most client addresses whose failures are remembered at once."""


class FailedAuthLimiter:
    """Counts failed authentications per client and refuses a client over the limit.

    Args:
        max_failures: failures allowed within the window (0: no limit, nothing is counted).
        window_ms: the window, ms.
        clock: epoch-ms now.
        max_clients: most addresses tracked at once.
    """

    def __init__(
        self,
        max_failures: int,
        window_ms: int,
        clock: Callable[[], int],
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.max_failures = max_failures
        self.window_ms = window_ms
        self._clock = clock
        self._max_clients = max_clients
        self._failures: dict[str, deque[int]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now_ms: int) -> deque[int] | None:
        """The client's failures inside the window (older ones dropped); None when it has none."""
        times = self._failures.get(client)
        if times is None:
            return None
        while times and times[0] <= now_ms - self.window_ms:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times

    def retry_after_s(self, client: str) -> int | None:
        """Whole seconds (at least 1) until ``client`` may authenticate again, or None when it may now."""
        if self.max_failures <= 0:
            return None
        with self._lock:
            now = self._clock()
            times = self._recent(client, now)
            if times is None or len(times) < self.max_failures:
                return None
            return max(1, -(-(times[0] + self.window_ms - now) // 1000))

    def check(self, client: str) -> None:
        """Raise ``ApiError`` 429 (``retry_after`` seconds, also the ``Retry-After`` header) when
        ``client`` is over the limit."""
        wait = self.retry_after_s(client)
        if wait is not None:
            raise ApiError(429, RATE_LIMITED, wait)

    def counted(self, client: str, key: T | None) -> T | None:
        """``key`` (the outcome of looking up the client's key), after counting a failure of ``client``
        when it is None."""
        if key is None:
            self.failed(client)
        return key

    def failed(self, client: str) -> None:
        """Count one failed authentication of ``client`` now."""
        if self.max_failures <= 0:
            return
        with self._lock:
            now = self._clock()
            times = self._recent(client, now)
            if times is None:
                times = deque(maxlen=self.max_failures)
            else:
                del self._failures[client]  # re-inserted last: the dict stays ordered by newest failure
            while len(self._failures) >= self._max_clients:
                del self._failures[next(iter(self._failures))]  # the client whose newest failure is oldest
            times.append(now)
            self._failures[client] = times


def unlimited() -> FailedAuthLimiter:
    """A limiter that counts nothing and refuses no one (``failures: 0``)."""
    return FailedAuthLimiter(0, 60_000, lambda: 0)


def client_address(client: tuple[str, int] | None) -> str:
    """The address a request's failures are counted under: the connection's remote host (``""`` when the
    server does not know it). Behind a reverse proxy this is the proxy's address: every client behind it
    shares one count."""
    return client[0] if client else ""
