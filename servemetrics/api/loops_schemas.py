"""Pydantic models of the trainer (Loops) endpoints (spec ``loops-deployment-metrics.md``), for ``/docs``
and request validation, and ``loops_metrics``, which turns the query's ``LoopsResult`` into them (the
wire names and ISO timestamps live here only). The spec types ``gpu_memory_usage_bytes`` and
``gpu_utilization`` only as "object"; ``PerRank`` documents the shape we return."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from servemetrics.query import loops
from servemetrics.query.loops_plan import MAX_POINTS, MAX_SECONDS
from servemetrics.timeutil import MAX_TS_MS, iso_ms

MAX_BODY_BYTES = 64 * 1024
"""Largest request body of the metrics POST (bytes): its four numbers need well under 1 KiB."""

EpochMs = Annotated[StrictInt, Field(ge=0, le=MAX_TS_MS)]
Seconds = Annotated[StrictInt, Field(ge=1, le=MAX_SECONDS)]

PER_RANK = (
    'Keyed by GPU rank as a string ("0", "1", ...: the DCGM exporter\'s `gpu` index on the node); each '
    "value is that rank's series, an array of {value, timestamp} in time order. A point with no sample is "
    "left out of the array (a gap)."
)


class LoopsMetricsRequest(BaseModel):
    """``GetLoopsDeploymentMetricsRequestV1``: every field optional; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    start_epoch_millis: EpochMs | None = Field(
        default=None, description="Window start, epoch ms (default end - 1 h)."
    )
    end_epoch_millis: EpochMs | None = Field(default=None, description="Window end, epoch ms (default now).")
    step_seconds: Seconds | None = Field(
        default=None,
        description="Seconds between points. Default: derived from the window (1 h -> 30 s, 6 h -> 60 s, "
        f"24 h -> 300 s, 7 d -> 1800 s), never below the service's scrape interval; at most {MAX_POINTS} "
        "points. A step shorter than the scrape interval is a 400.",
    )
    time_divisor_seconds: Seconds | None = Field(
        default=None,
        description="Unit of request volumes in seconds (60: requests per minute). Default 1 (per second).",
    )


class MetricPoint(BaseModel):
    """``TrainingJobMetricV1``: one point."""

    value: float
    timestamp: str = Field(description="Start of the point's step, ISO 8601 UTC (`2026-01-01T00:00:30Z`).")


PerRank = Annotated[dict[str, list[MetricPoint]], Field(description=PER_RANK)]


class ResponseTimePoint(BaseModel):
    """``ResponseTimeDatapointV1``: percentiles in milliseconds, null when no request finished."""

    timestamp: str
    p50: float | None
    p95: float | None
    p99: float | None


class VolumeByStatusPoint(BaseModel):
    """``InferenceVolumeByStatusDatapointV1``: requests per ``time_divisor_seconds`` by status class."""

    timestamp: str
    status_2xx: float
    status_4xx: float
    status_5xx: float


class StorageMetrics(BaseModel):
    """``StorageMetricsV1``: ephemeral storage used (bytes) and used / capacity (0-1)."""

    usage_bytes: list[MetricPoint]
    utilization: list[MetricPoint]


class NodeMetrics(BaseModel):
    """``LoopsDeploymentNodeMetricsV1``: one node's GPUs (per rank), CPU (cores), memory and storage."""

    node_id: str
    gpu_memory_usage_bytes: PerRank
    gpu_utilization: PerRank
    cpu_usage: list[MetricPoint]
    cpu_memory_usage_bytes: list[MetricPoint]
    ephemeral_storage: StorageMetrics


class LoopsMetrics(BaseModel):
    """``LoopsDeploymentMetricsV1``: request fields over every node, compute fields of the leader."""

    inference_volume: list[MetricPoint]
    concurrent_requests: list[MetricPoint]
    response_time_stats: list[ResponseTimePoint]
    inference_volume_by_status: list[VolumeByStatusPoint]
    gpu_memory_usage_bytes: PerRank
    gpu_utilization: PerRank
    cpu_usage: list[MetricPoint]
    cpu_memory_usage_bytes: list[MetricPoint]
    ephemeral_storage: StorageMetrics
    per_node_metrics: list[NodeMetrics]


class LoopsMetricsResponse(BaseModel):
    """``GetLoopsDeploymentMetricsResponseV1``."""

    deployment_id: str
    metrics: LoopsMetrics


NO_NODE = loops.NodeUsage("", {}, {}, (), (), loops.Storage((), ()))
"""The compute fields when no node is the leader: every series empty."""


def _stamp(start_ms: int) -> str:
    return iso_ms(start_ms, always_millis=False)


def _points(series: loops.Series) -> list[MetricPoint]:
    return [MetricPoint(value=p.value, timestamp=_stamp(p.start_ms)) for p in series]


def _per_rank(ranks: loops.PerRank) -> dict[str, list[MetricPoint]]:
    return {str(rank): _points(series) for rank, series in ranks.items()}


def _node(node: loops.NodeUsage) -> NodeMetrics:
    return NodeMetrics(
        node_id=node.node_id,
        gpu_memory_usage_bytes=_per_rank(node.gpu_memory_bytes),
        gpu_utilization=_per_rank(node.gpu_utilization),
        cpu_usage=_points(node.cpu_cores),
        cpu_memory_usage_bytes=_points(node.memory_bytes),
        ephemeral_storage=StorageMetrics(
            usage_bytes=_points(node.storage.used_bytes), utilization=_points(node.storage.utilization)
        ),
    )


def loops_metrics(result: loops.LoopsResult) -> LoopsMetrics:
    """``LoopsDeploymentMetricsV1`` of an ``execute_loops`` result: timestamps as ISO 8601 UTC (whole
    seconds unless the step start has milliseconds), the compute fields of the leader at the top level
    (empty without a leader)."""
    leader = _node(result.leader or NO_NODE)
    return LoopsMetrics(
        inference_volume=_points(result.volume),
        concurrent_requests=_points(result.concurrency),
        response_time_stats=[
            ResponseTimePoint(timestamp=_stamp(p.start_ms), p50=p.p50_ms, p95=p.p95_ms, p99=p.p99_ms)
            for p in result.latency
        ],
        inference_volume_by_status=[
            VolumeByStatusPoint(
                timestamp=_stamp(p.start_ms),
                status_2xx=p.by_class["2xx"],
                status_4xx=p.by_class["4xx"],
                status_5xx=p.by_class["5xx"],
            )
            for p in result.volume_by_status
        ],
        gpu_memory_usage_bytes=leader.gpu_memory_usage_bytes,
        gpu_utilization=leader.gpu_utilization,
        cpu_usage=leader.cpu_usage,
        cpu_memory_usage_bytes=leader.cpu_memory_usage_bytes,
        ephemeral_storage=leader.ephemeral_storage,
        per_node_metrics=[_node(n) for n in result.nodes],
    )
