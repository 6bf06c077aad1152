"""Plain-text tables (Rich ``Table``, no borders, no colour, trailing spaces cut, so ``grep`` / ``awk``
read them) and the current / summary metrics table of the platform CLI (platform-facts §3 "Output"):
METRIC, one column per label key (``QUANTILE``, ``STAT``, ``STATUS`` …), VALUE; in summary mode a
COUNTER prints as ``total (rate/s)``, the rate being the total over the window's seconds."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

WIDE = 100_000
"""Console width the tables are laid out in: wide enough that no cell is ever wrapped or cut."""
NO_VALUE = "-"
"""What a null (no data) prints as."""


@dataclass(frozen=True)
class Series:
    """One metric and label set of an answer: ``values`` aligned to the answer's step starts (null: no
    data); ``kind`` is the descriptor's (``GAUGE``, ``COUNTER``, ``HISTOGRAM``)."""

    metric: str
    labels: dict[str, str]
    kind: str
    values: list[float | None]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: int = 0) -> str:
    """``rows`` under ``headers``, columns two spaces apart, each line without trailing spaces; ends
    with a newline. The last ``numeric`` columns are right-justified (numbers line up by their last
    digit, as ``ls -l`` prints sizes)."""
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="", show_edge=False)
    for i, header in enumerate(headers):
        if i >= len(headers) - numeric:  # Rich justifies no cell of an overflow="ignore" column
            table.add_column(Text(header), no_wrap=True, overflow="fold", justify="right")
        else:
            table.add_column(Text(header), no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    Console(file=out, width=WIDE, color_system=None, highlight=False, emoji=False).print(table)
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def format_value(value: float | None) -> str:
    """A value as the tables print it: ``-`` for null, a whole number without decimals (``3600``),
    else six significant digits (``0.245``, ``300.001``, ``1.5e-07``)."""
    if value is None:
        return NO_VALUE
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def label_keys(series: Sequence[Series]) -> list[str]:
    """Every label key of ``series``, in order of first appearance: the label columns."""
    keys: dict[str, None] = {}
    for s in series:
        keys.update(dict.fromkeys(s.labels))
    return list(keys)


def label_cells(s: Series, keys: Sequence[str]) -> list[str]:
    """``s``'s value of each of ``keys`` (empty where it has none)."""
    return [s.labels.get(k, "") for k in keys]


def metric_series(answer: dict[str, Any]) -> tuple[list[int], list[Series]]:
    """A ``GetModelMetricsResponseV1`` as its step starts (epoch ms) and one ``Series`` per descriptor and
    label set (``values[i][j]`` of every value set: descriptor i, label set j)."""
    stamps = [int(vs["start_epoch_millis"]) for vs in answer["metric_values"]]
    out = []
    for i, d in enumerate(answer["metric_descriptors"]):
        for j, labels in enumerate(d["label_sets"]):
            values = [vs["values"][i][j] for vs in answer["metric_values"]]
            out.append(Series(d["name"], dict(labels), d["kind"], values))
    return stamps, out


def value_cell(s: Series, mode: str, window_s: float) -> str:
    """The VALUE cell of ``s``'s one value: ``total (rate/s)`` for a COUNTER in summary mode."""
    value = s.values[0] if s.values else None
    if mode == "SUMMARY" and s.kind == "COUNTER" and value is not None and window_s > 0:
        return f"{format_value(value)} ({format_value(value / window_s)}/s)"
    return format_value(value)


def value_table(answer: dict[str, Any]) -> str:
    """The current / summary table of a ``GetModelMetricsResponseV1``: METRIC, the label keys upper-cased,
    VALUE."""
    _, series = metric_series(answer)
    keys = label_keys(series)
    window_s = (answer["end_epoch_millis"] - answer["start_epoch_millis"]) / 1000
    rows = [[s.metric, *label_cells(s, keys), value_cell(s, answer["mode"], window_s)] for s in series]
    return plain_table(["METRIC", *(k.upper() for k in keys), "VALUE"], rows, numeric=1)
