"""Requests per organization per minute on the export endpoint: ``ExportRateLimit``.

The platform allows **6 requests per minute per organization** on ``GET /metrics`` and answers 429 above
that (platform-facts §2). A request is counted when its key is authenticated and may read metrics; the
7th within any 60 s is refused with 429, ``Retry-After`` and ``{"error": ..., "retry_after": N}`` (the
API's 429 path: ``errors.ApiError``) until the oldest counted request is 60 s old. Refused requests are
not counted (a scraper that retries too fast is not locked out for longer). Memory: one deque of at most
``limit`` timestamps per organization that called.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from servemetrics.api.auth_limit import RATE_LIMITED
from servemetrics.api.errors import ApiError

EXPORT_REQUESTS_PER_MINUTE = 6
"""platform-facts §2: the export endpoint's rate limit per organization."""
WINDOW_MS = 60_000


class ExportRateLimit:
    """A sliding 60 s window of counted requests per organization.

    Args:
        clock: epoch-ms now (the service's clock; tests pin it).
        limit: requests allowed per window (``EXPORT_REQUESTS_PER_MINUTE``).
        window_ms: the window, ms.
    """

    def __init__(
        self, clock: Callable[[], int], limit: int = EXPORT_REQUESTS_PER_MINUTE, window_ms: int = WINDOW_MS
    ) -> None:
        self._clock, self.limit, self.window_ms = clock, limit, window_ms
        self._times: dict[int, deque[int]] = {}
        self._lock = threading.Lock()

    def admit(self, organization_id: int) -> None:
        """Count one request of the organization now.

        Raises:
            ApiError: 429 with ``retry_after`` (whole seconds, at least 1) when ``limit`` requests of
                the organization were counted within the last ``window_ms``.
        """
        with self._lock:
            now = self._clock()
            times = self._times.setdefault(organization_id, deque())
            while times and times[0] <= now - self.window_ms:
                times.popleft()
            if len(times) >= self.limit:
                wait = max(1, -(-(times[0] + self.window_ms - now) // 1000))
                raise ApiError(
                    429,
                    (
                        f"{RATE_LIMITED} GET /metrics answers {self.limit} requests per minute per "
                        "organization: scrape it every 60 s"
                    ),
                    wait,
                )
            times.append(now)
