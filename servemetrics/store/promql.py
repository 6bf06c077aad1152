"""Compile a ``Selection`` to PromQL and read the engine's answer back into a ``SelectResult``.

A selection's value sets are cut into *segments*: runs of consecutive value sets (each starting where
the previous ends) of equal width and with the same deployments. The SERIES grid gives long runs; the
ragged first and last value sets and the pieces a promotion splits off are segments of their own. Each
segment is one ``query_range`` (``step`` = the width, one point per value set) or, for a single value
set, one instant ``query``, of this expression::

    label_replace(sum by (G) (E), "sm_part", "total", "", "")
      or label_replace(count by (G) (D), "sm_part", "series", "", "")

where ``E`` is the per-series reducer, ``D`` the series that have data, ``G`` the selection's
``group_by``; the selector is ``{__name__="name", matchers..., deployment_id=~"a|b"}``.

Half-open ranges: a PromQL range selector ``x[w]`` evaluated at ``t`` reads ``(t - w, t]``; our value
sets are ``[start, end)``. With integer-millisecond timestamps, evaluating at ``t = end - 1 ms`` reads
``(start - 1, end - 1]`` = ``[start, end)`` exactly. Every expression is evaluated at ``end - 1 ms``.

Reducers (``w`` = end - start, ``L`` = the selection's lookback, all in ms):

- MEAN: ``avg_over_time(x[w])``; D = the same.
- LAST: ``last_over_time(x[L])`` (``[end - L, end)``); D = the same.
- INCREASE, VictoriaMetrics: ``P(x[G + w] offset -1ms) - P(x[G] offset (w - 1 ms))`` with ``P =
  increase_prometheus`` and ``G`` = ``COUNTER_GAP_MS`` (MetricsQL: the increase between the samples
  *inside* the window, resets removed, no extrapolation and, unlike ``increase``/``increase_pure``, no
  sample from before the window). Evaluated at ``end - 1 ms``, the first term sums the deltas of
  consecutive samples both in ``(start - G, end]``, the second those both in ``(start - G, start]``; the
  difference credits each delta whole to the value set holding ``(t0, t1]``'s end, where the stores
  spread it over ``(t0, t1]`` (``store.base`` INCREASE). The two agree exactly when no pair straddles a
  value set's edge (edges on scrape times, as the golden tests' data), and each value set differs by at
  most the two straddling pairs' deltas otherwise;
  pairs further apart than ``G`` and re-created counters after a longer gap count as in the stores only
  when both samples lie in ``[start - G, end)``. A missing second term (fewer than two samples) counts
  0; a series with data but no pair counts 0. MetricsQL also treats a drop
  of less than 1/8 of the previous value as jitter, not a reset (docs/store.md, "Prometheus-compatible
  engines"). D = ``count_over_time(x[w] offset -1ms)``: the samples in ``(start, end]``, which end the
  pairs the value set holds (a value set between a promotion and the next scrape has data when a pair
  ends on its end).
- Stale markers (``samples.STALE_NAN``) reach the engine as written: range functions skip them, as the
  stores' MEAN and INCREASE do; LAST (``last_over_time``) skips them too, so on an engine a series that
  left its target stays in CURRENT until the lookback passes (the stores drop it at once).
- INCREASE, Prometheus: ``increase(x[w])``, which extrapolates (docs/store.md gives the bound);
  series with one sample count 0; D = ``count_over_time(x[w])``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from servemetrics.store.base import COUNTER_GAP_MS, Cell, GroupKey, Reducer, Selection, SelectResult, ValueSet

PART_LABEL = "sm_part"
"""Label that tells the ``sum`` points (``total``) from the ``count`` points (``series``) of one answer."""


class Flavor(StrEnum):
    """Which engine's query language to compile to."""

    PROMETHEUS = "prometheus"
    VICTORIAMETRICS = "victoriametrics"


class EngineAnswerError(ValueError):
    """The engine's JSON is not the Prometheus HTTP API answer the query asks for."""


@dataclass(frozen=True)
class Segment:
    """Value sets ``first .. first + count - 1`` of a selection: consecutive, ``width_ms`` wide each,
    served by ``deployments``; evaluated at ``first_eval_ms + k * width_ms`` for ``k < count``."""

    first: int
    count: int
    width_ms: int
    deployments: frozenset[str]
    first_eval_ms: int

    @property
    def last_eval_ms(self) -> int:
        """Evaluation time of the segment's last value set (its end - 1 ms)."""
        return self.first_eval_ms + (self.count - 1) * self.width_ms


def segments(value_sets: Sequence[ValueSet]) -> list[Segment]:
    """Cut ``value_sets`` into segments (module docstring); value sets without deployments are left out
    (their cells are None)."""
    out: list[Segment] = []
    prev: ValueSet | None = None
    for i, vs in enumerate(value_sets):
        width = vs.end_ms - vs.start_ms
        last = out[-1] if out else None
        if (
            last is not None
            and prev is not None
            and prev.end_ms == vs.start_ms
            and last.width_ms == width
            and last.deployments == vs.deployment_ids
            and last.first + last.count == i
        ):
            out[-1] = Segment(last.first, last.count + 1, width, last.deployments, last.first_eval_ms)
        elif vs.deployment_ids:
            out.append(Segment(i, 1, width, vs.deployment_ids, vs.end_ms - 1))
        prev = vs
    return out


