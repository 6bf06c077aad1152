"""Rate limits of the Model APIs, per team: requests and tokens per minute (docs/model-apis.md "Rate
limits").

Each (organization, Model API, team, kind) has a token bucket holding at most the per-minute limit and
refilled at limit / 60 per second, full at first use: a team may send its whole minute's budget at once
and then its limit per minute on average. A request takes one from the requests bucket and needs a
tokens bucket above 0; its tokens (input + output, known only once it answered) are taken afterwards
(``charge``), so the bucket may go below 0 and refuses the next requests until it refills. A refused
request is told when to retry: the seconds until its bucket holds what it needs, rounded up, at least 1.
Counted per service process (as the gateway's backpressure: docs/gateway.md "Several instances").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from servemetrics.registry.model_apis import RateLimits

Key = tuple[int, str, str]
"""(organization id, Model API name, team id)."""


@dataclass
class _Bucket:
    level: float
    at_s: float


class TeamLimiter:
    """The buckets of every team; ``clock_s`` is monotonic seconds (tests drive their own)."""

    def __init__(self, clock_s: Callable[[], float]) -> None:
        self._clock = clock_s
        self._buckets: dict[tuple[Key, str], _Bucket] = {}

    def _bucket(self, key: Key, kind: str, limit: int) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get((key, kind))
        if bucket is None:
            bucket = self._buckets[(key, kind)] = _Bucket(float(limit), now)
        bucket.level = min(float(limit), bucket.level + (now - bucket.at_s) * limit / 60.0)
        bucket.at_s = now
        return bucket

    def admit(self, key: Key, limits: RateLimits) -> int | None:
        """Take one request of ``key``'s team under ``limits``: None when admitted, else the seconds to
        wait before retrying (nothing taken)."""
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        requests = self._bucket(key, "requests", rpm) if rpm is not None else None
        tokens = self._bucket(key, "tokens", tpm) if tpm is not None else None
        waits = []
        if requests is not None and rpm is not None and requests.level < 1.0:
            waits.append((1.0 - requests.level) * 60.0 / rpm)
        if tokens is not None and tpm is not None and tokens.level <= 0.0:
            waits.append((1e-9 - tokens.level) * 60.0 / tpm)
        if waits:
            return max(1, math.ceil(max(waits)))
        if requests is not None:
            requests.level -= 1.0
        return None

    def charge(self, key: Key, limits: RateLimits, tokens: int) -> None:
        """Take the ``tokens`` an admitted request used from its team's tokens bucket (if limited)."""
        if limits.tokens_per_minute is not None and tokens > 0:
            self._bucket(key, "tokens", limits.tokens_per_minute).level -= tokens
