"""The scraper against a real local HTTP server: up, C5 duplicates, C7 failed scrapes store nothing."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO

import anyio
import httpx
import pytest

from servemetrics.ingest.scraper import Scraper, Target, offset_s
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of

T0 = 1_767_225_600_000
LABELS = labels_of({"model_id": "m1", "model_name": "M", "deployment_id": "d1", "replica": "r1"})


class Exporter:
    """A real HTTP server whose /metrics body and content type the test sets; ``headers`` are sent too,
    and ``writer`` (when set) writes the body instead of ``body`` (a hostile target: a slow dribble, an
    endless body)."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = "text/plain; version=0.0.4"
        self.headers: dict[str, str] = {}
        self.writer: Callable[[BinaryIO], None] | None = None
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", exporter.content_type)
                for name, value in exporter.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if exporter.writer is None:
                    self.wfile.write(exporter.body)
                    return
                with contextlib.suppress(OSError):  # the scraper hung up
                    exporter.writer(self.wfile)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    yield e
    e.server.shutdown()
    e.server.server_close()


def _scrape(store: MemoryStore, target: Target, ts: int, metrics: SelfMetrics | None = None):
    async def go():
        async with httpx.AsyncClient() as client:
            return await Scraper(client, store.append, metrics=metrics).scrape_once(target, ts)

    return anyio.run(go)


def _last(store: MemoryStore, name: str, ts: int, **match: str) -> float | None:
    res = store.select(
        Selection(
            name, Reducer.LAST, (ValueSet(ts, ts + 1, frozenset({"d1"})),), matchers=tuple(match.items())
        )
    )
    cells = res.get(())
    return None if not cells or cells[0] is None else cells[0].total


def test_good_scrape_stores_canonical_samples_and_up(exporter: Exporter):
    exporter.body = (
        b"# TYPE baseten_inference_requests_total counter\n"
        b'baseten_inference_requests_total{status_code="200",is_async="false"} 7\n'
    )
    store = MemoryStore()
    result = _scrape(store, Target(exporter.url, LABELS), T0)
    assert result.up and result.error is None
    assert _last(store, "baseten_inference_requests_total", T0, status_code="200") == 7.0
    assert _last(store, "up", T0) == 1.0


def test_c5_same_series_twice_first_wins_and_duplicate_counted(exporter: Exporter):
    exporter.body = (
        b"# TYPE baseten_inference_requests_total counter\n"
        b'baseten_inference_requests_total{status_code="200"} 96\n'
        b'baseten_inference_requests_total{status_code="200"} 95\n'
    )
    store, metrics = MemoryStore(), SelfMetrics()
    result = _scrape(store, Target(exporter.url, LABELS), T0, metrics)
    assert result.up and result.duplicates == 1
    up = {"model_id": "m1", "deployment_id": "d1", "replica": "r1", "target": exporter.url}
    assert metrics.registry.get_sample_value("servemetrics_target_up", up) == 1.0
    assert _last(store, "baseten_inference_requests_total", T0) == 96.0
    assert (
        metrics.registry.get_sample_value(
            "servemetrics_scrape_duplicate_samples_total", {"target": exporter.url}
        )
        == 1.0
    )


def test_c7_malformed_scrape_stores_nothing_and_up_is_zero(exporter: Exporter):
    target = Target(exporter.url, LABELS)
    store = MemoryStore()
    exporter.content_type = "application/openmetrics-text; version=1.0.0"
    exporter.body = b"# TYPE baseten_replicas_active gauge\nbaseten_replicas_active 2\n# EOF\n"
    assert _scrape(store, target, T0).up
    exporter.body = (
        b"# TYPE conn_duration_seconds histogram\n"
        b"baseten_replicas_active 5\n"
        b'conn_duration_seconds_bucket{le="5000.0"} 3 # 5.9 1767225600.0\n'
        b"# EOF\n"
    )
    bad = _scrape(store, target, T0 + 15_000)
    assert not bad.up and "line 3" in (bad.error or "")
    assert _last(store, "up", T0 + 15_000) == 0.0
    assert _last(store, "baseten_replicas_active", T0 + 15_000) == 2.0  # earlier sample untouched, no 5
    exporter.body = b"# TYPE baseten_replicas_active gauge\nbaseten_replicas_active 3\n# EOF\n"
    assert _scrape(store, target, T0 + 30_000).up
    assert _last(store, "baseten_replicas_active", T0 + 30_000) == 3.0


