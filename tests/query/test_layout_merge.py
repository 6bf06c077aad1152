"""``quantiles.merge_layouts`` / ``cumulative_at``: histograms of different bucket layouts combined at the
union of their bounds (values derived by hand next to each assertion)."""

from __future__ import annotations

import math

import pytest

from servemetrics.query.quantiles import bucket_quantile, cumulative_at, merge_layouts

INF = math.inf


def test_cumulative_at_own_inside_below_beyond_and_inf() -> None:
    bounds, counts = [0.1, 0.2, INF], [2.0, 4.0, 5.0]
    assert cumulative_at(0.2, bounds, counts) == 4.0  # own bound: exact
    assert cumulative_at(0.15, bounds, counts) == pytest.approx(3.0)  # 2 + 2 * 0.05 / 0.1
    assert cumulative_at(0.05, bounds, counts) == pytest.approx(1.0)  # from 0: 2 * 0.05 / 0.1
    assert cumulative_at(7.0, bounds, counts) == 4.0  # beyond 0.2: the +Inf bucket's 1 has no known value
    assert cumulative_at(INF, bounds, counts) == 5.0
    assert cumulative_at(7.0, [0.1, 0.2], [2.0, 4.0]) == 4.0  # no +Inf bucket: its last count


def test_one_layout_adds_per_bound() -> None:
    a = [(0.1, 1.0), (INF, 3.0)]
    b = [(0.1, 2.0), (INF, 2.0)]
    assert merge_layouts([a, b]) == [(0.1, 3.0), (INF, 5.0)]


def test_two_layouts_give_the_mixture_quantile() -> None:
    """a: 4 observations in (0, 1] (layout 1, +Inf); b: 4 in (0.5, 2] (layout 0.5, 2, +Inf, none <= 0.5).
    At the union: 0.5 -> a 4 * 0.5 = 2, b 0; 1 -> a 4, b 4 * 0.5 / 1.5 = 1.333; 2 -> 8; +Inf 8.
    p50 (rank 4) in (0.5, 1]: 0.5 + 0.5 * (4 - 2) / (5.333 - 2) = 0.8."""
    a = [(1.0, 4.0), (INF, 4.0)]
    b = [(0.5, 0.0), (2.0, 4.0), (INF, 4.0)]
    merged = merge_layouts([a, b])
    assert merged == [(0.5, 2.0), (1.0, pytest.approx(4 + 4 / 3)), (2.0, 8.0), (INF, 8.0)]
    bounds, counts = zip(*merged, strict=True)
    assert bucket_quantile(0.5, bounds, counts) == pytest.approx(0.5 + 0.5 * 2 / (4 / 3 + 2))
