"""Scrape ``/metrics`` targets on an interval and hand canonical samples to the store.

Prometheus scrape semantics where they matter: each target is scraped every ``interval_s`` at a fixed
offset derived from a hash of its URL (spreads load; "jitter"), with a timeout; a failed scrape (HTTP
error, timeout, malformed exposition) stores nothing but ``up`` = 0 (regression case C7), a good one
stores its samples and ``up`` = 1. A target that answers JSON is the kubelet Summary API
(``ingest.kubelet_summary``); anything else is exposition text. Labels from the registry
(``model_id``, ``deployment_id``, ``replica``; ``node_id`` for trainer nodes ...) are attached by the
adapters.

New counter series: ``prometheus_client`` creates a labelled counter child at its first increment, so a
series such as ``requests_total{status_code="503"}`` first appears with value 2, not 0. Without help the
first increments are never counted (no extrapolation). Like Prometheus' created-timestamp zero
ingestion, a counter-like series (``_total``, ``_bucket``, ``_sum``, ``_count``) that appears in a target
already scraped successfully gets a 0 sample 1 ms after that earlier scrape: it did not exist then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import httpx

from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import ExpositionError, ParseResult, parse_exposition
from servemetrics.ingest.kubelet_summary import SummaryError, is_summary, parse_summary
from servemetrics.keyed_loops import KeyedLoops
from servemetrics.labels import PHASE_LABELS, UP
from servemetrics.samples import MAX_FUTURE_MS, Sample, SampleBatch
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.timeutil import wall_clock_ms
from servemetrics.types import Labels, SeriesKey, labels_of, redact_url

log = logging.getLogger(__name__)

COUNTER_SUFFIXES = ("_total", "_bucket", "_sum", "_count")
ACCEPT = "text/plain;version=0.0.4;q=1.0,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"
"""Prefer the text format: prometheus_client's OpenMetrics writer mangles ``vllm:`` names."""


@dataclass(frozen=True)
class Target:
    """A ``/metrics`` URL and the registry labels attached to its samples."""

    url: str
    labels: Labels

    @functools.cached_property
    def label_dict(self) -> dict[str, str]:
        """The labels as a dict (made once, at the first use; do not change it)."""
        return dict(self.labels)


@dataclass
class ScrapeResult:
    """Outcome of one scrape: ``up``, samples stored, duplicates dropped, and the error if any."""

    up: bool
    stored: int = 0
    duplicates: int = 0
    error: str | None = None
    samples: list[Sample] = field(default_factory=list)


