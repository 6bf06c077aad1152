"""Scrape ``/metrics`` targets on an interval and hand canonical samples to the store.

Prometheus scrape semantics where they matter: each target is scraped every ``interval_s`` on fixed ticks
at an offset derived from a hash of its URL (spreads load; "jitter"; ``Scraper._loop``), with a timeout
that is a deadline for the whole scrape (connecting, the headers and every byte of the body) and
Prometheus' limits (``ingest.scrape_limits``: body size counted decompressed while it streams, samples
counted while the body is parsed, labels per sample, label name and value lengths); a failed scrape
(HTTP error, timeout, a limit exceeded, malformed exposition) stores nothing but ``up`` = 0 (regression
case C7) and logs one line with the reason (outside text escaped: ``types.escape_log``), a good one
stores its samples and ``up`` = 1. A target that answers JSON is the kubelet Summary API
(``ingest.kubelet_summary``); anything else is exposition text. Labels from the registry (``model_id``,
``deployment_id``, ``replica``; ``node_id`` for trainer nodes ...) are attached by the adapters.

Counter continuity and staleness (DESIGN "Query semantics"): what the scraper adds in front of a
series new to its target, or absent from its previous scrape, and the stale markers it writes, as
``ingest.continuity`` describes; the scraper remembers each target's series by ``target_identity``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import math
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import httpx

from servemetrics.ingest.adapters import Adapted, adapt
from servemetrics.ingest.continuity import (
    Seen,
    TargetIdentity,
    sample_before,
    series_identity,
    stale_markers,
    zero_sample,
)
from servemetrics.ingest.exposition import (
    COUNTER_SUFFIXES,
    ExpositionError,
    ParseResult,
    created_zeros,
    parse_exposition,
)
from servemetrics.ingest.kubelet_summary import SummaryError, is_summary, parse_summary
from servemetrics.ingest.pod_times import PodTimes, pod_times
from servemetrics.ingest.scrape_limits import (
    ACCEPT_ENCODING,
    ScrapeLimitError,
    ScrapeLimits,
    check_sample_count,
    check_samples,
    read_body,
)
from servemetrics.keyed_loops import KeyedLoops
from servemetrics.labels import PHASE_LABELS, UP
from servemetrics.samples import MAX_FUTURE_MS, Sample, SampleBatch
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.timeutil import wall_clock_ms
from servemetrics.types import Labels, SeriesKey, escape_log, labels_of, redact_url

log = logging.getLogger(__name__)

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
    custom_dropped: dict[str, int] = field(default_factory=dict)
    """Custom series not kept, by reason (``adapters.custom.DROP_REASONS``)."""
    created: Callable[[], Mapping[SeriesKey, int]] = field(default=lambda: {}, repr=False, compare=False)
    """Canonical series key -> its family's creation time (epoch ms), computed at the first call."""
    pods: list[PodTimes] = field(default_factory=list)
    """The startup timestamps of the replica's pod (a kube-state-metrics target; ``ingest.pod_times``)."""


