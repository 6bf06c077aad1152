"""``TeamLimiter``: a bucket per team and kind, full at first, refilled at limit / 60 per second."""

from __future__ import annotations

from servemetrics.gateway.team_limits import TeamLimiter
from servemetrics.registry.model_apis import RateLimits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


A, B = (1, "chat", "team-a"), (1, "chat", "team-b")


def test_requests_per_minute_admit_the_budget_then_refill() -> None:
    clock = Clock()
    limiter, limits = TeamLimiter(clock), RateLimits(requests_per_minute=6)
    assert [limiter.admit(A, limits) for _ in range(8)] == [None] * 6 + [10, 10]  # 1 request / 10 s
    assert limiter.admit(B, limits) is None  # another team has its own bucket
    clock.now += 4.0
    assert limiter.admit(A, limits) == 6  # 0.4 of a request refilled: 6 s more
    clock.now += 6.0
    assert limiter.admit(A, limits) is None
    assert limiter.admit(A, limits) == 10


def test_tokens_are_charged_after_the_answer_and_may_overdraw() -> None:
    clock = Clock()
    limiter, limits = TeamLimiter(clock), RateLimits(tokens_per_minute=600)  # 10 tokens / s
    assert limiter.admit(A, limits) is None
    limiter.charge(A, limits, 650)  # 50 below zero
    assert limiter.admit(A, limits) == 6  # ceil(50 / 10 s)
    clock.now += 5.0
    assert limiter.admit(A, limits) == 1  # at 0: just short of positive
    clock.now += 1.0
    assert limiter.admit(A, limits) is None


def test_no_limit_admits_everything() -> None:
    limiter = TeamLimiter(Clock())
    assert all(limiter.admit(A, RateLimits()) is None for _ in range(1000))
    limiter.charge(A, RateLimits(), 10**9)
    assert limiter.admit(A, RateLimits()) is None
