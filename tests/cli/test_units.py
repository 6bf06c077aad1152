"""The pure pieces of the client: durations, ``--since``, sparklines and their columns, value cells,
the Loops grid. Values computed by hand."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from servemetrics.client.charts import columns, sparkline, step_table
from servemetrics.client.loops_view import grid, infer_step
from servemetrics.client.tables import Series, format_value
from servemetrics.client.window import format_duration, format_time, parse_since, parse_time
from tests.query.helpers import T0


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90s", 90_000),
        ("15m", 900_000),
        ("1h30m", 5_400_000),
        ("1.5h", 5_400_000),
        ("7d", 604_800_000),
        ("168h", 604_800_000),
        ("250ms", 250),
        ("+2h", 7_200_000),
    ],
)
def test_since_reads_go_durations_and_days(text: str, ms: int) -> None:
    assert parse_since(text) == ms


def test_durations_print_largest_unit_first() -> None:
    cases = [3_600_000, 5_400_000, 604_800_000, 1500, 0, 30_000, 90_061_000]
    assert [format_duration(ms) for ms in cases] == ["1h", "1h30m", "7d", "1s500ms", "0s", "30s", "1d1h1m1s"]


def test_times_with_and_without_an_offset() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    assert parse_time("--start", "2026-01-01T05:30", ist) == T0
    assert parse_time("--start", "2026-01-01T00:00:00Z", ist) == T0
    assert parse_time("--start", "2026-01-01", UTC) == T0
    assert format_time(T0, ist) == "2026-01-01T05:30:00+05:30"
    assert format_time(T0 + 250, UTC) == "2026-01-01T00:00:00.250+00:00"


def test_columns_average_steps_down_to_60() -> None:
    values = [float(i) for i in range(120)]
    cols = columns(values)
    assert len(cols) == 60 and cols[:2] == [0.5, 2.5] and cols[-1] == 118.5
    # 7 steps in 3 columns: [0, 2), [2, 4), [4, 7); a column of nulls is null
    assert columns([1, 3, None, None, 4, 5, 6], width=3) == [2.0, None, 5.0]
    assert columns([1.0, 2.0]) == [1.0, 2.0]


def test_sparkline_scales_lowest_to_highest() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([0, None, 14]) == "▁ █"
    assert sparkline([2, 2, 2]) == "▄▄▄"
    assert sparkline([None, None]) == "  "


def test_values_print_whole_or_to_six_digits() -> None:
    cells = [format_value(v) for v in (None, 3600.0, 0.20000000000000004, 300.001, 1.5e-7, -2.0)]
    assert cells == ["-", "3600", "0.2", "300.001", "1.5e-07", "-2"]


def test_the_loops_grid_puts_gaps_back() -> None:
    """Window [T0 + 10 s, T0 + 100 s), step 30 s: points at the start and at the multiples 30, 60, 90 s
    since the epoch; a step inferred from the answer's step starts after the window start."""
    start = T0 + 10_000
    assert infer_step(start, [start, T0 + 30_000, T0 + 60_000]) == 30
    assert infer_step(start, [start, T0 + 30_000]) is None
    assert grid(start, T0 + 100_000, 30, [T0 + 60_000]) == [start, T0 + 30_000, T0 + 60_000, T0 + 90_000]
    assert grid(start, T0 + 100_000, None, [T0 + 60_000]) == [start, T0 + 60_000]


def test_step_table_leaves_out_series_without_data_and_lines_up() -> None:
    """A series null in every step prints no rows (a node without GPUs printed a row of ``-`` per
    step); the TIME column keeps one precision when a step start has milliseconds (the window's start
    need not be a whole second); values are right-justified under VALUE."""
    stamps = [T0 + 500, T0 + 60_000]
    series = [
        Series("cpu_usage", {"node": "n0"}, "GAUGE", [3.5, 12.0]),
        Series("gpu_utilization", {"node": "n0", "gpu": "0"}, "GAUGE", [None, None]),
    ]
    lines = step_table(stamps, series, UTC).splitlines()
    assert lines == [
        "TIME                           METRIC     NODE  VALUE",
        f"{format_time(T0 + 500, UTC)}  cpu_usage  n0      3.5",
        f"{format_time(T0 + 60_000, UTC, millis=True)}  cpu_usage  n0       12",
    ]
    assert lines[2].startswith("2026-01-01T00:01:00.000+00:00")
