"""Pydantic models of the metrics responses (spec ``metrics-api.openapi.json``), for ``/docs``."""

from __future__ import annotations

from pydantic import BaseModel, Field

from servemetrics.catalog.model import Kind, Unit
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
