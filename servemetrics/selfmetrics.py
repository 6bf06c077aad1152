"""The service's own metrics (exposed at ``/service/metrics`` with ``prometheus_client``).

One ``SelfMetrics`` per service instance, each with its own ``CollectorRegistry`` (no global state, so
several apps can live in one process, as tests do). ``registry`` holds every label, tenant ones too
(``TENANT_LABELS``: which model, deployment, replica, target URL or organization a value is about);
``public`` is the view served without a key: the same families with those labels summed away
(``TenantFree``), so ``servemetrics_target_up`` there counts the targets up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

SCRAPE_TARGET_LABELS = ["model_id", "deployment_id", "replica", "target"]
TENANT_LABELS = frozenset({*SCRAPE_TARGET_LABELS, "organization"})
"""Labels that name a tenant's model, deployment, replica, target URL or organization."""

REMOTE_WRITE_METRICS: dict[str, tuple[str, str, str]] = {
    "queue_samples": (
        "gauge",
        "servemetrics_remote_write_queue_samples",
        "Samples queued for the engine (memory, in flight and the disk buffer).",
    ),
    "buffer_bytes": ("gauge", "servemetrics_remote_write_buffer_bytes", "Bytes in the on-disk buffer."),
    "sent_samples": ("counter", "servemetrics_remote_write_sent_samples", "Samples the engine accepted."),
    "failed_samples": (
        "counter",
        "servemetrics_remote_write_failed_samples",
        "Samples the engine refused (a 4xx other than 429), dropped and logged.",
    ),
    "retries": (
        "counter",
        "servemetrics_remote_write_retries",
        "Sends retried after a 5xx, 429 or connection error.",
    ),
}
"""``RemoteWriteClient.stats()`` key -> (type, metric name, help) on ``/metrics``."""


