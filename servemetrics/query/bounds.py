"""Highest finite bucket bound of histogram metrics, from the stored ``le`` label values.

The dashboard shows a quantile equal to this bound as "≥ bound": PromQL ``histogram_quantile`` (and
``quantiles.bucket_quantile``) returns the highest finite bound for a quantile that falls in the ``+Inf``
bucket, so such a value is a lower limit, not a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from servemetrics.catalog import CATALOG, Kind
from servemetrics.query.errors import UnknownMetricError
from servemetrics.query.quantiles import parse_le
from servemetrics.store.base import Store


class NotHistogramError(ValueError):
    """Known metric names that are not histograms (the API answers 400 naming them)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        histograms = [m.name for m in CATALOG.values() if m.kind is Kind.HISTOGRAM]
        super().__init__(
            "not histogram metric(s): " + ", ".join(self.names) + ". Histograms: " + ", ".join(histograms)
        )


def histogram_names(names: Sequence[str]) -> list[str]:
    """``names`` (repeatable or comma-separated) checked against the catalog, order kept, duplicates dropped.

    Raises:
        UnknownMetricError: names not in the catalog.
        NotHistogramError: catalog names whose kind is not HISTOGRAM.
    """
    wanted = list(dict.fromkeys(n.strip() for name in names for n in name.split(",") if n.strip()))
    unknown = [n for n in wanted if n not in CATALOG]
    if unknown:
        raise UnknownMetricError(unknown)
    other = [n for n in wanted if CATALOG[n].kind is not Kind.HISTOGRAM]
    if other:
        raise NotHistogramError(other)
    return wanted


def highest_finite_bound(le_values: Sequence[str]) -> float | None:
    """Largest finite ``le`` of ``le_values`` (``"+Inf"`` and unparsable values skipped); None if none."""
    best: float | None = None
    for le in le_values:
        try:
            bound = parse_le(le)
        except ValueError:
            continue
        if math.isfinite(bound) and (best is None or bound > best):
            best = bound
    return best


def histogram_bounds(store: Store, model_id: str, names: Sequence[str]) -> dict[str, float]:
    """``{metric: highest finite le}`` over the stored ``<metric>_bucket`` series of ``model_id``.

    ``names`` must already be checked (``histogram_names``). Bounds are in the metric's unit (seconds,
    bytes). Metrics without a stored bucket series with a finite bound are left out.
    """
    out: dict[str, float] = {}
    for name in names:
        bound = highest_finite_bound(store.label_values(name + "_bucket", "le", (("model_id", model_id),)))
        if bound is not None:
            out[name] = bound
    return out
