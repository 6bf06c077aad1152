"""Small builders for query tests: samples at T0 + seconds, plans over MemoryStore."""

from __future__ import annotations

from servemetrics.api.schemas import metrics_response
from servemetrics.query.execute import MetricsResult
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms (cases/core.md)


def at(seconds: float) -> int:
    """T0 + seconds, in ms."""
    return T0 + int(seconds * 1000)


def series(name: str, points: list[tuple[float, float]], **labels: str) -> list[Sample]:
    """Samples of one series from ``(seconds after T0, value)`` points; model m1 unless given."""
    lab = labels_of({"model_id": "m1", **labels})
    return [Sample(name, lab, float(v), at(s)) for s, v in points]


def store_with(*groups: list[Sample]) -> MemoryStore:
    """A MemoryStore holding every sample of ``groups``."""
    store = MemoryStore()
    store.append(SampleBatch.from_samples([s for g in groups for s in g]))
    return store


def wire(result: MetricsResult) -> dict:
    """An ``execute`` result as the ``GetModelMetricsResponseV1`` JSON object the API answers."""
    return metrics_response(result).model_dump(mode="json")
