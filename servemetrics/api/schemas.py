"""Pydantic models of the metrics responses (spec ``metrics-api.openapi.json``), for ``/docs``, and the
conversions of the query layer's results into them: the one place that knows the wire names
(``unit_hint``, ``start_epoch_millis`` ...)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from servemetrics.catalog.model import Kind, Unit
from servemetrics.query.execute import MetricsResult
from servemetrics.query.gpu_usage import GpuUsage
from servemetrics.query.windows import Mode


class MetricDescriptor(BaseModel):
    """``ModelMetricDescriptorV1``: name, unit hint, kind and the fixed label sets of one metric."""

    name: str = Field(description="Canonical metric name.")
    unit_hint: Unit
    kind: Kind
    label_sets: list[dict[str, str]]


class MetricValueSet(BaseModel):
    """``ModelMetricValueSetV1``: values of one step, aligned to the descriptors and their label sets."""

    start_epoch_millis: int
    values: list[list[float | None]]


class MetricsResponse(BaseModel):
    """``GetModelMetricsResponseV1``."""

    start_epoch_millis: int
    end_epoch_millis: int
    mode: Mode
    step_seconds: int | None
    metric_descriptors: list[MetricDescriptor]
    metric_values: list[MetricValueSet]


def metrics_response(result: MetricsResult) -> MetricsResponse:
    """``GetModelMetricsResponseV1`` of an ``execute`` result (epoch ms and seconds as they are)."""
    return MetricsResponse(
        start_epoch_millis=result.start_ms,
        end_epoch_millis=result.end_ms,
        mode=result.mode,
        step_seconds=result.step_s,
        metric_descriptors=[
            MetricDescriptor(
                name=d.name, unit_hint=d.unit, kind=d.kind, label_sets=[dict(ls) for ls in d.label_sets]
            )
            for d in result.descriptors
        ],
        metric_values=[
            MetricValueSet(start_epoch_millis=row.start_ms, values=[list(v) for v in row.values])
            for row in result.rows
        ],
    )


def gpu_usage_body(usage: GpuUsage) -> dict[str, object]:
    """The ``GET /v1/organization/gpu_usage`` JSON object of a ``gpu_usage`` result:
    ``{start_epoch_millis, end_epoch_millis, step_seconds, group_by, gpu_types, timestamps, groups}``
    with ``groups`` ``[{key, name, values}]`` (docs/dashboard-api.md)."""
    return {
        "start_epoch_millis": usage.start_ms,
        "end_epoch_millis": usage.end_ms,
        "step_seconds": usage.step_s,
        "group_by": usage.group_by.value,
        "gpu_types": list(usage.gpu_types),
        "timestamps": list(usage.step_starts_ms),
        "groups": [{"key": g.key, "name": g.name, "values": list(g.values)} for g in usage.groups],
    }
