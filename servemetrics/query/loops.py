"""Answer a trainer (Loops) metrics request (``LoopsPlan``) from a ``Store``: a ``LoopsResult``, which
``api.loops_schemas.loops_metrics`` turns into the ``metrics`` object of
``GetLoopsDeploymentMetricsResponseV1`` (spec ``loops-deployment-metrics.md``; docs/loops.md).

Trainer series carry ``deployment_id = <trainer id>`` and ``node_id``; every selection reads the one
trainer id (the plan's value sets) and, for compute fields, one node (``node_id`` matcher, plus ``pod`` /
``namespace`` for kubelet series when the node names its pod). Recipes (DESIGN "Query semantics"):

- GPU memory (DCGM ``FB_USED``, MiB) and utilisation (0-1): per-series MEAN, by ``gpu`` (the rank);
  memory summed over a GPU's MIG instances and converted to bytes (x 1,048,576), utilisation averaged.
- CPU: INCREASE of the CPU-seconds counters of the pod's containers, summed, / the point's seconds
  (cores). Memory: MEAN working set per container, summed (bytes).
- Ephemeral storage: Summary API ``usedBytes`` (summed over the pod's entries) and ``capacityBytes``
  (averaged); without Summary data, node_exporter's root filesystem: used = size - available.
  ``utilization`` = used / capacity (0-1).
- Requests, all nodes: INCREASE of the request counter / seconds x ``time_divisor_seconds``, in total and
  by status class; queue depth: MEAN per node, summed; latency: bucket increases summed per ``le``,
  p50 / p95 / p99 by PromQL ``histogram_quantile`` rules, in milliseconds.
- A point with no sample is left out of a series (a gap); ``response_time_stats`` keeps every point with
  ``null`` percentiles when there were no requests; volumes read 0 when a request source was up but
  counted nothing, and are left out when no request source was up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from servemetrics.catalog.metrics import CATALOG
from servemetrics.catalog.trainer import EPHEMERAL_AVAILABLE, EPHEMERAL_CAPACITY, EPHEMERAL_USED
from servemetrics.labels import UP
from servemetrics.query.loops_plan import LoopsNode, LoopsPlan
from servemetrics.query.quantiles import bucket_quantile, parse_le
from servemetrics.query.series_keys import status_class
from servemetrics.store.base import Cell, Reducer, Selection, SelectResult, Store
from servemetrics.types import Matchers

GPU_MEMORY = CATALOG["baseten_gpu_memory_used"].name
GPU_UTIL = CATALOG["baseten_gpu_utilization"].name
CPU = CATALOG["baseten_container_cpu_usage_seconds_total"].name
MEMORY = CATALOG["baseten_container_cpu_memory_working_set_bytes"].name
REQUESTS = CATALOG["baseten_inference_requests_total"].name
IN_FLIGHT = CATALOG["baseten_concurrent_requests"].name
LATENCY = CATALOG["baseten_end_to_end_response_time_seconds"].name
MIB = 1_048_576
PERCENTILES = (0.5, 0.95, 0.99)
"""The quantiles of ``LatencyPoint``, in its field order."""

STATUS_CLASSES = ("2xx", "4xx", "5xx")


@dataclass(frozen=True)
class Point:
    """One point of a series: the start of its step (epoch ms) and a finite value."""

    start_ms: int
    value: float


Series = tuple[Point, ...]
"""The points that have a value, in time order (a point without one is left out: a gap)."""
PerRank = dict[int, Series]
"""GPU rank (DCGM ``gpu`` index) -> its series, ranks in ascending order."""


@dataclass(frozen=True)
class LatencyPoint:
    """Response-time percentiles of one point in milliseconds (None: no request finished)."""

    start_ms: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class StatusPoint:
    """Requests per ``time_divisor_seconds`` of one point, by status class (``STATUS_CLASSES``)."""

    start_ms: int
    by_class: Mapping[str, float]


@dataclass(frozen=True)
class Storage:
    """Ephemeral storage: bytes used and used / capacity (0-1)."""

    used_bytes: Series
    utilization: Series


@dataclass(frozen=True)
class NodeUsage:
    """One node's compute: GPU memory (bytes) and utilisation (0-1) per rank, CPU (cores), memory
    (bytes) and ephemeral storage."""

    node_id: str
    gpu_memory_bytes: PerRank
    gpu_utilization: PerRank
    cpu_cores: Series
    memory_bytes: Series
    storage: Storage


@dataclass(frozen=True)
class LoopsResult:
    """The answer to a ``LoopsPlan``: request fields over every node, compute of every node.

    Attributes:
        volume: requests per ``time_divisor_seconds``.
        concurrency: requests in flight, summed over nodes.
        latency: every point, percentiles None without requests.
        volume_by_status: ``volume`` by status class.
        leader: the leader node's compute (None: no node is the leader).
        nodes: every node's compute, in the plan's order.
    """

    volume: Series
    concurrency: Series
    latency: tuple[LatencyPoint, ...]
    volume_by_status: tuple[StatusPoint, ...]
    leader: NodeUsage | None
    nodes: tuple[NodeUsage, ...]


class _Query:
    """One plan against one store: the selections and per-point helpers."""

    def __init__(self, plan: LoopsPlan, store: Store) -> None:
        self.plan = plan
        self.store = store
        self.n = len(plan.value_sets)
        self.starts = [vs.start_ms for vs in plan.value_sets]

    def select(
        self,
        name: str,
        reducer: Reducer,
        group_by: tuple[str, ...] = (),
        matchers: Matchers = (),
    ) -> SelectResult:
        return self.store.select(Selection(name, reducer, self.plan.value_sets, group_by, matchers))

    def seconds(self, i: int) -> float:
        vs = self.plan.value_sets[i]
        return max(vs.end_ms - vs.start_ms, 1) / 1000.0

    def series(self, values: list[float | None]) -> Series:
        """The points that have a finite value (gaps left out)."""
        return tuple(
            Point(self.starts[i], v) for i, v in enumerate(values) if v is not None and math.isfinite(v)
        )

    def total(self, res: SelectResult, f: Callable[[Cell], float] = lambda c: c.total) -> list[float | None]:
        """Per point: the sum over groups of ``f(cell)``, None where no group has data."""
        out: list[float | None] = [None] * self.n
        for cells in res.values():
            for i, c in enumerate(cells):
                if c is not None:
                    out[i] = (out[i] or 0.0) + f(c)
        return out


def _node_matchers(node: LoopsNode, kubelet: bool) -> Matchers:
    out = [("node_id", node.node_id)]
    if kubelet and node.pod:
        out.append(("pod", node.pod))
    if kubelet and node.namespace:
        out.append(("namespace", node.namespace))
    return tuple(out)


def _per_rank(q: _Query, node: LoopsNode, name: str, f: Callable[[Cell], float]) -> PerRank:
    res = q.select(name, Reducer.MEAN, ("gpu",), _node_matchers(node, kubelet=False))
    found = {int(k[0]): cells for k, cells in res.items() if k[0].isdigit()}
    ranks = node.gpu_ranks or tuple(found)
    out: PerRank = {}
    for rank in sorted(ranks):
        cells = found.get(rank, [None] * q.n)
        out[rank] = q.series([f(c) if c is not None else None for c in cells])
    return out


def _ratio(a: list[float | None], b: list[float | None]) -> list[float | None]:
    return [x / y if x is not None and y else None for x, y in zip(a, b, strict=True)]


def _ephemeral(q: _Query, node: LoopsNode) -> Storage:
    kubelet = _node_matchers(node, kubelet=True) + (("source", "kubelet_summary"),)
    used = q.total(q.select(EPHEMERAL_USED, Reducer.MEAN, ("pod", "namespace"), kubelet))
    if any(v is not None for v in used):
        capacity = q.total(
            q.select(EPHEMERAL_CAPACITY, Reducer.MEAN, (), kubelet), lambda c: c.total / c.series
        )
    else:
        host = _node_matchers(node, kubelet=False) + (("source", "node_exporter"),)
        mean: Callable[[Cell], float] = lambda c: c.total / c.series  # noqa: E731
        capacity = q.total(q.select(EPHEMERAL_CAPACITY, Reducer.MEAN, (), host), mean)
        free = q.total(q.select(EPHEMERAL_AVAILABLE, Reducer.MEAN, (), host), mean)
        used = [
            c - f if c is not None and f is not None else None for c, f in zip(capacity, free, strict=True)
        ]
    return Storage(q.series(used), q.series(_ratio(used, capacity)))


def node_metrics(q: _Query, node: LoopsNode) -> NodeUsage:
    """The compute of one node (``LoopsDeploymentNodeMetricsV1``)."""
    kubelet = _node_matchers(node, kubelet=True)
    cpu = q.select(CPU, Reducer.INCREASE, (), kubelet).get((), [None] * q.n)
    memory = q.select(MEMORY, Reducer.MEAN, (), kubelet).get((), [None] * q.n)
    return NodeUsage(
        node.node_id,
        _per_rank(q, node, GPU_MEMORY, lambda c: c.total * MIB),
        _per_rank(q, node, GPU_UTIL, lambda c: c.total / c.series),
        q.series([c.total / q.seconds(i) if c else None for i, c in enumerate(cpu)]),
        q.series([c.total if c else None for c in memory]),
        _ephemeral(q, node),
    )


def _live(q: _Query) -> list[bool]:
    """Per point: was a request source of some node up (``up`` == 1 at least once)?"""
    urls = {(n.node_id, url) for n in q.plan.nodes for url in n.request_targets}
    if not urls:
        return [False] * q.n
    res = q.select(UP, Reducer.MEAN, ("node_id", "instance"))
    out = [False] * q.n
    for key, cells in res.items():
        if key in urls:
            out = [o or (c is not None and c.total > 0) for o, c in zip(out, cells, strict=True)]
    return out


def _volumes(q: _Query) -> tuple[Series, tuple[StatusPoint, ...]]:
    """Request volume, in total and by status class (per ``time_divisor_seconds``)."""
    res = q.select(REQUESTS, Reducer.INCREASE, ("node_id", "status_code"))
    live = _live(q)
    volume: list[Point] = []
    by_status: list[StatusPoint] = []
    for i in range(q.n):
        cells = [(key[1], c) for key, cells in res.items() if key[0] and (c := cells[i]) is not None]
        if not cells and not live[i]:
            continue  # no request source reported: a gap
        unit = q.plan.divisor_s / q.seconds(i)
        classes = dict.fromkeys(STATUS_CLASSES, 0.0)
        for code, c in cells:
            cls = status_class(code)
            if cls is not None:
                classes[cls] += c.total * unit
        volume.append(Point(q.starts[i], sum(c.total for _, c in cells) * unit))
        by_status.append(StatusPoint(q.starts[i], classes))
    return tuple(volume), tuple(by_status)


def _bound(le: str) -> float | None:
    try:
        return parse_le(le)
    except ValueError:
        return None  # ingest refuses such buckets; one stored earlier must not break a query


def _latency(q: _Query) -> tuple[LatencyPoint, ...]:
    """p50 / p95 / p99 in ms for every point, None without requests."""
    res = q.select(LATENCY + "_bucket", Reducer.INCREASE, ("le",))
    buckets = sorted((b, cells) for k, cells in res.items() if (b := _bound(k[0])) is not None)
    out: list[LatencyPoint] = []
    for i in range(q.n):
        present = [(b, c.total) for b, cells in buckets if (c := cells[i]) is not None]
        bounds, counts = [b for b, _ in present], [c for _, c in present]
        ms: list[float | None] = []
        for quantile in PERCENTILES:
            v = bucket_quantile(quantile, bounds, counts) if present else None
            ms.append(v * 1000.0 if v is not None and math.isfinite(v) else None)
        out.append(LatencyPoint(q.starts[i], *ms))
    return tuple(out)


def execute_loops(plan: LoopsPlan, store: Store) -> LoopsResult:
    """Answer ``plan`` from ``store`` (the rules are in the module docstring)."""
    q = _Query(plan, store)
    nodes = tuple(node_metrics(q, n) for n in plan.nodes)
    leader = next((m for n, m in zip(plan.nodes, nodes, strict=True) if n.leader), None)
    in_flight = q.select(IN_FLIGHT, Reducer.MEAN, ("node_id",))
    volume, by_status = _volumes(q)
    return LoopsResult(
        volume=volume,
        concurrency=q.series(q.total({k: v for k, v in in_flight.items() if k[0]})),
        latency=_latency(q),
        volume_by_status=by_status,
        leader=leader,
        nodes=nodes,
    )
