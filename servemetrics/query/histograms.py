"""The histogram recipe's pieces over bucket select results (``execute._histogram``): one value set's
buckets summed per ``le`` when they are of one layout, merged across layouts per view otherwise
(``quantiles.merge_layouts``), one source per replica for REPLICA scope; quantiles and avg of a value set.
"""

from __future__ import annotations

import math

from servemetrics.catalog.model import QUANTILES, MetricDef
from servemetrics.query.quantiles import bucket_quantile, merge_layouts, parse_le
from servemetrics.store.base import Cell, GroupKey, SelectResult

VIEW = ("deployment_id", "replica", "source")
"""One histogram for the layout merge and the source choice: one replica's view from one source (its
data-parallel ranks share one bucket layout and add up per bound)."""

BucketList = list[tuple[float, float]]
"""``(bound, increase)`` of the buckets with data in one value set, sorted by bound."""


def _bound(le: str) -> float | None:
    try:
        return parse_le(le)
    except ValueError:
        return None  # ingest rejects such buckets; never let one stored earlier break a query


class Buckets:
    """A ``_bucket`` select result (keys ``(le, *rest)``) and each key's parsed bound (keys whose ``le``
    does not parse are left out)."""

    def __init__(self, res: SelectResult) -> None:
        self.res = res
        self.bounds = {k: b for k in res if (b := _bound(k[0])) is not None}

    def one_layout(self, i: int) -> BucketList | None:
        """Value set ``i`` of buckets grouped by ``le`` alone, when every bound with data there sums the
        same number of series: then every series has every bound (each has a ``+Inf``), one layout, and
        the per-``le`` sums are exact. None when the counts differ (the layouts differ)."""
        present: BucketList = []
        series: set[int] = set()
        for key, b in self.bounds.items():
            if (cell := self.res[key][i]) is not None:
                present.append((b, cell.total))
                series.add(cell.series)
        return sorted(present) if len(series) <= 1 else None

    def merged(self, i: int, metric: MetricDef) -> tuple[BucketList, set[GroupKey] | None]:
        """Value set ``i`` of buckets grouped by ``le`` and ``VIEW``: the views' buckets merged across
        layouts and, for a metric with ``sources`` (REPLICA scope), the views used (``preferred_views``;
        None: all)."""
        groups: dict[GroupKey, BucketList] = {}
        for key, b in self.bounds.items():
            if (cell := self.res[key][i]) is not None:
                groups.setdefault(key[1:], []).append((b, cell.total))
        keys = preferred_views(groups, metric) if metric.sources or metric.request_sources else None
        return merge_layouts([g for k, g in groups.items() if keys is None or k in keys]), keys


def preferred_views(groups: dict[GroupKey, BucketList], metric: MetricDef) -> set[GroupKey]:
    """Per unit, the views (``VIEW`` keys) of its most preferred source with buckets in the value set
    (``MetricDef.source_rank``, ties by name), as ``series_keys.preferred_source`` and
    ``one_request_source`` do for gauges and counters. The unit is a replica (``deployment_id``,
    ``replica``: one view) for ``sources``, a deployment (every replica's view of that source) for
    ``request_sources``."""
    width = 1 if metric.request_sources else 2
    best: dict[GroupKey, tuple[int, str]] = {}
    for key in groups:
        rank = (metric.source_rank(key[2]), key[2])
        unit = key[:width]
        if unit not in best or rank < best[unit]:
            best[unit] = rank
    return {k for k in groups if best[k[:width]][1] == k[2]}


def total(res: SelectResult, i: int, keys: set[GroupKey] | None) -> Cell | None:
    """The sum of the value set ``i`` cells of ``res`` (only ``keys`` when given); None without any."""
    cells = [c[i] for k, c in res.items() if c[i] is not None and (keys is None or k in keys)]
    if not cells:
        return None
    return Cell(math.fsum(c.total for c in cells if c is not None), len(cells))


def histogram_row(present: BucketList, s: Cell | None, n: Cell | None, width: int) -> list[float | None]:
    """Quantiles and avg of one value set from the ``(bound, increase)`` of the buckets that have data
    (``width`` values, all None without buckets): PromQL ``histogram_quantile`` rules, avg = Δsum / Δcount
    (Δcount: the ``+Inf`` bucket without a ``_count``)."""
    if not present:
        return [None] * width
    bounds = [b for b, _ in present]
    cum = [c for _, c in present]
    row: list[float | None] = [bucket_quantile(float(q), bounds, cum) for q in QUANTILES]
    count = n.total if n is not None else (cum[-1] if math.isinf(bounds[-1]) else 0.0)
    row.append(s.total / count if s is not None and count > 0 else None)
    return row
