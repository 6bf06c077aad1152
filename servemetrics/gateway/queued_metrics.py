"""The queued (async) requests' metrics, registered on the gateway's own registry (``GET /gateway/metrics``).

Names are the platform's (platform-facts §1). ``baseten_async_queue_size`` is a deployment gauge computed
at scrape time with the DEP labels plus ``source="gateway"`` (like the gateway's other gauges), for the
deployments given an async request since the service started only (no async traffic, no async series);
``baseten_time_in_async_queue_seconds`` and ``baseten_async_webhook_latency_seconds`` are DEP
histograms; ``baseten_async_webhook_requests_total`` counts delivery attempts with DEP plus
``status_code`` (599 for a connection error or timeout: no answer). Async executions themselves are
counted in the gateway's REQ series with ``is_async="true"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from servemetrics.gateway.metrics import LATENCY_BUCKETS_S
from servemetrics.labels import DEPLOYMENT_LABELS

NO_ANSWER_STATUS = 599
"""``status_code`` of a webhook attempt that got no answer (refused, reset, timed out)."""

QueueSizes = Callable[[], Iterable[tuple[tuple[str, ...], int]]]


class _QueueSizeCollector(Collector):
    def __init__(self, sizes: QueueSizes) -> None:
        self._sizes = sizes

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "baseten_async_queue_size",
            "Async requests waiting in the queue.",
            labels=[*DEPLOYMENT_LABELS, "source"],
        )
        for labels, size in self._sizes():
            family.add_metric([*labels, "gateway"], float(size))
        yield family


class QueuedMetrics:
    """Async series on ``registry`` (the gateway's); ``sizes`` gives (DEP labels, queued) at scrape time."""

    def __init__(self, registry: CollectorRegistry, sizes: QueueSizes) -> None:
        self.time_in_queue = Histogram(
            "baseten_time_in_async_queue_seconds",
            "Time async requests spend queued before processing, in seconds.",
            DEPLOYMENT_LABELS,
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.webhook_requests = Counter(
            "baseten_async_webhook_requests",
            "Async webhook delivery attempts, by the receiver's status code (599: no answer).",
            (*DEPLOYMENT_LABELS, "status_code"),
            registry=registry,
        )
        self.webhook_latency = Histogram(
            "baseten_async_webhook_latency_seconds",
            "Latency of async webhook delivery attempts, in seconds.",
            DEPLOYMENT_LABELS,
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        registry.register(_QueueSizeCollector(sizes))
