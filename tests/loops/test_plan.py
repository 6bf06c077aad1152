"""``build_loops_plan``: defaults, the derived step, validation of step and divisor, the point grid."""

from __future__ import annotations

import pytest

from servemetrics.query.errors import WindowError
from servemetrics.query.loops_plan import (
    MAX_POINTS,
    LoopsRequestError,
    build_loops_plan,
    point_count,
    scrape_step,
)
from tests.query.helpers import T0

HOUR = 3_600_000


def plan(start=None, end=None, step=None, divisor=None, now=T0 + 10 * HOUR, scrape=15.0):
    return build_loops_plan("t1", (), start, end, step, divisor, now, scrape_interval_s=scrape)


def test_defaults_last_hour_30_s_steps_per_second():
    p = plan()
    assert (p.start_ms, p.end_ms) == (T0 + 9 * HOUR, T0 + 10 * HOUR)
    assert (p.step_s, p.divisor_s) == (30, 1)
    assert len(p.value_sets) == 120  # 3600 / 30, the window start is on the grid
    assert all(vs.deployment_ids == frozenset({"t1"}) for vs in p.value_sets)


@pytest.mark.parametrize(("hours", "step"), [(1, 30), (6, 60), (24, 300), (168, 1800)])
def test_derived_step_follows_the_series_ladder(hours, step):
    assert plan(start=T0, end=T0 + hours * HOUR).step_s == step


def test_points_start_at_the_window_start_then_on_the_step_grid():
    p = plan(start=T0 + 10_000, end=T0 + 70_000, step=30)
    # 10 s (window start), then the multiples of 30 s inside: 30 s, 60 s -> three points
    assert [vs.start_ms - T0 for vs in p.value_sets] == [10_000, 30_000, 60_000]
    assert [vs.end_ms - T0 for vs in p.value_sets] == [30_000, 60_000, 70_000]
    assert point_count(T0 + 10_000, T0 + 70_000, 30) == 3


def test_at_most_11000_points():
    # 7 days at 55 s: T0 is 30 s past a multiple of 55 s, so the grid starts at T0 + 25 s: the window
    # start plus ceil((604800 - 25) / 55) = 10996 grid points -> 10997 points
    assert len(plan(start=T0, end=T0 + 168 * HOUR, step=55).value_sets) == 10_997
    with pytest.raises(LoopsRequestError, match=r"step_seconds=54 gives 11200 points.*step_seconds >= 55"):
        plan(start=T0, end=T0 + 168 * HOUR, step=54)  # T0 on the 54 s grid: 604800 / 54 = 11200
    assert MAX_POINTS == 11_000


@pytest.mark.parametrize("field", ["step", "divisor"])
@pytest.mark.parametrize("value", [0, -30, 604_801])
def test_step_and_divisor_must_be_1_to_7_days(field, value):
    name = "step_seconds" if field == "step" else "time_divisor_seconds"
    with pytest.raises(LoopsRequestError, match=f"{name} must be a whole number of seconds from 1 to 604800"):
        plan(**{field: value})


def test_window_rules_are_the_model_endpoints():
    with pytest.raises(WindowError, match="must be earlier"):
        plan(start=T0 + HOUR, end=T0)
    with pytest.raises(WindowError, match="must not exceed 7 days"):
        plan(start=T0, end=T0 + 169 * HOUR)
    with pytest.raises(WindowError, match="looks like seconds"):
        plan(start=T0 // 1000, end=T0)


@pytest.mark.parametrize(
    ("scrape", "step", "least"),
    [(5.0, 1, 5), (5.0, 4, 5), (15.0, 14, 15), (7.5, 7, 8), (45.0, 30, 45)],
)
def test_a_step_below_the_scrape_interval_is_refused(scrape, step, least):
    # regression: with step 1 s and 5 s scrapes, most points had no sample and each remaining one was a
    # whole 5 s counter increase divided by 1 s (cpu_usage 5x too high)
    with pytest.raises(LoopsRequestError) as err:
        plan(start=T0, end=T0 + HOUR, step=step, scrape=scrape)
    assert str(err.value) == (
        f"step_seconds={step} is shorter than the scrape interval ({scrape:g} s): most points would hold "
        "no sample of the gauges (memory, GPU, utilisation), only gaps; "
        f"use step_seconds >= {least}, or omit step_seconds"
    )
    assert plan(start=T0, end=T0 + HOUR, step=least, scrape=scrape).step_s == least


@pytest.mark.parametrize(
    ("scrape", "rung"),
    [
        (1.0, 30),
        (15.0, 30),
        (30.0, 30),
        (30.5, 60),
        (45.0, 60),
        (600.0, 600),
        (601.0, 900),
        (90_000.5, 90_001),
    ],
)
def test_scrape_step_is_the_smallest_ladder_rung_at_or_above_the_interval(scrape, rung):
    assert scrape_step(scrape) == rung


@pytest.mark.parametrize(
    ("scrape", "hours", "step"),
    [
        (15.0, 1, 30),  # the ladder alone: its smallest rung (30 s) is above 15 s
        (45.0, 1, 60),  # 1 h would be 30 s: raised to 60 s, the rung above 45 s
        (45.0, 6, 60),
        (45.0, 24, 300),  # the ladder's 300 s is already above
        (601.0, 1, 900),
        (601.0, 168, 1800),
    ],
)
def test_derived_step_is_never_below_the_scrape_interval(scrape, hours, step):
    p = plan(start=T0, end=T0 + hours * HOUR, scrape=scrape)
    assert p.step_s == step
    assert len(p.value_sets) == hours * 3600 // step  # T0 is on every rung's grid
