"""The management API's rate limits per API key and endpoint: ``ApiRateLimiter`` (platform-facts §4
"Management API rate limits"; docs/security.md "Management API rate limits").

The limits are per API key (its stored key id, never the secret) and each endpoint is tracked
separately. An endpoint is the method and route template, ``POST
/v1/models/{model_id}/deployments/{deployment_id}/activate``: ``development``, ``production`` and a
deployment id in the path are one endpoint with one budget (and so are all models' deployments). Limits
(``endpoint_rule``, config ``api_rate_limit``):

- ``POST …/deployments/{deployment_id}/activate`` and ``/deactivate``: ``activate_per_minute`` (20);
- ``POST …/deployments/{deployment_id}/retry``: ``retry_per_minute`` (10);
- every other route under ``/v1/`` that authenticates through ``deps.authenticate``: ``per_second``
  (100). Not counted: ``POST /v1/import`` (ingest, admitted by the ingest workers' own 503), and the
  routes that do not go through ``authenticate``: the gateway's inference paths (``predict``, ``sync``,
  ``async_predict``, ``async_requests``), ``/api/v1/write``, ``/metrics``, ``/healthz``, the dashboard.

Algorithm: a sliding window log. Each (key, endpoint) keeps the times of its admitted requests inside
the last window (1 s or 60 s); a request is admitted while fewer than the limit are there. Chosen over a
token bucket because it is exactly the documented rule, never more than N requests in any window, and
its ``retry_after`` is the time until the oldest counted request leaves the window (the spec's example
``"retry_after": 37`` is such a wait on a per-minute limit; a 20 per minute bucket would never say more
than 3 s). Refused requests are not counted (a client that keeps calling is let in once the window
allows). A clock that steps back drops the entries it now puts in the future, so a key is never held
longer than one window.

Times are epoch ms from the service's clock. Memory is bounded: at most ``max_tracked`` (key, endpoint)
pairs (the least recently used one is forgotten first; pairs idle for longer than their window are
dropped as other requests arrive), each with at most its limit of timestamps. Thread-safe (one lock).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from servemetrics.api.auth_limit import RATE_LIMITED
from servemetrics.api.errors import ApiError

MAX_TRACKED = 100_000
"""Most (key, endpoint) pairs whose requests are remembered at once."""
SECOND_MS, MINUTE_MS = 1_000, 60_000
NOT_COUNTED = frozenset({"POST /v1/import"})
"""Endpoints under ``/v1/`` that authenticate but are not the management API (ingest)."""
_PER_MINUTE = {
    "/deployments/{deployment_id}/activate": "activate",
    "/deployments/{deployment_id}/deactivate": "activate",
    "/deployments/{deployment_id}/retry": "retry",
}
"""Route template endings of the per-minute rules (POST only) -> the rule."""


@dataclass(frozen=True)
class Rule:
    """``limit`` requests per ``window_ms`` (0: no limit)."""

    limit: int
    window_ms: int


def endpoint_name(method: str, template: str) -> str:
    """``"POST /v1/models/{model_id}/deployments/{deployment_id}/activate"``: what is counted as one
    endpoint (the method in upper case and the route template, not the concrete path)."""
    return f"{method.upper()} {template}"


class ApiRateLimiter:
    """Counts each API key's requests per endpoint and refuses those over the endpoint's limit.

    Args:
        per_second: requests per second of every counted endpoint without a rule of its own (0: off).
        activate_per_minute: requests per minute of ``POST …/deployments/{deployment_id}/activate`` and
            of ``…/deactivate``, each its own endpoint (0: off).
        retry_per_minute: requests per minute of ``POST …/deployments/{deployment_id}/retry`` (0: off).
        clock: epoch-ms now.
        max_tracked: most (key, endpoint) pairs tracked at once.
    """

    def __init__(
        self,
        per_second: int,
        activate_per_minute: int,
        retry_per_minute: int,
        clock: Callable[[], int],
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        self._rules = {
            "default": Rule(per_second, SECOND_MS),
            "activate": Rule(activate_per_minute, MINUTE_MS),
            "retry": Rule(retry_per_minute, MINUTE_MS),
        }
        self._clock = clock
        self._max_tracked = max_tracked
        self._admitted: dict[tuple[int, str], tuple[Rule, deque[int]]] = {}
        self._lock = threading.Lock()

    def endpoint_rule(self, method: str, template: str) -> Rule | None:
        """The rule of route ``template`` called with ``method`` (module docstring), None when the route
        is not counted (not under ``/v1/``, or ingest) or its limit is 0."""
        if not template.startswith("/v1/") or endpoint_name(method, template) in NOT_COUNTED:
            return None
        special = next((name for end, name in _PER_MINUTE.items() if template.endswith(end)), None)
        rule = self._rules[special if special is not None and method.upper() == "POST" else "default"]
        return rule if rule.limit > 0 else None

    def check(self, key_id: int, method: str, template: str) -> None:
        """Count one request of key ``key_id`` to the endpoint ``method`` ``template`` now.

        Raises:
            ApiError: 429 ``Rate limit exceeded. Please try again later.`` with ``retry_after`` (whole
                seconds, at least 1; also the ``Retry-After`` header) when the key already made the
                endpoint's limit of requests within its window; the refused request is not counted.
        """
        rule = self.endpoint_rule(method, template)
        if rule is None:
            return
        wait = self._admit((key_id, endpoint_name(method, template)), rule)
        if wait is not None:
            raise ApiError(429, RATE_LIMITED, wait)

    def _admit(self, pair: tuple[int, str], rule: Rule) -> int | None:
        """Count a request of ``pair`` now and return None, or the whole seconds to wait when full."""
        with self._lock:
            now = self._clock()
            held = self._admitted.pop(pair, None)
            times: deque[int] = deque(maxlen=rule.limit) if held is None else held[1]
            _recent(times, now, rule.window_ms)
            self._admitted[pair] = (rule, times)  # last: the dict stays ordered by last use
            if len(times) >= rule.limit:
                return max(1, -(-(times[0] + rule.window_ms - now) // 1000))
            times.append(now)
            self._forget(now)
            return None

    def _forget(self, now: int) -> None:
        """Drop the least recently used pairs while there are more than ``max_tracked``, then up to two of
        the least recently used ones that were idle for a whole window (a little cleanup per request)."""
        while len(self._admitted) > self._max_tracked:
            del self._admitted[next(iter(self._admitted))]
        for pair, (rule, times) in list(itertools.islice(self._admitted.items(), 2)):
            if times and times[-1] > now - rule.window_ms:
                break
            del self._admitted[pair]

    def tracked(self) -> int:
        """How many (key, endpoint) pairs are remembered now."""
        with self._lock:
            return len(self._admitted)


def _recent(times: deque[int], now_ms: int, window_ms: int) -> None:
    """Drop from ``times`` (ascending epoch ms) what is outside ``(now_ms - window_ms, now_ms]``."""
    while times and times[0] <= now_ms - window_ms:
        times.popleft()
    while times and times[-1] > now_ms:  # the clock stepped back
        times.pop()


def unlimited() -> ApiRateLimiter:
    """A limiter that counts nothing and refuses no one (every limit 0)."""
    return ApiRateLimiter(0, 0, 0, lambda: 0)
