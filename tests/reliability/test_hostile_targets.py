"""Issue 12 "How we will know": a 50 MB and a 100,000-series target fail their scrape with the limit
named and leave the healthy targets' intervals within 10 %.

The real ``Scraper`` schedules its targets as ``servemetrics serve`` does (``set_targets``: one loop per
target on fixed ticks, the service's worker limiter) into a ``MemoryStore``; the exporters are real HTTP
servers in their own process (``hostile_exporters``), so the scraper's process holds only what it reads.

Timing on a shared 2-core machine: the healthy targets are first scraped alone (``CONTROL_ROUNDS``), which
measures the machine's own jitter, then with the two hostile targets added (``ROUNDS``); the hostile phase
must hold the issue's 10 % on top of that measured jitter (idle: control gaps within 7 ms). The
process's heap is frozen first, as ``servemetrics serve`` freezes it (``cli.freeze_startup_heap``).
What this caught, at a 1 s interval: before the fixes (the whole 100,000-series body parsed before
``sample_limit``, scrapes scheduled ``interval`` after the previous one started) healthy gaps reached
1,284 ms and the event loop stalled 277 ms on an idle machine. With the limit counted while parsing but
the heap not frozen, full garbage collections still stalled it: the healthy gaps' 90th percentile was
380-526 ms off at a load of 20 on 2 cores, 54 ms with the heap frozen; at a load of 12 still up to
120 ms, hence the 2 s interval (the refused parse's 0.2 s of CPU competes with the loop for the GIL).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

from servemetrics.cli import freeze_startup_heap
from servemetrics.config.operations import IngestConfig
from servemetrics.ingest.exposition import PARSE_CHUNK
from servemetrics.ingest.scrape_limits import ScrapeLimits
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.conftest import REPO_ROOT
from tests.reliability.hostile_exporters import BIG_BYTES, KINDS, MANY_SERIES

MiB = 1 << 20
INTERVAL_S = 2.0
INTERVAL_MS = 2000
TEN_PERCENT_MS = 200
CONTROL_ROUNDS = 4
ROUNDS = 8
"""Gaps measured per healthy target: 4 alone, then 8 with the hostile targets (about 26 s)."""
LIMIT = 5_000
LIMITS = ScrapeLimits(body_size_limit=8 * MiB, sample_limit=LIMIT)
"""Under the big target's 50 MiB; over the many target's 4.5 MB (so its samples are counted) and 20 times
under its 100,000 samples. A refused scrape parses 5 pieces of ``PARSE_CHUNK`` lines (the first count over
5,000): about 0.2 s of one core every interval, 2 s (the config's least is 1 s, its default 15 s)."""
BIG_REASON = (
    f"body_size_limit exceeded: the answer is over {8 * MiB} bytes (decompressed); the limit is {8 * MiB}"
)
MANY_REASON = f"sample_limit exceeded: {5 * PARSE_CHUNK} samples before parsing stopped, the limit is {LIMIT}"


@dataclass
class Phase:
    """One phase of the run: its start (epoch ms), the event loop's lateness of 10 ms sleeps (s)."""

    started_ms: int
    lateness_s: list[float] = field(default_factory=list)


@dataclass
class Run:
    """What one run stored (up samples by target URL: ``(ts_ms, value)``; the other series it stored by
    replica) and its two phases."""

    ups: dict[str, list[tuple[int, float]]]
    other_series: dict[str, int]
    control: Phase
    hostile: Phase


@pytest.fixture(scope="module")
def urls() -> Iterator[list[str]]:
    """The ``/metrics`` URLs of the exporters, in ``KINDS`` order (their bodies made once per module)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.hostile_exporters"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready, *ports = proc.stdout.readline().split()  # EOF (b"") if it died
        assert ready == b"ready" and len(ports) == len(KINDS)
        yield [f"http://127.0.0.1:{int(p)}/metrics" for p in ports]
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


def _targets(urls: list[str]) -> list[Target]:
    """Model m1; deployment ``h`` for the healthy targets (replicas h0 …), ``big`` / ``many`` for the
    others (their scrape durations are then counted apart)."""
    out = []
    for i, (url, kind) in enumerate(zip(urls, KINDS, strict=True)):
        dep, replica = ("h", f"h{i}") if kind == "healthy" else (kind, kind)
        out.append(Target(url, labels_of({"model_id": "m1", "deployment_id": dep, "replica": replica})))
    return out


def _healthy_scrapes(metrics: SelfMetrics) -> float:
    count = metrics.registry.get_sample_value(
        "servemetrics_scrape_duration_seconds_count", {"deployment_id": "h"}
    )
    return count or 0.0


async def _probe_until(metrics: SelfMetrics, scrapes: float, phase: Phase) -> None:
    """Sleep 10 ms at a time (recording each wake-up's lateness in ``phase``) until the healthy targets
    were scraped ``scrapes`` times in all; AssertionError after 60 s."""
    deadline = time.monotonic() + 60.0
    while _healthy_scrapes(metrics) < scrapes:
        assert time.monotonic() < deadline, "the healthy targets were not scraped in 60 s"
        asked = time.monotonic()
        await asyncio.sleep(0.01)
        phase.lateness_s.append(time.monotonic() - asked - 0.01)


async def _scrape(targets: list[Target], store: MemoryStore, run: Run) -> None:
    """The healthy targets alone for ``CONTROL_ROUNDS`` ticks, then all of them for ``ROUNDS`` more (the
    healthy loops keep running)."""
    metrics = SelfMetrics()
    healthy = [t for t in targets if t.label_dict["deployment_id"] == "h"]
    async with httpx.AsyncClient() as client:
        scraper = Scraper(
            client,
            store.append,
            INTERVAL_S,
            INTERVAL_S,
            metrics,
            limits=LIMITS,
            limiter=anyio.CapacityLimiter(IngestConfig().workers),
        )
        try:
            scraper.set_targets(healthy)
            await _probe_until(metrics, (CONTROL_ROUNDS + 1) * len(healthy), run.control)
            run.hostile.started_ms = int(time.time() * 1000)
            scraper.set_targets(targets)
            await _probe_until(metrics, (CONTROL_ROUNDS + ROUNDS + 2) * len(healthy), run.hostile)
        finally:
            await scraper.stop()


def _run(urls: list[str]) -> Run:
    store = MemoryStore()
    run = Run({}, {}, Phase(int(time.time() * 1000)), Phase(0))
    freeze_startup_heap()  # as `servemetrics serve` does before it starts
    try:
        anyio.run(_scrape, _targets(urls), store, run)
    finally:
        gc.unfreeze()
    for (name, labels), series in store._series.items():
        lab = dict(labels)
        if name == "up":
            run.ups[lab["instance"]] = list(zip(series.ts, series.values, strict=True))
        else:
            run.other_series[lab["replica"]] = run.other_series.get(lab["replica"], 0) + 1
    return run


def _gaps(ups: list[tuple[int, float]], start_ms: int, end_ms: int) -> list[int]:
    """The gaps (ms) between the consecutive scrapes of ``ups`` that both lie in ``[start_ms, end_ms)``."""
    ts = [t for t, _ in ups if start_ms <= t < end_ms]
    return [b - a for a, b in zip(ts, ts[1:], strict=False)]


@dataclass(frozen=True)
class Jitter:
    """Of one phase: the healthy gaps' deviations from the interval (ms): median, 90th percentile and
    largest; the event loop's lateness (ms): 99th percentile; the mean gap (ms)."""

    median: float
    p90: float
    most: float
    lateness_p99: float
    mean_gap: float


def _jitter(gaps: list[int], lateness_s: list[float]) -> Jitter:
    dev = sorted(abs(g - INTERVAL_MS) for g in gaps)
    late = sorted(lateness_s)
    return Jitter(
        statistics.median(dev),
        dev[len(dev) * 9 // 10],
        dev[-1],
        late[len(late) * 99 // 100] * 1000,
        statistics.mean(gaps),
    )


def test_big_targets_fail_on_their_limit_and_healthy_targets_keep_their_interval(
    urls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="servemetrics.ingest.scraper"):
        run = _run(urls)
    healthy = [u for u, k in zip(urls, KINDS, strict=True) if k == "healthy"]
    switch, end = run.hostile.started_ms, 1 << 62
    ctl = _jitter([g for u in healthy for g in _gaps(run.ups[u], 0, switch)], run.control.lateness_s)
    gaps = [g for u in healthy for g in _gaps(run.ups[u], switch, end)]
    hostile = _jitter(gaps, run.hostile.lateness_s)
    print(f"\ncontrol {ctl}\nhostile {hostile}\nhealthy gaps {sorted(gaps)}")
    _assert_refused(urls, run, [r.getMessage() for r in caplog.records])
    for url in healthy:
        assert {v for _, v in run.ups[url]} == {1.0}
        assert len(_gaps(run.ups[url], switch, end)) >= ROUNDS
    # the 10 % on top of the machine's own jitter: most gaps, and the event loop's wake-ups
    assert hostile.p90 <= TEN_PERCENT_MS + ctl.p90, (hostile, ctl)
    assert hostile.lateness_p99 <= TEN_PERCENT_MS + ctl.lateness_p99, (hostile, ctl)
    # scrapes on their ticks: the typical gap within 2 %, no tick skipped (a gap of 2 intervals), no drift
    assert hostile.median <= INTERVAL_MS * 0.02 + ctl.median, (hostile, ctl)
    assert hostile.most < INTERVAL_MS / 2 + ctl.most, (hostile, ctl)
    assert abs(hostile.mean_gap - INTERVAL_MS) <= INTERVAL_MS * 0.02 + ctl.median, (hostile, ctl)


def _assert_refused(urls: list[str], run: Run, failures: list[str]) -> None:
    """Every scrape of the big and the many target failed on its limit (logged), about one a tick, and
    nothing of them is stored but ``up`` = 0."""
    assert BIG_BYTES > 50 * MiB and MANY_SERIES == 100_000
    for kind, reason in (("big", BIG_REASON), ("many", MANY_REASON)):
        url = urls[KINDS.index(kind)]
        assert {v for _, v in run.ups[url]} == {0.0}
        assert len(run.ups[url]) >= ROUNDS // 2  # one a tick; a loaded machine may skip a few
        line = f"scrape of {url} (model m1 deployment {kind} replica {kind}) failed: {reason}"
        assert [f for f in failures if f.startswith(f"scrape of {url} ")] == [line] * len(run.ups[url])
    assert set(run.other_series) == {"h0", "h1", "h2"}


async def _traced_scrape(url: str, kind: str) -> tuple[int, int]:
    """One scrape of ``url`` by a new ``Scraper`` with ``LIMITS`` under ``tracemalloc``: the peak and
    the end's traced memory above the start's (bytes)."""
    labels = labels_of({"model_id": "m1", "deployment_id": kind, "replica": kind})
    async with httpx.AsyncClient() as client:
        scraper = Scraper(client, MemoryStore().append, INTERVAL_S, INTERVAL_S, limits=LIMITS)
        await scraper.scrape_once(Target(url, labels))  # connections, threads, caches made once
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = await scraper.scrape_once(Target(url, labels))
            now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.error is not None and result.error.endswith(BIG_REASON if kind == "big" else MANY_REASON)
    return peak - before, now - before


def test_a_refused_big_target_never_holds_its_body_and_keeps_nothing(urls: list[str]) -> None:
    """Memory (tracemalloc counts the live Python memory; RSS does not fall back, glibc keeps a worker
    thread's freed memory in its arena). The 50 MiB answer is read up to body_size_limit (8 MiB) and
    dropped: peak under 8 + 2 MiB (whole it would be 50 MiB and a copy). The 100,000-series answer
    (4.5 MB) is read, joined and decoded (3 copies, 13.5 MB) and parsed up to 5,120 samples: peak under
    24 MiB (parsed whole it held 125 MB). Neither keeps more than 1 MiB after its scrape."""
    big = anyio.run(_traced_scrape, urls[KINDS.index("big")], "big")
    many = anyio.run(_traced_scrape, urls[KINDS.index("many")], "many")
    print(f"\ntraced peak, after (bytes): big {big}, many {many}")
    assert big[0] < 10 * MiB and big[1] < MiB
    assert many[0] < 24 * MiB and many[1] < MiB