def quote(value: str) -> str:
    """A PromQL double-quoted string literal for ``value``."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def selector(name: str, matchers: Sequence[tuple[str, str]], deployments: frozenset[str]) -> str:
    """``{__name__="name", k="v", ..., deployment_id=~"a|b"}`` (ids regex-escaped, sorted; a
    ``deployment_id`` matcher is the caller's to apply to ``deployments``, which must not be empty)."""
    parts = [f"__name__={quote(name)}"]
    parts += [f"{k}={quote(v)}" for k, v in matchers if k != "deployment_id"]
    parts.append("deployment_id=~" + quote("|".join(re.escape(d) for d in sorted(deployments))))
    return "{" + ",".join(parts) + "}"


def _ms(value: int) -> str:
    return f"{value}ms"


def per_series(sel: Selection, seg: Segment, flavor: Flavor) -> tuple[str, str]:
    """``(E, D)``: the per-series reducer expression and the expression whose series have data."""
    x = selector(sel.name, sel.matchers, seg.deployments)
    w = seg.width_ms
    if sel.reducer is Reducer.MEAN:
        e = f"avg_over_time({x}[{_ms(w)}])"
        return e, e
    if sel.reducer is Reducer.LAST:
        e = f"last_over_time({x}[{_ms(sel.lookback_ms)}])"
        return e, e
    has = f"count_over_time({x}[{_ms(w)}])"
    if flavor is Flavor.VICTORIAMETRICS:
        has = f"count_over_time({x}[{_ms(w)}] offset -1ms)"  # (start, end]: the samples ending its pairs
        # read (start - G, end] and (start - G, start]: a pair ending on an edge belongs before it
        whole = f"increase_prometheus({x}[{_ms(COUNTER_GAP_MS + w)}] offset -1ms)"
        before = f"increase_prometheus({x}[{_ms(COUNTER_GAP_MS)}] offset {_ms(w - 1)})"
        inc = f"(({whole}) - (({before}) or ({whole}) * 0))"
    else:
        inc = f"increase({x}[{_ms(w)}])"
    return f"(({inc} or ({has}) * 0) and ({has}))", has


def compile_segment(sel: Selection, seg: Segment, flavor: Flavor) -> str:
    """The one PromQL expression answering ``seg`` (sums and series counts, told apart by
    ``PART_LABEL``)."""
    e, d = per_series(sel, seg, flavor)
    by = ", ".join(sel.group_by)
    return (
        f'label_replace(sum by ({by}) ({e}), "{PART_LABEL}", "total", "", "")'
        f' or label_replace(count by ({by}) ({d}), "{PART_LABEL}", "series", "", "")'
    )


def _points(item: dict[str, Any], result_type: str) -> list[Any]:
    if result_type == "matrix":
        points = item.get("values")
    else:
        value = item.get("value")
        points = [value] if value is not None else None
    if not isinstance(points, list):
        raise EngineAnswerError(f"a {result_type} result without values: {str(item)[:200]}")
    return points


def read_answer(
    body: Any, sel: Selection, seg: Segment, out: dict[GroupKey, list[list[float | None]]]
) -> None:
    """Fold one engine answer (the JSON of ``query`` / ``query_range``) into ``out``: per group and
    value set ``[total, series]`` (None when absent).

    Raises:
        EngineAnswerError: not a successful vector / matrix answer, a point at a time the query did not
            ask for, a value that is not a number, or a point without the part label.
    """
    if not isinstance(body, dict) or body.get("status") != "success":
        raise EngineAnswerError(f"the engine answered {str(body)[:300]}")
    data = body.get("data")
    result_type = data.get("resultType") if isinstance(data, dict) else None
    if result_type not in ("vector", "matrix") or not isinstance(data.get("result"), list):  # type: ignore[union-attr]
        raise EngineAnswerError(f"expected a vector or matrix result, got {str(data)[:300]}")
    n = len(sel.value_sets)
    for item in data["result"]:  # type: ignore[index]
        labels = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or labels.get(PART_LABEL) not in ("total", "series"):
            raise EngineAnswerError(f"a result series without {PART_LABEL}: {str(item)[:200]}")
        slot = 0 if labels[PART_LABEL] == "total" else 1
        key = tuple(str(labels.get(g, "")) for g in sel.group_by)
        cells = out.setdefault(key, [[None, None] for _ in range(n)])
        for point in _points(item, str(result_type)):
            try:
                t_ms, value = round(float(point[0]) * 1000), float(point[1])
            except (TypeError, ValueError, IndexError) as exc:
                raise EngineAnswerError(f"a point that is not [time, value]: {str(point)[:100]}") from exc
            k, rem = divmod(t_ms - seg.first_eval_ms, seg.width_ms)
            if rem or not 0 <= k < seg.count:
                raise EngineAnswerError(
                    f"a point at {t_ms} ms, not one of the {seg.count} evaluation times asked for"
                )
            cells[seg.first + k][slot] = value


def to_result(raw: dict[GroupKey, list[list[float | None]]]) -> SelectResult:
    """``[total, series]`` pairs -> ``Cell``s: None when the group has no series with data there."""
    out: SelectResult = {}
    for key, pairs in raw.items():
        cells: list[Cell | None] = []
        for total, series in pairs:
            if not series or total is None:
                cells.append(None)
            else:
                cells.append(Cell(total, int(series)))
        out[key] = cells
    return out