def offset_s(url: str, interval_s: float) -> float:
    """A stable offset in ``[0, interval_s)`` for a target (hash of its URL)."""
    digest = hashlib.sha256(url.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * interval_s


def _parse(body: bytes, content_type: str | None, ts: int) -> ParseResult:
    """A scrape body as source samples: the kubelet Summary API's JSON, or exposition text."""
    if is_summary(content_type, body):
        return ParseResult(parse_summary(body, ts), 0)
    return parse_exposition(body, content_type, ts)


def _target_key(target: Target) -> tuple[str, str, str, str]:
    """``(model_id, deployment_id, replica, url)`` for logs and metric labels (password redacted)."""
    lab = target.label_dict
    url = redact_url(target.url)
    return (lab.get("model_id", ""), lab.get("deployment_id", ""), lab.get("replica", ""), url)


def _identity(sample: Sample) -> SeriesKey:
    """The series key without the labels that change when a promotion starts or ends: a counter whose
    ``rollout_phase`` changes is the same counter, not a new one starting from 0."""
    return (sample.name, tuple(kv for kv in sample.labels if kv[0] not in PHASE_LABELS))


class Scraper:
    """Scrapes targets and appends to a store through ``append`` (a blocking callable run in a thread).

    Args:
        client: the HTTP client (``httpx.AsyncClient``; tests may pass one with a mock transport).
        append: ``SampleBatch -> samples stored``; called from a worker thread.
        interval_s: seconds between scrapes of one target (default 15).
        timeout_s: per-scrape timeout in seconds (default 10; capped at the interval).
        metrics: the service's own metrics, or None.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        append: Callable[[SampleBatch], int],
        interval_s: float = 15.0,
        timeout_s: float = 10.0,
        metrics: SelfMetrics | None = None,
    ) -> None:
        self._client = client
        self._append = append
        self.interval_s = interval_s
        self.timeout_s = min(timeout_s, interval_s)
        self._metrics = metrics
        self._loops: KeyedLoops[Target] = KeyedLoops()
        self._seen: dict[str, tuple[int, set[SeriesKey]]] = {}

    async def scrape_once(self, target: Target, now_ms: int | None = None) -> ScrapeResult:
        """Scrape ``target`` once and store the result; never raises for a bad target."""
        ts = wall_clock_ms() if now_ms is None else now_ms
        started = time.perf_counter()
        result = await self._fetch_and_parse(target, ts)
        if result.up:
            result.samples = self._with_created_zeros(target.url, ts, result.samples)
        up = Sample(
            UP, labels_of({**target.label_dict, "instance": target.url}), 1.0 if result.up else 0.0, ts
        )
        batch, ahead = SampleBatch.from_samples([*result.samples, up]).before(ts + MAX_FUTURE_MS)
        if ahead:
            log.warning(
                "dropped %d samples of %s timestamped over 10 minutes ahead", ahead, redact_url(target.url)
            )
        result.stored = await anyio.to_thread.run_sync(self._append, batch)
        self._observe(target, result, time.perf_counter() - started)
        return result

    async def _fetch_and_parse(self, target: Target, ts: int) -> ScrapeResult:
        try:
            resp = await self._client.get(target.url, headers={"Accept": ACCEPT}, timeout=self.timeout_s)
            resp.raise_for_status()
            parsed = _parse(resp.content, resp.headers.get("content-type"), ts)
            samples = adapt(parsed.samples, target.label_dict)
        except (httpx.HTTPError, ExpositionError, SummaryError) as exc:
            model_id, deployment_id, replica, shown = _target_key(target)
            where = f"model {model_id} deployment {deployment_id} replica {replica}"
            # httpx puts the URL, password included, in some errors' text
            reason = str(exc).replace(target.url, shown)
            message = f"scrape of {shown} ({where}) failed: {reason}"
            log.warning(message)
            return ScrapeResult(up=False, error=message)
        return ScrapeResult(up=True, duplicates=parsed.duplicates, samples=samples)

    def _with_created_zeros(self, url: str, ts: int, samples: list[Sample]) -> list[Sample]:
        previous = self._seen.get(url)
        keys = {_identity(s) for s in samples}
        self._seen[url] = (ts, keys)
        if previous is None:
            return samples
        prev_ts, prev_keys = previous
        zeros = [
            Sample(s.name, s.labels, 0.0, prev_ts + 1)
            for s in samples
            if s.name.endswith(COUNTER_SUFFIXES) and prev_ts + 1 < s.ts_ms and _identity(s) not in prev_keys
        ]
        return zeros + samples if zeros else samples

    def _observe(self, target: Target, result: ScrapeResult, seconds: float) -> None:
        if self._metrics is None:
            return
        m = self._metrics
        m.scrape_duration.labels(target.label_dict.get("deployment_id", "")).observe(seconds)
        m.scrapes.labels("ok" if result.up else "error").inc()
        m.target_up.labels(*_target_key(target)).set(1.0 if result.up else 0.0)
        if result.duplicates:
            m.scrape_duplicates.labels(redact_url(target.url)).inc(result.duplicates)
        m.samples_appended.labels("scrape").inc(result.stored)

    async def _loop(self, target: Target) -> None:
        await asyncio.sleep(offset_s(target.url, self.interval_s))
        while True:
            started = time.monotonic()
            try:
                await self.scrape_once(target)
            except Exception:  # a store failure must not kill the loop; it is logged and retried
                log.exception("storing the scrape of %s failed", redact_url(target.url))
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def set_targets(self, targets: Sequence[Target]) -> None:
        """Start loops for new targets and stop loops of removed ones (call inside the event loop)."""
        gone = self._loops.sync({t: functools.partial(self._loop, t) for t in targets})
        if self._metrics is not None:
            for target in gone:
                with contextlib.suppress(KeyError):
                    self._metrics.target_up.remove(*_target_key(target))
            self._metrics.targets.set(len(self._loops))

    async def stop(self) -> None:
        """Cancel every scrape loop and wait for them to end."""
        await self._loops.stop()
