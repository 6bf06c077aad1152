"""THE catalog: every canonical metric the API serves, one row each.

Rows follow ``platform-facts.md`` §1 (the 19 platform metrics) plus the DCGM-derived GPU metrics
(tensor core and memory bandwidth activity; power, SM clock and memory health, ``exporters.md`` §4) and
three that our gateway exports (``baseten_incoming_inference_requests_total``, ``baseten_replicas_desired``,
``baseten_inference_time_seconds``, the spec page's "Inference time" graph; docs/gateway.md).
Conversions made at ingest so that the API reports the unit given here:

- ``baseten_gpu_utilization`` is stored as a 0-1 RATIO (the platform exports percent 0-100; DCGM's
  ``DEV_GPU_UTIL`` is percent, its ``PROF_*`` fields are already 0-1).
- ``baseten_gpu_memory_used`` stays in MEBIBYTES, as the platform reports it.
- ``baseten_gpu_sm_clock_hertz`` is in hertz (DCGM's ``DEV_SM_CLOCK`` is MHz); power stays in watts.
- ``baseten_container_cpu_usage_seconds_total`` is a CPU-seconds counter; the API reports its rate,
  i.e. CPU cores (RATIO, may exceed 1).

Tests keep this table, the recipes and ``docs/catalog.md`` in agreement.
"""

from __future__ import annotations

from servemetrics.catalog.engine_rows import ENGINE_ROWS
from servemetrics.catalog.model import (
    HISTOGRAM_LABEL_SETS,
    STATUS_LABEL_SETS,
    Aggregation,
    Kind,
    MetricDef,
    Scope,
    Unit,
)
from servemetrics.catalog.model_apis import MODEL_API_ROWS

_SUM, _MEAN = Aggregation.SUM, Aggregation.MEAN
_DEP, _REP = Scope.DEPLOYMENT, Scope.REPLICA
CONTAINER_SOURCES: tuple[str, ...] = ("cadvisor", "kubelet_resource", "process")
"""The views of a replica's container CPU and memory, most preferred first (DESIGN "Query semantics":
one container, one value): cAdvisor (``/metrics/cadvisor``, or standalone), the kubelet's
``/metrics/resource``, the model server's own ``process_*`` collector."""
REQUEST_SOURCES: tuple[str, ...] = ("", "knative", "ray_serve", "kserve", "triton", "tgi", "http")
"""Who counts a deployment's requests (``MetricDef.request_sources``), most preferred first: our gateway
(no ``source``; it meters every request it forwards, queueing included), Knative's queue-proxy (in front
of the user container), then the serving stack's or the custom server's own counters
(``ingest.adapters.custom_servers``). One deployment's requests come from one of them per value set."""
_READINESS = ({"condition": "true"}, {"condition": "false"}, {"condition": "unknown"})
_REMAPPED_ROWS = ({"rows": "correctable"}, {"rows": "uncorrectable"})


INFERENCE_TIME_SOURCES: tuple[str, ...] = ("", "vllm", "tgi")
"""Who measures a deployment's inference time, most preferred first (as ``REQUEST_SOURCES``): our gateway,
from the replica's ``Server-Timing`` header (no ``source`` label), then the engines' own histograms."""


def _hist(name: str, unit: Unit, help: str, panel: str, request_sources: tuple[str, ...] = ()) -> MetricDef:
    return MetricDef(
        name,
        Kind.HISTOGRAM,
        unit,
        _SUM,
        help,
        label_sets=HISTOGRAM_LABEL_SETS,
        panel=panel,
        default_visible=True,
        request_sources=request_sources,
    )


