"""The export's cache and exposition: ``SnapshotCache`` (one snapshot per organization, rebuilt at most
every ``REFRESH_MS``) and ``ExportCollector`` (a ``prometheus_client`` collector over one snapshot, in the
scope of one key), encoded by ``prometheus_client.exposition`` (Prometheus text, or OpenMetrics when the
``Accept`` header asks).

platform-facts §2: the platform's endpoint "is updated every 30 seconds"; so is ours, per organization,
whatever the number of keys or scrapers that read it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from servemetrics.api.export_snapshot import ExportedFamily, ExportedSeries, Snapshot
from servemetrics.catalog import Kind
from servemetrics.catalog.model_apis import PREFIX as MODEL_API_PREFIX

REFRESH_MS = 30_000
"""A snapshot younger than this (ms) is served again (platform-facts §2: updated every 30 s)."""


class SnapshotCache:
    """The latest snapshot per organization id; ``get`` rebuilds one that is ``REFRESH_MS`` old.

    Args:
        clock: epoch-ms now.
        refresh_ms: the snapshots' lifetime.
    """

    def __init__(self, clock: Callable[[], int], refresh_ms: int = REFRESH_MS) -> None:
        self._clock, self.refresh_ms = clock, refresh_ms
        self._snapshots: dict[int, Snapshot] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, organization_id: int, build: Callable[[int], Snapshot]) -> Snapshot:
        """The organization's snapshot: the cached one while younger than ``refresh_ms``, else
        ``build(now_ms)`` (cached; concurrent callers of one organization wait for one build)."""
        with self._guard:
            lock = self._locks.setdefault(organization_id, threading.Lock())
        with lock:
            now = self._clock()
            cached = self._snapshots.get(organization_id)
            if cached is not None and 0 <= now - cached.built_ms < self.refresh_ms:
                return cached
            snapshot = self._snapshots[organization_id] = build(now)
            return snapshot


def _family(family: ExportedFamily, series: list[ExportedSeries]) -> Metric:
    """One ``prometheus_client`` family: a counter's samples are ``<name>`` (ending ``_total``), a
    histogram's ``_bucket`` / ``_count`` / ``_sum``."""
    metric = family.metric
    if metric.kind is Kind.COUNTER:
        out = Metric(metric.name.removesuffix("_total"), metric.help, "counter")
        for s in series:
            out.add_sample(out.name + "_total", dict(s.labels), s.value)
    elif metric.kind is Kind.HISTOGRAM:
        out = Metric(metric.name, metric.help, "histogram")
        for s in series:
            labels = dict(s.labels)
            for le, value in s.buckets:
                out.add_sample(metric.name + "_bucket", {**labels, "le": le}, value)
            out.add_sample(metric.name + "_count", labels, s.count)
            out.add_sample(metric.name + "_sum", labels, s.value)
    else:
        out = Metric(metric.name, metric.help, "gauge")
        for s in series:
            out.add_sample(metric.name, dict(s.labels), s.value)
    return out


class ExportCollector(Collector):
    """The families of ``snapshot`` restricted to ``model_ids`` (None: every model of the snapshot) and,
    given a ``team`` (``registry.team_bound``), without the Model API families: the export sums them
    over every team, and a team's key reads its own through ``GET /v1/model_apis/{name}/metrics``."""

    def __init__(self, snapshot: Snapshot, model_ids: frozenset[str] | None, team: str | None = None) -> None:
        self._snapshot, self._model_ids, self._team = snapshot, model_ids, team

    def collect(self) -> Iterator[Metric]:
        """One family per catalog metric with series in scope (none: the family is left out)."""
        team = self._team
        for family in self._snapshot.families:
            wanted = self._model_ids
            if team is not None and family.metric.name.startswith(MODEL_API_PREFIX):
                continue
            series = [s for s in family.series if wanted is None or s.model_id in wanted]
            if series:
                yield _family(family, series)
