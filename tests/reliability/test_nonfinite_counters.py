"""Issue 12 part 13: a counter that reads NaN or +Inf in one scrape is a gap, not a reset (the parser drops
non-finite values, so the series is absent from that scrape: the rule of case C12). Through the real
``Scraper`` (bodies from an ``httpx.MockTransport``) on both local stores: 100, NaN, 101 counts 1."""

from __future__ import annotations

import pytest

from servemetrics.store.base import Store
from tests.scrape.answers import summary
from tests.scrape.test_continuity import REQ, REQS, scrape

CHILD = f'{REQS}baseten_inference_requests_total{{status_code="200"}}'


@pytest.mark.parametrize("odd", ["NaN", "+Inf", "-Inf"])
def test_a_non_finite_reading_is_a_gap_not_a_reset(store: Store, odd: str) -> None:
    scrape(store, [(0, f"{CHILD} 100\n"), (15, f"{CHILD} {odd}\n"), (30, f"{CHILD} 101\n")])
    assert summary(store, REQ, 0, 40) == [1.0, 0.0, 0.0]  # 2xx, 4xx, 5xx: 1, never 101


def test_a_non_finite_reading_between_two_increases(store: Store) -> None:
    """100, NaN, 103, +Inf, 110: 10 over the window, the gaps bridged by the samples around them."""
    values = ["100", "NaN", "103", "+Inf", "110"]
    scrape(store, [(15 * i, f"{CHILD} {v}\n") for i, v in enumerate(values)])
    assert summary(store, REQ, 0, 70) == [10.0, 0.0, 0.0]