_ROWS: tuple[MetricDef, ...] = (
    MetricDef(
        "baseten_inference_requests_total",
        Kind.COUNTER,
        Unit.COUNT,
        _SUM,
        "Requests answered in the step, by status class of the response (2xx / 4xx / 5xx).",
        by_label="status_code",
        label_sets=STATUS_LABEL_SETS,
        panel="Inference volume",
        default_visible=True,
        request_sources=REQUEST_SOURCES,
    ),
    MetricDef(
        "baseten_incoming_inference_requests_total",
        Kind.COUNTER,
        Unit.COUNT,
        _SUM,
        "Requests that arrived at the gateway in the step (counted at arrival, before queueing).",
        panel="Incoming request volume",
        default_visible=True,
    ),
    _hist(
        "baseten_end_to_end_response_time_seconds",
        Unit.SECONDS,
        "End-to-end response time (queueing, cold start and inference), in seconds.",
        "End-to-end response time",
        REQUEST_SOURCES,
    ),
    _hist(
        "baseten_inference_time_seconds",
        Unit.SECONDS,
        "Inference time (model execution incl. pre/post-processing), in seconds: the replica's "
        "Server-Timing, or vLLM's request_inference_time_seconds (docs/gateway.md, docs/ingest.md).",
        "Inference time",
        INFERENCE_TIME_SOURCES,
    ),
    _hist(
        "baseten_time_to_first_byte_seconds",
        Unit.SECONDS,
        "Time to the first byte of the response, in seconds (a proxy for time to first token).",
        "Time to first byte",
    ),
    _hist("baseten_request_size_bytes", Unit.BYTES, "Request body size in bytes.", "Request size"),
    _hist("baseten_response_size_bytes", Unit.BYTES, "Response body size in bytes.", "Response size"),
    MetricDef(
        "baseten_replicas_active",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Replicas ready to serve requests.",
        scope=_DEP,
        panel="Replicas",
        legend="Active",
        default_visible=True,
    ),
    MetricDef(
        "baseten_replicas_starting",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Replicas starting: waiting for resources or loading the model.",
        scope=_DEP,
        panel="Replicas",
        legend="Starting",
        default_visible=True,
    ),
    MetricDef(
        "baseten_replicas_desired",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Replicas the autoscaling settings ask for at the current concurrency (in-flight tokens when "
        "target_in_flight_tokens is set; docs/gateway.md).",
        scope=_DEP,
        panel="Replicas",
        legend="Desired",
        default_visible=True,
    ),
    MetricDef(
        "baseten_container_restarts_total",
        Kind.COUNTER,
        Unit.COUNT,
        _SUM,
        "Container restarts in the step (crashes, OOM kills, failed liveness probes).",
        panel="Restarts",
        default_visible=True,
    ),
    MetricDef(
        "baseten_concurrent_requests",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "In-flight requests (being served or queued), async requests excluded.",
        scope=_DEP,
        panel="Concurrent requests",
        default_visible=True,
    ),
    MetricDef(
        "baseten_container_cpu_usage_seconds_total",
        Kind.COUNTER,
        Unit.RATIO,
        _MEAN,
        "CPU used per replica, in cores (CPU-seconds per second), mean across replicas.",
        scope=_REP,
        sources=CONTAINER_SOURCES,
        panel="CPU usage",
        default_visible=True,
    ),
    MetricDef(
        "baseten_container_cpu_memory_working_set_bytes",
        Kind.GAUGE,
        Unit.BYTES,
        _MEAN,
        "Working-set memory per replica in bytes, mean across replicas.",
        scope=_REP,
        sources=CONTAINER_SOURCES,
        panel="CPU memory",
        default_visible=True,
    ),
    MetricDef(
        "baseten_gpu_utilization",
        Kind.GAUGE,
        Unit.RATIO,
        _MEAN,
        "Fraction of time a kernel ran on the GPU (0-1; converted from percent), mean across GPUs.",
        panel="GPU usage",
        default_visible=True,
    ),
    MetricDef(
        "baseten_gpu_memory_used",
        Kind.GAUGE,
        Unit.MEBIBYTES,
        _MEAN,
        "GPU memory used per GPU in MiB, mean across GPUs.",
        panel="GPU memory",
        default_visible=True,
    ),
    MetricDef(
        "baseten_gpu_temperature_celsius",
        Kind.GAUGE,
        Unit.CELSIUS,
        _MEAN,
        "GPU temperature in degrees Celsius (unit hint CELSIUS, the platform SDK's), mean across GPUs.",
        panel="GPU temperature",
        default_visible=True,
    ),
    MetricDef(
        "baseten_gpu_tensor_core_utilization",
        Kind.GAUGE,
        Unit.RATIO,
        _MEAN,
        "Fraction of cycles the tensor pipe was active (0-1), mean across GPUs.",
        panel="GPU tensor core utilization",
        default_visible=True,
    ),
    MetricDef(
        "baseten_gpu_memory_bandwidth_utilization",
        Kind.GAUGE,
        Unit.RATIO,
        _MEAN,
        "Fraction of cycles the device-memory interface was active (0-1), mean across GPUs.",
        panel="GPU memory bandwidth utilization",
        default_visible=True,
    ),
    _hist(
        "baseten_time_in_async_queue_seconds",
        Unit.SECONDS,
        "Time async requests wait in the queue before processing, in seconds.",
        "Time in async queue",
    ),
    MetricDef(
        "baseten_async_queue_size",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Async requests waiting in the queue.",
        scope=_DEP,
        panel="Async queue size",
        default_visible=True,
    ),
    MetricDef(
        "baseten_async_webhook_requests_total",
        Kind.COUNTER,
        Unit.COUNT,
        _SUM,
        "Async webhook deliveries sent in the step, by status class.",
        by_label="status_code",
        label_sets=STATUS_LABEL_SETS,
        panel="Webhook requests",
        default_visible=True,
    ),
    _hist(
        "baseten_async_webhook_latency_seconds",
        Unit.SECONDS,
        "Latency of async webhook deliveries, in seconds.",
        "Webhook latency",
    ),
    MetricDef(
        "baseten_ongoing_websocket_connections",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Open websocket connections.",
        scope=_DEP,
        panel="WebSocket connections",
    ),
    MetricDef(
        "baseten_pod_readiness",
        Kind.GAUGE,
        Unit.COUNT,
        _SUM,
        "Pods by Kubernetes Ready condition (true / false / unknown).",
        scope=_DEP,
        by_label="condition",
        label_sets=_READINESS,
        panel="Pod readiness",
    ),
    MetricDef(
        "baseten_gpu_power_usage_watts",
        Kind.GAUGE,
        Unit.WATTS,
        _MEAN,
        "GPU power draw in watts, mean across GPUs.",
        panel="GPU power",
        legend="Mean per GPU",
    ),
    MetricDef(
        "baseten_gpu_power_total_watts",
        Kind.GAUGE,
        Unit.WATTS,
        _SUM,
        "GPU power draw in watts, summed over every GPU.",
        panel="GPU power",
        legend="Total",
    ),
    MetricDef(
        "baseten_gpu_sm_clock_hertz",
        Kind.GAUGE,
        Unit.PER_SECOND,
        _MEAN,
        "GPU streaming-multiprocessor clock in hertz (converted from MHz), mean across GPUs.",
        panel="GPU SM clock",
    ),
    MetricDef(
        "baseten_gpu_remapped_rows_total",
        Kind.COUNTER,
        Unit.COUNT,
        _SUM,
        "GPU memory rows remapped in the step, by correctable / uncorrectable error, summed over GPUs.",
        by_label="rows",
        label_sets=_REMAPPED_ROWS,
        panel="GPU memory health",
        legend="Remapped rows",
    ),
    MetricDef(
        "baseten_gpu_row_remap_failure",
        Kind.GAUGE,
        Unit.RATIO,
        _MEAN,
        "Fraction of GPUs whose memory row remapping failed (0-1; DCGM reports 0 or 1 per GPU).",
        panel="GPU memory health",
        legend="Remap failed",
    ),
)

CATALOG: dict[str, MetricDef] = {m.name: m for m in _ROWS + ENGINE_ROWS + MODEL_API_ROWS}
"""Canonical metric name -> definition, in the catalog's order: the dashboard's panel order (the spec
page's graphs first, in the page's order; then the Engine group (``catalog.engines``) and the LLM group
(``catalog.llm`` and the engines' derived token speeds), grouped and shown by ``catalog.engine_rows``),
then the Model APIs group (``catalog.model_apis``)."""

DEFAULT_METRICS: tuple[str, ...] = (
    "baseten_replicas_active",
    "baseten_inference_requests_total",
    "baseten_end_to_end_response_time_seconds",
)
"""Metrics answered when a request names none (spec: the metrics endpoint's default set)."""
