"""``ActiveSeries``: the per-organization limit on active series (config ``limits.series_per_organization``;
docs/security.md "Limits").

A series is active while it received a sample in the last ``WINDOW_MS`` (one hour, by the service's
clock), counted exactly, in memory, at the ingest entry points: the scraper's appends, remote_write and
import all pass their batches through ``ActiveSeries.admit``. The organization of a series is that of the
model its ``model_id`` label names (the registry; the lookup is cached per model id). A series new to an
organization that already has ``limit`` active series is refused: its samples are left out of the batch
(its stale markers too), counted in ``servemetrics_series_limit_refused_samples_total{organization}``,
and logged once per minute per organization. Series already active keep being stored. Series without a
``model_id`` (trainer nodes) or of a model the registry does not know are not counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from servemetrics.samples import SampleBatch
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.types import SeriesKey, escape_log

log = logging.getLogger(__name__)

WINDOW_MS = 3_600_000
"""A series is active for an hour after its last sample arrived."""
LOG_EVERY_MS = 60_000
"""An organization at its limit is logged at most once a minute."""


def without_series(batch: SampleBatch, drop: list[int]) -> SampleBatch:
    """``batch`` without the series at the indexes ``drop`` of ``batch.series`` (and their samples); the
    other series keep their order."""
    dropped = np.zeros(len(batch.series), dtype=bool)
    dropped[drop] = True
    kept = np.flatnonzero(~dropped)
    remap = np.zeros(len(batch.series), dtype=np.uint32)
    remap[kept] = np.arange(kept.size, dtype=np.uint32)
    keep = ~dropped[batch.series_index]
    return SampleBatch(
        [batch.series[i] for i in kept.tolist()],
        remap[batch.series_index[keep]],
        batch.ts_ms[keep],
        batch.values[keep],
    )


class ActiveSeries:
    """Active series per organization, and the limit on them (module docstring). Thread-safe.

    Args:
        limit: active series per organization at most (0: no limit, ``admit`` passes every batch).
        org_of: model id -> its organization's name, or None for a model the registry does not know.
        clock: epoch-ms "now".
        metrics: the service's own metrics (refused samples are counted there), or None.
    """

    def __init__(
        self,
        limit: int,
        org_of: Callable[[str], str | None],
        clock: Callable[[], int],
        metrics: SelfMetrics | None = None,
    ) -> None:
        self.limit = limit
        self._org_of = org_of
        self._clock = clock
        self._metrics = metrics
        self._orgs: dict[str, str] = {}
        self._seen: dict[str, dict[SeriesKey, int]] = {}
        self._logged: dict[str, int] = {}
        self._pruned = clock()
        self._lock = threading.Lock()

    def active(self, organization: str) -> int:
        """Series of ``organization`` active now (sampled in the last hour)."""
        with self._lock:
            self._prune(self._clock(), force=True)
            return len(self._seen.get(organization, {}))

    def admit(self, batch: SampleBatch) -> SampleBatch:
        """``batch`` without the series refused by the limit (the batch itself when none is)."""
        if not self.limit or not len(batch):
            return batch
        now = self._clock()
        refused: dict[str, list[int]] = {}
        with self._lock:
            self._prune(now)
            for i, key in enumerate(batch.series):
                org = self._organization(key)
                if org is None:
                    continue
                seen = self._seen.setdefault(org, {})
                if key in seen or len(seen) < self.limit:
                    seen[key] = now
                else:
                    refused.setdefault(org, []).append(i)
        if not refused:
            return batch
        self._report(batch, refused, now)
        return without_series(batch, [i for idx in refused.values() for i in idx])

    def _organization(self, key: SeriesKey) -> str | None:
        model_id = next((v for k, v in key[1] if k == "model_id"), None)
        if not model_id:
            return None
        org = self._orgs.get(model_id)
        if org is None:
            found = self._org_of(model_id)
            if found is None:
                return None  # not cached: the model may be registered later
            org = self._orgs[model_id] = found
        return org

    def _prune(self, now: int, force: bool = False) -> None:
        """Forget the series not sampled in the last hour (once a minute, or now with ``force``)."""
        if not force and now - self._pruned < LOG_EVERY_MS:
            return
        self._pruned = now
        for org, seen in self._seen.items():
            self._seen[org] = {k: t for k, t in seen.items() if t > now - WINDOW_MS}

    def _report(self, batch: SampleBatch, refused: dict[str, list[int]], now: int) -> None:
        """Count the refused samples per organization; log each organization once a minute."""
        per_series = np.bincount(batch.series_index, minlength=len(batch.series))
        for org, idx in refused.items():
            samples = int(per_series[idx].sum())
            if self._metrics is not None:
                self._metrics.refused_samples.labels(org).inc(samples)
            if now - self._logged.get(org, now - LOG_EVERY_MS) >= LOG_EVERY_MS:
                self._logged[org] = now
                name, labels = batch.series[idx[0]]
                example = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
                log.warning(
                    "organization %s is at its limit of %d active series (limits.series_per_organization); "
                    "refused %d samples of %d new series, e.g. %s (logged once a minute)",
                    escape_log(org),
                    self.limit,
                    samples,
                    len(idx),
                    escape_log(example[:200]),
                )