class _RemoteWriteCollector(Collector):
    """Reads the remote_write counters at scrape time (the client keeps them; no copies to drift)."""

    def __init__(self, read: Callable[[], Mapping[str, float]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        values = self._read()
        for key, (kind, name, help_text) in REMOTE_WRITE_METRICS.items():
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, help_text, value=float(values.get(key, 0.0)))


class TenantFree(Collector):
    """The families of ``registry`` without ``TENANT_LABELS``: samples left with the same name and
    labels are summed (a ``_created`` sample, a timestamp, takes the earliest)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        """Each family of the registry, its samples merged as the class docstring says."""
        for family in self._registry.collect():
            merged: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
            for s in family.samples:
                key = (s.name, tuple((k, v) for k, v in s.labels.items() if k not in TENANT_LABELS))
                seen = merged.get(key)
                created = s.name.endswith("_created")
                merged[key] = s.value if seen is None else min(seen, s.value) if created else seen + s.value
            out = Metric(family.name, family.documentation, family.type, family.unit)
            for (name, labels), value in merged.items():
                out.add_sample(name, dict(labels), value)
            yield out


class SelfMetrics:
    """Counters and histograms about scraping, ingest and queries.

    Attributes:
        registry: the ``CollectorRegistry`` of every series, tenant labels included.
        public: the registry served without a key: ``registry`` through ``TenantFree``.
        scrape_duration: histogram of scrape durations in seconds, by ``target_source`` (``gateway``:
            the gateway's own series, read in-process; ``registry``: a target of the registry).
        scrapes: counter of scrapes by ``result`` (``ok`` / ``error``).
        scrape_duplicates: counter of duplicate samples dropped within one scrape, by ``target``.
        samples_appended: counter of samples newly stored, by ``path`` (scrape / remote_write / import).
        query_latency: histogram of metrics-query latency in seconds, by ``mode``.
        ingest_in_flight: gauge of pushed requests being stored or waiting (``api.ingest_pool``).
        ingest_refused: counter of pushed requests refused with 503 (the ingest queue was full).
        targets: gauge of configured scrape targets.
        target_up: per target (``SCRAPE_TARGET_LABELS``), 1 when its last scrape succeeded.
        refused_samples: counter of samples of new series refused by the active-series limit, by
            ``organization`` (config ``limits.series_per_organization``).
        gateway_refused: counter of inference and Model API calls refused before they reached a model
            or Model API (400, 401, 403, 404, 413 and the failed-key 429), by ``route`` (``model``: the
            model routes; ``model_api``: the OpenAI routes) and ``status_code``; no tenant label (whom
            such a call names is the caller's choice), so no organization's series grows from them.
        custom_series_dropped: counter of a replica target's custom series not kept, per scrape, by
            target (``SCRAPE_TARGET_LABELS``) and ``reason`` (``series_limit``: over
            ``custom_series_limit``; ``reserved_name``: a ``baseten_*`` / ``servemetrics_*`` / ``up`` name).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.public = CollectorRegistry(auto_describe=False)
        self.public.register(TenantFree(self.registry))
        r = self.registry
        self.scrape_duration = Histogram(
            "servemetrics_scrape_duration_seconds",
            "Duration of one scrape (request, parse, adapt, store).",
            ["target_source"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.scrapes = Counter("servemetrics_scrapes", "Scrapes by result.", ["result"], registry=r)
        self.scrape_duplicates = Counter(
            "servemetrics_scrape_duplicate_samples",
            "Samples dropped as duplicates within one scrape.",
            ["target"],
            registry=r,
        )
        self.samples_appended = Counter(
            "servemetrics_samples_appended",
            "Samples newly stored, by ingest path.",
            ["path"],
            registry=r,
        )
        self.query_latency = Histogram(
            "servemetrics_query_duration_seconds",
            "Latency of metrics queries.",
            ["mode"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
        )
        self._ingest_metrics(r)
        self.targets = Gauge("servemetrics_scrape_targets", "Configured scrape targets.", registry=r)
        self.target_up = Gauge(
            "servemetrics_target_up",
            "1 when the last scrape of the target succeeded, else 0.",
            SCRAPE_TARGET_LABELS,
            registry=r,
        )
        self._limit_metrics(r)

    def _limit_metrics(self, r: CollectorRegistry) -> None:
        """The counters of what a limit kept out: series refused, custom series dropped."""
        self.refused_samples = Counter(
            "servemetrics_series_limit_refused_samples",
            "Samples of new series refused: their organization was at limits.series_per_organization.",
            ["organization"],
            registry=r,
        )
        self.gateway_refused = Counter(
            "servemetrics_gateway_refused_requests",
            "Inference and Model API calls refused before they reached a model or Model API, by route "
            "(model, model_api) and status code.",
            ["route", "status_code"],
            registry=r,
        )
        self.custom_series_dropped = Counter(
            "servemetrics_custom_series_dropped",
            "Custom series of a replica's target not kept in a scrape, by reason: series_limit (over "
            "custom_series_limit) or reserved_name (baseten_*, servemetrics_*, up).",
            [*SCRAPE_TARGET_LABELS, "reason"],
            registry=r,
        )

    def _ingest_metrics(self, r: CollectorRegistry) -> None:
        """The ingest pool's gauge and counter (``api/ingest_pool.IngestPool``)."""
        self.ingest_in_flight = Gauge(
            "servemetrics_ingest_in_flight",
            "Remote_write and import requests being stored or waiting for an ingest worker.",
            registry=r,
        )
        self.ingest_refused = Counter(
            "servemetrics_ingest_refused",
            "Remote_write and import requests answered 503: every ingest worker and queue place was taken.",
            registry=r,
        )

    def watch_remote_write(self, read: Callable[[], Mapping[str, float]]) -> None:
        """Expose the remote_write client's counters (``REMOTE_WRITE_METRICS``; ``read`` returns them by
        key: samples queued, sent, failed, retries, buffer bytes) on this registry."""
        self.registry.register(_RemoteWriteCollector(read))
