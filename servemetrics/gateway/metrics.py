"""The gateway's own metrics: a separate ``CollectorRegistry``, read by the service's scraper in-process
(``ExpositionTransport``) and served to a key at ``GET /gateway/metrics`` (its organization's series only).

Names and labels are the platform's (platform-facts §1). Per-request series carry the REQ label set
(``model_id, model_name, deployment_id, environment, rollout_phase, status_code, is_async``); the
incoming counter carries the DEP set plus ``is_async`` (the status is not known at arrival). The
deployment gauges (concurrency, replicas active / starting / desired, open WebSocket connections) are
computed at scrape time by a collector and carry the DEP set plus ``source="gateway"``, so a deployment
whose replicas also export ``baseten_replicas_active`` is averaged with them, not summed
(docs/query-semantics.md). A WebSocket connection is counted once, when it closes, in
``baseten_inference_requests_total`` with its close code as ``status_code`` (platform-facts §1: "For
WebSocket/gRPC models … the protocol's own codes are used"; docs/gateway.md "WebSockets").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from servemetrics.labels import DEPLOYMENT_LABELS

REQ_LABELS = (*DEPLOYMENT_LABELS, "status_code", "is_async")


class DeploymentLabels(NamedTuple):
    """The DEP label values of a deployment's series, in the order of ``labels.DEPLOYMENT_LABELS``."""

    model_id: str
    model_name: str
    deployment_id: str
    environment: str
    rollout_phase: str


LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.35, 0.5, 0.75,
    1.0, 1.5, 2.5, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""Seconds: 5 ms to 10 minutes, about 2 to 2.5 buckets per decade (docs/gateway.md)."""

SIZE_BUCKETS_BYTES: tuple[float, ...] = tuple(float(2**i) for i in range(8, 27))
"""Bytes: 256 B to 64 MiB, a factor of 2 apart (a factor of 4 put 16-17 KB prompts in (16 KiB, 64 KiB],
whose interpolated p99 read 59 KiB)."""


@dataclass(frozen=True)
class DeploymentGauges:
    """One deployment's gauge values at scrape time (counts); ``desired`` None: not exported (the
    deployment's autoscaling settings are unknown); ``websockets`` None: not exported (no WebSocket
    connection to the deployment since the service started)."""

    labels: DeploymentLabels
    concurrent: int
    active: int
    starting: int
    desired: int | None
    websockets: int | None = None


class _GaugeCollector(Collector):
    def __init__(self, snapshot: Callable[[], Iterable[DeploymentGauges]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        names = {
            "concurrent": ("baseten_concurrent_requests", "In-flight plus queued requests (async excluded)."),
            "active": ("baseten_replicas_active", "Replicas passing their health check."),
            "starting": ("baseten_replicas_starting", "Replicas not yet healthy."),
            "desired": ("baseten_replicas_desired", "Replicas the autoscaling settings ask for now."),
            "websockets": ("baseten_ongoing_websocket_connections", "Open WebSocket connections."),
        }
        families = {
            key: GaugeMetricFamily(name, doc, labels=[*DEPLOYMENT_LABELS, "source"])
            for key, (name, doc) in names.items()
        }
        for g in self._snapshot():
            labels = [*g.labels, "gateway"]
            for key, family in families.items():
                value = getattr(g, key)
                if value is not None:
                    family.add_metric(labels, float(value))
        yield from families.values()


def _req_histogram(
    registry: CollectorRegistry, name: str, doc: str, buckets: tuple[float, ...] = LATENCY_BUCKETS_S
) -> Histogram:
    """A per-request histogram (REQ labels) in ``registry``."""
    return Histogram(name, doc, REQ_LABELS, buckets=buckets, registry=registry)


class GatewayMetrics:
    """The counters and histograms the proxy updates, and the registry they live in."""

    def __init__(self, gauges: Callable[[], Iterable[DeploymentGauges]]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "baseten_inference_requests", "Requests answered, by status code.", REQ_LABELS, registry=r
        )
        self.incoming = Counter(
            "baseten_incoming_inference_requests",
            "Requests that arrived (counted at arrival, before queueing).",
            (*DEPLOYMENT_LABELS, "is_async"),
            registry=r,
        )
        self.end_to_end = _req_histogram(
            r,
            "baseten_end_to_end_response_time_seconds",
            "Arrival to last byte sent, in seconds (queueing included).",
        )
        self.inference = _req_histogram(
            r,
            "baseten_inference_time_seconds",
            "Model execution time the replica reports in its Server-Timing header, in seconds.",
        )
        self.ttfb = _req_histogram(
            r,
            "baseten_time_to_first_byte_seconds",
            "Arrival to first body byte sent, in seconds (queueing and routing included).",
        )
        self.request_size = _req_histogram(
            r, "baseten_request_size_bytes", "Request body size.", SIZE_BUCKETS_BYTES
        )
        self.response_size = _req_histogram(
            r, "baseten_response_size_bytes", "Response body size.", SIZE_BUCKETS_BYTES
        )
        r.register(_GaugeCollector(gauges))
        # label children bound once per label set: the request path skips ``labels()`` lookups
        self._children: dict[tuple[tuple[str, ...], int], tuple[Any, ...]] = {}
        self._incoming: dict[tuple[str, ...], Any] = {}
        self._inference: dict[tuple[tuple[str, ...], int], Any] = {}

    def observe(
        self,
        dep_labels: tuple[str, ...],
        status: int,
        *,
        ttfb_s: float,
        end_to_end_s: float,
        request_bytes: int,
        response_bytes: int,
        inference_s: float | None = None,
    ) -> None:
        """Record one answered request (synchronous, non-async); times in seconds, sizes in bytes.
        ``inference_s`` (the replica's ``Server-Timing``, ``gateway.server_timing``) is observed only
        when the replica reported it: None leaves ``baseten_inference_time_seconds`` as it is."""
        key = (dep_labels, status)
        children = self._children.get(key)
        if children is None:
            labels = (*dep_labels, str(status), "false")
            children = self._children[key] = (
                self.requests.labels(*labels),
                self.end_to_end.labels(*labels),
                self.ttfb.labels(*labels),
                self.request_size.labels(*labels),
                self.response_size.labels(*labels),
            )
        requests, end_to_end, ttfb, request_size, response_size = children
        requests.inc()
        end_to_end.observe(end_to_end_s)
        ttfb.observe(ttfb_s)
        request_size.observe(request_bytes)
        response_size.observe(response_bytes)
        if inference_s is not None:
            child = self._inference.get(key)
            if child is None:  # made at the first report: no empty series for replicas that send none
                child = self._inference[key] = self.inference.labels(*dep_labels, str(status), "false")
            child.observe(inference_s)

    def count_closed(self, dep_labels: tuple[str, ...], close_code: int) -> None:
        """Count one closed WebSocket connection in ``baseten_inference_requests_total`` with
        ``status_code`` = its close code (1000, 1011 …, docs/gateway.md "WebSockets"); the response-time
        and size histograms are left as they are (a connection's length is no response time)."""
        self.requests.labels(*dep_labels, str(close_code), "false").inc()

    def count_incoming(self, dep_labels: tuple[str, ...]) -> None:
        """Count one arriving (synchronous) request."""
        child = self._incoming.get(dep_labels)
        if child is None:
            child = self._incoming[dep_labels] = self.incoming.labels(*dep_labels, "false")
        child.inc()

    def exposition(self) -> bytes:
        """The Prometheus text format of every gateway series."""
        return generate_latest(self.registry)

    def exposition_of(self, model_ids: frozenset[str], team: str | None = None) -> bytes:
        """The Prometheus text format of the gateway series whose ``model_id`` is in ``model_ids`` (and,
        for a ``team``'s key, none of another team's: ``registry.team_bound``)."""
        view = CollectorRegistry(auto_describe=False)
        view.register(_OnlyModels(self.registry, model_ids, team))
        return generate_latest(view)


class _OnlyModels(Collector):
    """The families of ``registry`` with only the samples of ``model_ids`` and, given a ``team``, no
    sample of another team's (a ``team_id`` label; families left empty too)."""

    def __init__(self, registry: CollectorRegistry, model_ids: frozenset[str], team: str | None) -> None:
        self._registry, self._model_ids, self._team = registry, model_ids, team

    def collect(self) -> Iterator[Metric]:
        team = self._team
        for family in self._registry.collect():
            family.samples = [
                s
                for s in family.samples
                if s.labels.get("model_id") in self._model_ids
                and (team is None or s.labels.get("team_id", team) == team)
            ]
            yield family


class ExpositionTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that answers every request with ``exposition()`` (Prometheus text, 200),
    without a socket: the scraper reads the gateway's series through it like any target's, and no
    port has to serve them without a key."""

    def __init__(self, exposition: Callable[[], bytes]) -> None:
        self._exposition = exposition

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """200 with the exposition of now, whatever ``request`` asks."""
        return httpx.Response(200, headers={"content-type": CONTENT_TYPE_LATEST}, content=self._exposition())