def test_unreachable_target_is_down(exporter: Exporter):
    exporter.server.shutdown()
    exporter.server.server_close()
    store = MemoryStore()
    result = _scrape(store, Target(exporter.url, LABELS), T0)
    assert not result.up and exporter.url in (result.error or "")
    assert _last(store, "up", T0) == 0.0
    assert "deployment d1 replica r1" in (result.error or "")


def test_offsets_are_stable_and_inside_the_interval():
    assert offset_s("http://a/metrics", 15) == offset_s("http://a/metrics", 15)
    assert 0 <= offset_s("http://b/metrics", 15) < 15
    assert offset_s("http://a/metrics", 15) != offset_s("http://b/metrics", 15)


def test_counter_series_new_in_a_known_target_starts_from_zero(exporter: Exporter):
    """A labelled counter child created between two scrapes counts its first increments."""
    target = Target(exporter.url, LABELS)
    store = MemoryStore()
    exporter.body = (
        b"# TYPE baseten_inference_requests_total counter\n"
        b'baseten_inference_requests_total{status_code="200"} 5\n'
    )

    async def go():
        async with httpx.AsyncClient() as client:
            scraper = Scraper(client, store.append)
            await scraper.scrape_once(target, T0)
            exporter.body += b'baseten_inference_requests_total{status_code="503"} 2\n'
            await scraper.scrape_once(target, T0 + 15_000)

    anyio.run(go)
    res = store.select(
        Selection(
            "baseten_inference_requests_total",
            Reducer.INCREASE,
            (ValueSet(T0, T0 + 30_000, frozenset({"d1"})),),
            group_by=("status_code",),
        )
    )
    assert res[("503",)][0].total == 2.0  # zero injected at T0 + 1 ms, then 2 at T0 + 15 s
    assert res[("200",)][0].total == 0.0  # present from the first scrape: no zero injected


def test_counter_relabelled_by_a_promotion_is_not_counted_again(exporter: Exporter):
    """When a promotion starts, rollout_phase changes: the counter keeps its history (no zero, no spike,
    and the increase across the switch is kept: C14)."""
    exporter.body = (
        b"# TYPE baseten_inference_requests_total counter\n"
        b'baseten_inference_requests_total{status_code="200"} 10000\n'
    )
    stable = Target(exporter.url, labels_of({**dict(LABELS), "rollout_phase": "stable"}))
    promoting = Target(exporter.url, labels_of({**dict(LABELS), "rollout_phase": "promoting"}))
    store = MemoryStore()

    async def go():
        async with httpx.AsyncClient() as client:
            scraper = Scraper(client, store.append)
            await scraper.scrape_once(stable, T0)
            exporter.body = exporter.body.replace(b"10000", b"10005")
            await scraper.scrape_once(promoting, T0 + 15_000)

    anyio.run(go)
    res = store.select(
        Selection(
            "baseten_inference_requests_total",
            Reducer.INCREASE,
            (ValueSet(T0, T0 + 30_000, frozenset({"d1"})),),
        )
    )
    assert res[()][0].total == 5.0  # the 5 across the two label sets, never 10005, never 0


def test_samples_timestamped_far_ahead_are_dropped(exporter: Exporter):
    ahead = T0 + 3_600_000
    exporter.body = (
        f"# TYPE baseten_replicas_active gauge\nbaseten_replicas_active 4 {ahead}\n"
        "# TYPE baseten_replicas_starting gauge\nbaseten_replicas_starting 1\n"
    ).encode()
    store = MemoryStore()
    assert _scrape(store, Target(exporter.url, LABELS), T0).up
    assert _last(store, "baseten_replicas_starting", T0) == 1.0
    assert store.stats().samples == 2  # replicas_starting and up; not the sample an hour ahead
