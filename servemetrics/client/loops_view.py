"""The Loops answer (``GetLoopsDeploymentMetricsResponseV1``, docs/loops.md) as series for the charts
and tables: its points are ``{value, timestamp}`` arrays that leave gaps out, so they are put back on the
window's step grid (the window start, then every multiple of the step since the epoch inside it).

Series (metric, labels): ``inference_volume``, ``concurrent_requests``, ``response_time_stats``
{percentile: p50 | p95 | p99} (ms), ``inference_volume_by_status`` {status: 2xx | 4xx | 5xx}, and per
node {node[, gpu]}: ``gpu_memory_usage_bytes``, ``gpu_utilization``, ``cpu_usage``,
``cpu_memory_usage_bytes``, ``ephemeral_storage.usage_bytes``, ``ephemeral_storage.utilization``. The
answer's top-level compute fields are the leader node's, shown once under its node."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from servemetrics.client.tables import Series

Points = dict[int, float | None]
"""Step start (epoch ms) → value."""


def stamp_ms(timestamp: str) -> int:
    """An answer's ISO-8601 UTC ``timestamp`` (``2026-01-01T00:00:30Z``) in epoch ms."""
    return round(datetime.fromisoformat(timestamp).timestamp() * 1000)


def _points(points: Iterable[dict[str, Any]], field: str = "value") -> Points:
    return {stamp_ms(p["timestamp"]): p[field] for p in points}


def _node_series(node: dict[str, Any]) -> Iterator[tuple[str, dict[str, str], Points]]:
    labels = {"node": node["node_id"]}
    for field in ("gpu_memory_usage_bytes", "gpu_utilization"):
        for rank, points in node[field].items():
            yield field, {**labels, "gpu": rank}, _points(points)
    for field in ("cpu_usage", "cpu_memory_usage_bytes"):
        yield field, labels, _points(node[field])
    for field in ("usage_bytes", "utilization"):
        yield f"ephemeral_storage.{field}", labels, _points(node["ephemeral_storage"][field])


def _all_series(metrics: dict[str, Any]) -> Iterator[tuple[str, dict[str, str], Points]]:
    for field in ("inference_volume", "concurrent_requests"):
        yield field, {}, _points(metrics[field])
    for p in ("p50", "p95", "p99"):
        yield "response_time_stats", {"percentile": p}, _points(metrics["response_time_stats"], p)
    for status in ("2xx", "4xx", "5xx"):
        points = _points(metrics["inference_volume_by_status"], f"status_{status}")
        yield "inference_volume_by_status", {"status": status}, points
    for node in metrics["per_node_metrics"]:
        yield from _node_series(node)


def infer_step(start_ms: int, stamps: Iterable[int]) -> int | None:
    """The step (seconds) of an answer whose request left it to the service: the smallest distance
    between two step starts after the window start (which need not be a multiple of the step); None
    with fewer than two of them."""
    aligned = sorted(set(stamps) - {start_ms})
    gaps = [b - a for a, b in zip(aligned, aligned[1:], strict=False)]
    return min(gaps) // 1000 if gaps else None


def grid(start_ms: int, end_ms: int, step_s: int | None, stamps: Iterable[int]) -> list[int]:
    """The step starts of ``[start_ms, end_ms)``: the start and every multiple of ``step_s`` inside, and
    any step start of the answer (``stamps``) besides; only those without a step."""
    out = {start_ms, *stamps}
    if step_s:
        step_ms = step_s * 1000
        out.update(range((start_ms // step_ms + 1) * step_ms, end_ms, step_ms))
    return sorted(out)


def loops_series(
    answer: dict[str, Any], start_ms: int, end_ms: int, step_s: int | None
) -> tuple[int | None, list[int], list[Series]]:
    """``(step_s, step starts, series)`` of a Loops answer for the window ``[start_ms, end_ms)`` asked
    for; ``step_s`` is the one asked for, else inferred (``infer_step``), None when it cannot be."""
    found = list(_all_series(answer["metrics"]))
    stamps = {t for _, _, points in found for t in points}
    step = step_s or infer_step(start_ms, stamps)
    starts = grid(start_ms, end_ms, step, stamps)
    series = [Series(metric, labels, "GAUGE", [p.get(t) for t in starts]) for metric, labels, p in found]
    return step, starts, series