def offset_s(url: str, interval_s: float) -> float:
    """A stable offset in ``[0, interval_s)`` for a target (hash of its URL)."""
    digest = hashlib.sha256(url.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * interval_s


def custom_limit(labels: Mapping[str, str], limits: ScrapeLimits) -> int:
    """Custom series kept per scrape of a target with ``labels``: ``limits.custom_series_limit`` for a
    replica's target (it has a ``model_id``), 0 for the others (trainer nodes, the gateway's own)."""
    return limits.custom_series_limit if labels.get("model_id") else 0


def _creation_times(
    parsed: ParseResult, labels: dict[str, str], custom: int
) -> Callable[[], Mapping[SeriesKey, int]]:
    """The creation times of a scrape's canonical counter-like series, by key, made at the first call
    (only a scrape with series new to its target needs them): the source's ``_created`` zeros adapted
    like its samples. Two sources of one canonical series: the later creation time (it counts less)."""
    if not parsed.created:
        return dict
    memo: list[dict[SeriesKey, int]] = []

    def times() -> Mapping[SeriesKey, int]:
        if not memo:
            out: dict[SeriesKey, int] = {}
            for z in adapt(created_zeros(parsed.samples, parsed.created), labels, custom):
                key = (z.name, z.labels)
                out[key] = max(out.get(key, z.ts_ms), z.ts_ms)
            memo.append(out)
        return memo[0]

    return times


def _parse(
    body: bytes, content_type: str | None, ts: int, on_samples: Callable[[list[Sample]], None]
) -> ParseResult:
    """A scrape body as source samples: the kubelet Summary API's JSON, or exposition text (handed to
    ``on_samples`` in pieces while it is parsed, ``parse_exposition``)."""
    if is_summary(content_type, body):
        return ParseResult(parse_summary(body, ts), 0)
    return parse_exposition(body, content_type, ts, on_samples)


def _parse_and_adapt(
    body: bytes,
    content_type: str | None,
    ts: int,
    labels: dict[str, str],
    limits: ScrapeLimits,
    pods: bool = False,
) -> tuple[ParseResult, Adapted, list[PodTimes]]:
    """``_parse``, ``adapt`` and the sample and label limits (run in a worker thread: a large exposition
    must not stall the event loop). The samples are adapted and counted while the body is parsed, so a
    scrape over ``sample_limit`` stops there (``scrape_limits.check_sample_count``) instead of parsing
    and holding the whole body (issue 12: a 100,000-series target). A replica's target keeps its
    unmapped series as custom metrics (``custom_limit``); ``Adapted.custom`` counts those not kept.
    With ``pods``, also the replica's pod timestamps (``_pods_of``).

    Raises:
        ExpositionError / SummaryError as ``_parse`` does, ScrapeLimitError over a limit.
    """
    adapted = Adapted(labels, custom_limit(labels, limits))

    def more(samples: list[Sample]) -> None:
        adapted.add(samples)
        check_sample_count(len(adapted.samples), limits, finished=False)

    parsed = _parse(body, content_type, ts, more)
    adapted.add(parsed.samples[adapted.fed :])
    check_samples(adapted.samples, limits)
    return parsed, adapted, _pods_of(parsed, labels) if pods else []


def _pods_of(parsed: ParseResult, labels: Mapping[str, str]) -> list[PodTimes]:
    """The replica's pod timestamps in a scrape of one of its targets (``[]`` for other targets)."""
    replica = labels.get("replica")
    return pod_times(parsed.samples, replica, parsed.created) if replica and labels.get("model_id") else []


def _batch_before(samples: list[Sample], limit_ms: int) -> tuple[SampleBatch, int]:
    """``SampleBatch.from_samples(samples).before(limit_ms)`` (run in a worker thread)."""
    return SampleBatch.from_samples(samples).before(limit_ms)


def _target_key(target: Target) -> tuple[str, str, str, str]:
    """``(model_id, deployment_id, replica, url)`` for logs and metric labels (password redacted)."""
    lab = target.label_dict
    url = redact_url(target.url)
    return (lab.get("model_id", ""), lab.get("deployment_id", ""), lab.get("replica", ""), url)


def target_identity(target: Target) -> TargetIdentity:
    """The key of ``target``'s remembered series: its URL and labels without ``PHASE_LABELS``. A target
    relabelled by a promotion keeps its series (its counters continue); two targets with one URL (two
    replicas listing one node's exporter) have their own, so neither marks the other's series stale."""
    return (target.url, tuple(kv for kv in target.labels if kv[0] not in PHASE_LABELS))


class Scraper:
    """Scrapes targets and appends to a store through ``append`` (a blocking callable run in a thread).

    Args:
        client: the HTTP client (``httpx.AsyncClient``; tests may pass one with a mock transport).
        append: ``SampleBatch -> samples stored``; called from a worker thread.
        interval_s: seconds between scrapes of one target (default 15).
        timeout_s: the deadline of one whole scrape in seconds (default 10; capped at the interval).
        metrics: the service's own metrics, or None.
        limits: the limits of one scrape (``ScrapeLimits()`` by default; ``ingest.scrape_limits``).
        on_pods: called with the target, its ``ScrapeResult.pods`` and the scrape's time (epoch ms) after
            a good scrape of a replica's target that shows the replica's pod (kube-state-metrics), from
            a worker thread; None: pods are not looked for.
        client_of: the client for a target's scrapes (default: ``client``), e.g. one whose connections
            the network policy checks for targets the config file does not declare.
        limiter: bounds the worker threads that parse and adapt scrapes (default: anyio's shared one).
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        append: Callable[[SampleBatch], int],
        interval_s: float = 15.0,
        timeout_s: float = 10.0,
        metrics: SelfMetrics | None = None,
        client_of: Callable[[Target], httpx.AsyncClient] | None = None,
        limits: ScrapeLimits | None = None,
        limiter: anyio.CapacityLimiter | None = None,
        on_pods: Callable[[Target, list[PodTimes], int], None] | None = None,
    ) -> None:
        self._client = client
        self._on_pods = on_pods
        self._client_of = client_of or (lambda _: client)
        self._append = append
        self.interval_s = interval_s
        self.timeout_s = min(timeout_s, interval_s)
        self._metrics = metrics
        self.limits = limits or ScrapeLimits()
        self._loops: KeyedLoops[Target] = KeyedLoops()
        self._seen: dict[TargetIdentity, Seen] = {}
        self._pending: set[asyncio.Task[int]] = set()
        self._limiter = limiter

    async def scrape_once(self, target: Target, now_ms: int | None = None) -> ScrapeResult:
        """Scrape ``target`` once and store the result; never raises for a bad target."""
        ts = wall_clock_ms() if now_ms is None else now_ms
        started = time.perf_counter()
        result = await self._fetch_and_parse(target, ts)
        identity = target_identity(target)
        if result.up:
            result.samples = self._with_created_zeros(identity, ts, result.samples, result.created)
        else:
            result.samples = self._markers_of_failed(identity, ts)
        up = Sample(
            UP, labels_of({**target.label_dict, "instance": target.url}), 1.0 if result.up else 0.0, ts
        )
        batch, ahead = await anyio.to_thread.run_sync(
            _batch_before, [*result.samples, up], ts + MAX_FUTURE_MS, limiter=self._limiter
        )
        if ahead:
            log.warning(
                "dropped %d samples of %s timestamped over 10 minutes ahead", ahead, redact_url(target.url)
            )
        result.stored = await anyio.to_thread.run_sync(self._append, batch)
        if result.pods and self._on_pods is not None:
            await anyio.to_thread.run_sync(self._on_pods, target, result.pods, ts, limiter=self._limiter)
        self._observe(target, result, time.perf_counter() - started)
        return result

    async def _fetch(self, target: Target) -> tuple[bytes, str | None]:
        """The body (decompressed) and Content-Type of one answer of ``target``, all of it within
        ``timeout_s`` (connecting, the headers and every byte: a target dribbling its body is cut off) and
        at most ``limits.body_size_limit`` bytes (``scrape_limits.read_body``).

        Raises:
            TimeoutError: past ``timeout_s``; httpx.HTTPError, ScrapeLimitError, zlib.error.
        """
        headers = {"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
        with anyio.fail_after(self.timeout_s):
            async with self._client_of(target).stream(
                "GET", target.url, headers=headers, timeout=self.timeout_s
            ) as resp:
                resp.raise_for_status()
                body = await read_body(resp, self.limits.body_size_limit)
        return body, resp.headers.get("content-type")

    async def _fetch_and_parse(self, target: Target, ts: int) -> ScrapeResult:
        try:
            body, content_type = await self._fetch(target)
            parsed, adapted, pods = await anyio.to_thread.run_sync(
                _parse_and_adapt,
                body,
                content_type,
                ts,
                target.label_dict,
                self.limits,
                self._on_pods is not None,
                limiter=self._limiter,
            )
        except (TimeoutError, httpx.TimeoutException) as exc:  # one read's timeout is the deadline too
            exc.__traceback__ = None  # (as below)
            return self._failed(target, f"scrape took longer than scrape_timeout ({self.timeout_s:g}s)")
        except (httpx.HTTPError, ExpositionError, SummaryError, ScrapeLimitError, zlib.error) as exc:
            # the traceback's frames hold the body and what was parsed of it in a reference cycle with the
            # worker thread's future: without the traceback they are freed now, not at a full collection
            exc.__traceback__ = None
            return self._failed(target, str(exc))
        labels = target.label_dict
        created = _creation_times(parsed, labels, custom_limit(labels, self.limits))
        return ScrapeResult(
            up=True,
            duplicates=parsed.duplicates,
            samples=adapted.samples,
            created=created,
            custom_dropped=adapted.custom.dropped,
            pods=pods,
        )

    def _failed(self, target: Target, reason: str) -> ScrapeResult:
        """A failed scrape of ``target``: logged as one line (outside text escaped, ``escape_log``) and
        its ``ScrapeResult`` with that line as ``error``."""
        model_id, deployment_id, replica, shown = _target_key(target)
        where = f"model {model_id} deployment {deployment_id} replica {replica}"
        # httpx puts the URL, password included, in some errors' text
        message = escape_log(f"scrape of {shown} ({where}) failed: {reason.replace(target.url, shown)}")
        log.warning("%s", message)
        return ScrapeResult(up=False, error=message)

    def _with_created_zeros(
        self,
        identity: TargetIdentity,
        ts: int,
        samples: list[Sample],
        created: Callable[[], Mapping[SeriesKey, int]],
    ) -> list[Sample]:
        current = {s[:2]: s for s in reversed(samples)}  # the first of duplicates, as the store keeps
        seen = self._seen.get(identity)
        if seen is None:  # a first scrape: its series may be older than we are, only _created dates them
            seen = self._seen[identity] = Seen(ts, current, dict(current))
            times = created()
            zeros = []
            for key, s in current.items():
                if s.name.endswith(COUNTER_SUFFIXES):
                    seen.label_sets.setdefault(series_identity(s), []).append(key)
                    zero = zero_sample(s, times.get(key), ts, None) if times else None
                    if zero is not None:
                        zeros.append(zero)
            return zeros + samples if zeros else samples
        back = current.keys() - seen.previous.keys()
        added = (
            [
                p
                for p in (sample_before(seen, current, current[k], created, ts) for k in back)
                if p is not None
            ]
            if back
            else []
        )
        gone = seen.previous.keys() - current.keys()
        if gone:
            added += stale_markers((seen.previous[k] for k in gone), ts)
        seen.last.update(current)
        seen.previous, seen.ts_ms = current, ts
        return added + samples if added else samples

    def _markers_of_failed(self, identity: TargetIdentity, ts: int) -> list[Sample]:
        """A failed scrape: every series of the target's previous scrape is stale from ``ts`` (DESIGN
        "staleness"); the next good scrape finds them absent from the previous one, as after a gap."""
        seen = self._seen.get(identity)
        if seen is None or not seen.previous:
            return []
        markers = stale_markers(seen.previous.values(), ts)
        seen.previous = {}
        return markers

    def _observe(self, target: Target, result: ScrapeResult, seconds: float) -> None:
        if self._metrics is None:
            return
        m = self._metrics
        m.scrape_duration.labels("registry" if target.labels else "gateway").observe(seconds)
        m.scrapes.labels("ok" if result.up else "error").inc()
        m.target_up.labels(*_target_key(target)).set(1.0 if result.up else 0.0)
        if result.duplicates:
            m.scrape_duplicates.labels(redact_url(target.url)).inc(result.duplicates)
        for reason, count in result.custom_dropped.items():
            m.custom_series_dropped.labels(*_target_key(target), reason).inc(count)
        m.samples_appended.labels("scrape").inc(result.stored)

    async def _loop(self, target: Target) -> None:
        """Scrape ``target`` at fixed ticks, as Prometheus does: wall-clock times that are
        ``offset_s(url)`` past a multiple of ``interval_s``, kept on the event loop's monotonic clock. A
        scrape woken late does not push the next ones back (the ticks do not drift), and the ticks a
        scrape overran are skipped (no burst of catch-up scrapes)."""
        loop, interval = asyncio.get_running_loop(), self.interval_s
        first = loop.time() + (offset_s(target.url, interval) - time.time()) % interval
        tick = 0
        while True:
            await asyncio.sleep(max(0.0, first + tick * interval - loop.time()))
            try:
                await self.scrape_once(target)
            except Exception:  # a store failure must not kill the loop; it is logged and retried
                log.exception("storing the scrape of %s failed", redact_url(target.url))
            tick = max(tick + 1, math.ceil((loop.time() - first) / interval))

    def set_targets(self, targets: Sequence[Target]) -> None:
        """Start loops for new targets and stop loops of removed ones (call inside the event loop)."""
        gone = self._loops.sync({t: functools.partial(self._loop, t) for t in targets})
        markers: list[Sample] = []
        for identity in {target_identity(t) for t in gone} - {target_identity(t) for t in targets}:
            seen = self._seen.pop(identity, None)  # re-added later, its series are new from its first scrape
            if seen is not None:  # a removed target's series are stale from now (a replica terminated)
                markers += stale_markers(seen.previous.values(), wall_clock_ms())
        if markers:
            self._store_soon(SampleBatch.from_samples(markers))
        if self._metrics is not None:
            for target in gone:
                with contextlib.suppress(KeyError):
                    self._metrics.target_up.remove(*_target_key(target))
            self._metrics.targets.set(len(self._loops))

    def _store_soon(self, batch: SampleBatch) -> None:
        """Append ``batch`` in a worker thread from a task (``set_targets`` runs inside the event loop),
        or right here when no loop runs."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._append(batch)
            return
        task = loop.create_task(anyio.to_thread.run_sync(self._append, batch))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def stop(self) -> None:
        """Cancel every scrape loop and wait for them to end (and for the markers being stored)."""
        await self._loops.stop()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
