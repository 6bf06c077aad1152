"""Drill-down (our extension, no anchor's API has it): which ``group_by`` splits a metric accepts and
which stored labels each split keys on (docs/query-semantics.md "Drill-down (our extension)").

The rules, one place:

- ``deployment`` (label ``deployment_id``): every metric; one label set per deployment that served in the
  window (two during a rolling promotion).
- ``replica`` (label ``replica``): metrics reported per replica, i.e. every metric except the
  deployment-level ones (``Scope.DEPLOYMENT``: one value per deployment, not per replica). Series
  without a ``replica`` label (our gateway meters per deployment) belong to no replica's label set.
- ``gpu`` (labels ``replica``, ``gpu``): the per-GPU metrics, the DCGM ones (``baseten_gpu_*``); a GPU is
  a GPU index of one replica.
- ``status_code`` (label ``status_code``): the by-status counters (``by_label == "status_code"``); exact
  codes instead of the 2xx / 4xx / 5xx classes.
- ``team`` (label ``team_id``): the Model API metrics (``baseten_model_api_*``); one label set per team
  that called in the window (``""``: keys without a team). ``GET /v1/model_apis/{name}/metrics`` always
  splits by it (docs/model-apis.md).

A derived metric accepts what every one of its inputs accepts.
"""

from __future__ import annotations

from enum import StrEnum

from servemetrics.catalog.metrics import CATALOG
from servemetrics.catalog.model import MetricDef, Scope


class Split(StrEnum):
    """A ``group_by`` value of the metrics endpoints."""

    REPLICA = "replica"
    GPU = "gpu"
    DEPLOYMENT = "deployment"
    STATUS_CODE = "status_code"
    TEAM = "team"


SPLIT_LABELS: dict[Split, tuple[str, ...]] = {
    Split.REPLICA: ("replica",),
    Split.GPU: ("replica", "gpu"),
    Split.DEPLOYMENT: ("deployment_id",),
    Split.STATUS_CODE: ("status_code",),
    Split.TEAM: ("team_id",),
}
"""Split -> the stored labels that identify one part, in the order they lead each label set."""

MODEL_API_PREFIX = "baseten_model_api_"
"""Names of the Model API metrics (``catalog.model_apis``: one series per team)."""
GPU_PREFIX = "baseten_gpu_"
"""Names of the per-GPU metrics (``ingest.adapters.dcgm``: one series per ``gpu``)."""


def accepts(metric: MetricDef, split: Split) -> bool:
    """True when ``metric`` can be split by ``split`` (rules in the module docstring)."""
    if metric.derived is not None:
        return all(accepts(CATALOG[n], split) for n in metric.derived.inputs)
    if split is Split.DEPLOYMENT:
        return True
    if split is Split.REPLICA:
        return metric.scope is not Scope.DEPLOYMENT
    if split is Split.GPU:
        return metric.name.startswith(GPU_PREFIX)
    if split is Split.TEAM:
        return metric.name.startswith(MODEL_API_PREFIX)
    return metric.by_label == "status_code"


def splits_of(metric: MetricDef) -> tuple[Split, ...]:
    """The ``group_by`` values ``metric`` accepts, in ``Split`` order."""
    return tuple(s for s in Split if accepts(metric, s))
