"""The metric catalog: every canonical metric the API serves (see ``metrics.CATALOG``)."""

from servemetrics.catalog.metrics import CATALOG, DEFAULT_METRICS
from servemetrics.catalog.model import Aggregation, Kind, MetricDef, Scope, Unit

__all__ = ["CATALOG", "DEFAULT_METRICS", "Aggregation", "Kind", "MetricDef", "Scope", "Unit"]
