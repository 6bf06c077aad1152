"""Custom metrics by their own name: a ``MetricDef`` for a series a model's replicas expose that the catalog
does not know (stored with ``source="custom"`` by ``ingest.adapters.custom``; docs/query-semantics.md
"Custom metrics").

The kind follows the Prometheus naming conventions, as the exposition's ``# TYPE`` is not stored:

- ``<name>_bucket`` series exist: HISTOGRAM (quantiles and avg, as the catalog's histograms);
- the name ends in ``_total``, ``_count``, ``_sum`` or ``_bucket``: COUNTER (the increase in each step);
- otherwise GAUGE (the mean of each series in the step).

Every kind sums across the metric's series (``Aggregation.SUM``: replicas, label values); the unit hint
follows the name (``_seconds`` SECONDS, ``_bytes`` BYTES, ``_ratio`` RATIO, else COUNT).
"""

from __future__ import annotations

from servemetrics.catalog import CATALOG
from servemetrics.catalog.model import HISTOGRAM_LABEL_SETS, Aggregation, Kind, MetricDef, Unit
from servemetrics.labels import CUSTOM_SOURCE
from servemetrics.store.base import Store

COUNTER_SUFFIXES: tuple[str, ...] = ("_total", "_count", "_sum", "_bucket")
"""Names read as counters (Prometheus: a counter's ``_total``, a histogram's or summary's parts)."""
_UNITS: tuple[tuple[str, Unit], ...] = (
    ("_seconds", Unit.SECONDS),
    ("_bytes", Unit.BYTES),
    ("_ratio", Unit.RATIO),
)
HELP = "Custom metric exposed by the model's replicas (summed across its series)."


def unit_of(name: str) -> Unit:
    """The unit hint of a custom metric from its name: ``_seconds`` (also ``_seconds_total``) -> SECONDS,
    ``_bytes`` -> BYTES, ``_ratio`` -> RATIO, anything else COUNT."""
    base = name
    for suffix in COUNTER_SUFFIXES:
        base = base.removesuffix(suffix)
    for suffix, unit in _UNITS:
        if base.endswith(suffix):
            return unit
    return Unit.COUNT


def _is_custom(store: Store, model_id: str, name: str) -> bool:
    return CUSTOM_SOURCE in store.label_values(name, "source", (("model_id", model_id),))


def custom_metric(store: Store, model_id: str, name: str) -> MetricDef | None:
    """The ``MetricDef`` of custom metric ``name`` of ``model_id`` (its series' kind and unit as the module
    docstring says), or None when ``name`` is a catalog name or no replica of the model has a custom
    series of that name (nor ``<name>_bucket`` series) in the store. Only ``model_id``'s series are read:
    another model's custom metric is unknown here, as any unknown name."""
    if name in CATALOG:
        return None
    if _is_custom(store, model_id, name + "_bucket"):
        return MetricDef(
            name, Kind.HISTOGRAM, unit_of(name), Aggregation.SUM, HELP, label_sets=HISTOGRAM_LABEL_SETS
        )
    if not _is_custom(store, model_id, name):
        return None
    kind = Kind.COUNTER if name.endswith(COUNTER_SUFFIXES) else Kind.GAUGE
    return MetricDef(name, kind, unit_of(name), Aggregation.SUM, HELP)
