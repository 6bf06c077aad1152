"""What the dashboard builds its graphs from: the catalog's descriptors and histogram bounds.

- ``GET /v1/metrics_catalog``: every catalog metric with its graph fields (panel, legend, shown by
  default) and the event kinds (the spec's nine and our REPLICA_RECOVERED) with their display names.
  Any valid key.
- ``GET /v1/models/{model_id}/histogram_bounds?metrics=...``: the highest finite bucket bound of each
  histogram (``query.bounds``), so the page can show a quantile clamped at it as "≥ bound".

docs/dashboard-api.md describes both.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from servemetrics.api.deps import Auth, ReadModel, StoreDep
from servemetrics.api.errors import bad_request
from servemetrics.api.params import reject_unknown_params
from servemetrics.catalog import CATALOG, Kind, MetricDef
from servemetrics.catalog.detection import engines_of
from servemetrics.catalog.splits import splits_of
from servemetrics.query.bounds import histogram_bounds, histogram_names
from servemetrics.registry.events import EVENT_KINDS, EVENT_TITLES

router = APIRouter(tags=["dashboard"])


def metric_entry(m: MetricDef) -> dict[str, Any]:
    """One catalog row as JSON: the spec's descriptor fields plus aggregation, help and graph fields
    (``group``: the dashboard's group, "" for the platform's; ``engines``: the detected engines that make
    it apply, ``[]`` = every deployment; ``catalog.detection``; ``group_by``: the drill-down splits the
    metrics endpoints accept for it, ``catalog.splits``)."""
    return {
        "name": m.name,
        "kind": m.kind.value,
        "unit_hint": m.unit.value,
        "aggregation": m.aggregation.value,
        "label_sets": [dict(ls) for ls in m.label_sets],
        "help": m.help,
        "panel": m.panel,
        "legend": m.legend,
        "default_visible": m.default_visible,
        "group": m.group,
        "engines": list(engines_of(m.name)),
        "group_by": [s.value for s in splits_of(m)],
    }


@router.get("/v1/metrics_catalog")
def metrics_catalog(request: Request, _: Auth) -> dict[str, Any]:
    """``{metrics: [...] (catalog order = panel order), event_kinds: [{kind, title}]}`` (every one of
    ``registry.EVENT_KINDS``); 400 for any query parameter (it takes none)."""
    reject_unknown_params(request, ())
    return {
        "metrics": [metric_entry(m) for m in CATALOG.values()],
        "event_kinds": [{"kind": k, "title": EVENT_TITLES[k]} for k in EVENT_KINDS],
    }


@router.get("/v1/models/{model_id}/histogram_bounds")
def model_histogram_bounds(
    request: Request,
    model: ReadModel,
    store: StoreDep,
    metrics: Annotated[
        list[str] | None, Query(description="Repeatable histogram metric names (default: every histogram).")
    ] = None,
) -> dict[str, Any]:
    """``{bounds: {metric: highest finite le (float, the metric's unit)}}``; metrics without stored
    bucket series are left out; 400 for unknown or non-histogram names, an empty name (``metrics=``,
    ``metrics=a,,b``) and a query parameter other than ``metrics``."""
    reject_unknown_params(request, ("metrics",))
    if metrics is not None and any(not n.strip() for value in metrics for n in value.split(",")):
        raise bad_request(
            "metrics: an empty metric name; name a histogram metric (e.g. "
            "metrics=baseten_end_to_end_response_time_seconds) or leave metrics out for every histogram"
        )
    default = [m.name for m in CATALOG.values() if m.kind is Kind.HISTOGRAM]
    names = histogram_names(metrics or default)  # unknown or not a histogram: 400 (api/errors.py)
    return {"bounds": histogram_bounds(store, model.id, names)}
