"""Series-mode output (platform-facts §3 "Output"): a sparkline per series, at most ``WIDTH`` (60)
columns, with its min–max range and end value; or, with ``--no-chart``, a per-step table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

from servemetrics.client.tables import NO_VALUE, Series, format_value, label_cells, label_keys, plain_table
from servemetrics.client.window import format_time

WIDTH = 60
BLOCKS = "▁▂▃▄▅▆▇█"
FLAT = "▄"
"""Every column of a series whose columns are all equal (no range to scale)."""
GAP = " "
"""A column with no data (every step of it null)."""


def columns(values: Sequence[float | None], width: int = WIDTH) -> list[float | None]:
    """``values`` downsampled to at most ``width`` columns: column c is the mean of the non-null values
    of steps ``[c·n/width, (c+1)·n/width)`` (n steps), null when all are null; ``n <= width`` steps are
    one column each."""
    n = len(values)
    count = min(width, n)
    out: list[float | None] = []
    for c in range(count):
        chunk = [v for v in values[c * n // count : (c + 1) * n // count] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def sparkline(values: Sequence[float | None], width: int = WIDTH) -> str:
    """The columns of ``values`` (``columns``) as block characters, the lowest column ``▁``, the highest
    ``█``, linear between; ``FLAT`` when all columns are equal; ``GAP`` for a null column."""
    cols = columns(values, width)
    known = [v for v in cols if v is not None]
    if not known:
        return GAP * len(cols)
    lo, hi = min(known), max(known)
    top = len(BLOCKS) - 1
    return "".join(
        GAP if v is None else FLAT if hi == lo else BLOCKS[round((v - lo) / (hi - lo) * top)] for v in cols
    )


def _range(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{format_value(min(known))}–{format_value(max(known))}" if known else NO_VALUE


def chart_table(series: Sequence[Series]) -> str:
    """METRIC, the label keys, CHART (``sparkline``), MIN–MAX (of every step, not the columns) and END
    (the last step's value, ``-`` when null)."""
    keys = label_keys(series)
    rows = [
        [
            s.metric,
            *label_cells(s, keys),
            sparkline(s.values),
            _range(s.values),
            format_value(s.values[-1] if s.values else None),
        ]
        for s in series
    ]
    return plain_table(["METRIC", *(k.upper() for k in keys), "CHART", "MIN–MAX", "END"], rows, numeric=2)


def step_table(stamps: Sequence[int], series: Sequence[Series], tz: tzinfo | None) -> str:
    """``--no-chart``: one row per series and step, series after series: TIME (the step's start in
    ``tz``, None: local; every row to the millisecond when one step start has milliseconds, so the
    column lines up), METRIC, the label keys, VALUE (right-justified). A series without a value in any
    step is left out (a node without GPUs would print a row of ``-`` per step); ``chart_table`` still
    lists it."""
    shown = [s for s in series if any(v is not None for v in s.values)]
    keys = label_keys(shown)
    millis = any(t % 1000 for t in stamps)
    rows = [
        [format_time(t, tz, millis), s.metric, *label_cells(s, keys), format_value(v)]
        for s in shown
        for t, v in zip(stamps, s.values, strict=True)
    ]
    return plain_table(["TIME", "METRIC", *(k.upper() for k in keys), "VALUE"], rows, numeric=1)
