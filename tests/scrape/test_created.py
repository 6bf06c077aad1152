"""Issue 11 rule 7: a counter's ``_created`` time dates its first increase (docs/query-semantics.md
"Counters across scrapes"). Through the real paths: the ``Scraper`` reading exposition bodies from an
``httpx.MockTransport`` and the import (``importer._append_file``, what ``servemetrics import`` runs),
into a ``MemoryStore`` and a ``DuckDBStore``, read back by ``build_plan`` / ``execute``."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import anyio
import httpx
import pytest

from servemetrics.importer import _append_file
from servemetrics.ingest import backfill
from servemetrics.ingest.exposition import CREATED_HORIZON_MS, parse_exposition
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.samples import SampleBatch
from servemetrics.store.base import DEFAULT_LOOKBACK_MS, Store
from servemetrics.types import labels_of
from tests.query.helpers import T0, at
from tests.scrape.answers import summary

REQ = "baseten_inference_requests_total"
LATENCY = "baseten_end_to_end_response_time_seconds"
URL = "http://10.0.0.7:9091/metrics"
REPLICA = {"model_id": "m1", "model_name": "M", "deployment_id": "d1", "replica": "r1"}
TARGET = Target(URL, labels_of({**REPLICA, "environment": "production", "rollout_phase": "stable"}))
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT = "text/plain; version=0.0.4"


def seconds(at_s: float) -> str:
    """``T0 + at_s`` in epoch seconds, as ``_created`` (and an OpenMetrics timestamp) writes it."""
    return f"{T0 / 1000 + at_s:.3f}"


def counter(children: Sequence[tuple[str, float, float | None]], fmt: str) -> str:
    """A ``requests`` counter as ``prometheus_client`` writes it: ``(status_code, value, created at
    seconds after T0 or None)`` per child; OpenMetrics puts ``_created`` in the family, the text format in a
    ``_created`` gauge family of its own."""
    total = [f'baseten_inference_requests_total{{status_code="{c}"}} {v}\n' for c, v, _ in children]
    created = [
        f'baseten_inference_requests_created{{status_code="{c}"}} {seconds(t)}\n' if t is not None else ""
        for c, _, t in children
    ]
    if fmt == OPENMETRICS:
        lines = [x + y for x, y in zip(total, created, strict=True)]
        return "# TYPE baseten_inference_requests counter\n" + "".join(lines) + "# EOF\n"
    body = "# TYPE baseten_inference_requests_total counter\n" + "".join(total)
    if any(created):
        body += "# TYPE baseten_inference_requests_created gauge\n" + "".join(created)
    return body


def scrape(store: Store, scrapes: Sequence[tuple[float, str]], content_type: str) -> list[SampleBatch]:
    """Scrape ``(seconds after T0, body)`` in order with one ``Scraper`` (target ``TARGET``); the batches
    it appended."""
    body = [b""]
    appended: list[SampleBatch] = []

    def append(batch: SampleBatch) -> int:
        appended.append(batch)
        return store.append(batch)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body[0], headers={"content-type": content_type})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            scraper = Scraper(client, append)
            for t, text in scrapes:
                body[0] = text.encode()
                assert (await scraper.scrape_once(TARGET, at(t))).up

    anyio.run(go)
    return appended


def stored(batches: Sequence[SampleBatch], status_code: str) -> list[tuple[int, float]]:
    """``(ms after T0, value)`` of the requests child ``status_code`` in the appended batches."""
    return sorted(
        (s.ts_ms - T0, s.value)
        for b in batches
        for s in b.samples()
        if s.name == REQ and dict(s.labels).get("status_code") == status_code
    )


FORMATS = pytest.mark.parametrize("fmt", [OPENMETRICS, TEXT], ids=["openmetrics", "text"])


@FORMATS
def test_created_counts_the_first_increase_inside_the_window(store: Store, fmt: str) -> None:
    """First scraped at 7 (T0), created 20 s before: a 0 is stored at T0 - 20 s, so the 7 counts."""
    first = counter([("200", 7, -20)], fmt)
    batches = scrape(store, [(0, first), (15, counter([("200", 7, -20)], fmt))], fmt)
    assert stored(batches, "200") == [(-20_000, 0.0), (0, 7.0), (15_000, 7.0)]
    assert summary(store, REQ, -30, 30) == [7.0, 0.0, 0.0]  # today 0: a first scrape counted nothing
    # A window starting after the creation but before the first scrape, [T0 - 5 s, T0 + 30 s): the pair
    # (T0 - 20 s, 0) -> (T0, 7) is spread evenly over its 20 s (store.base INCREASE, rule 5), of which 5 s
    # lie inside: 7 * 5 / 20. A window ending before T0 counts the other 15 s of it.
    assert summary(store, REQ, -5, 30) == [pytest.approx(7 * 5 / 20), 0.0, 0.0]
    assert summary(store, REQ, -30, -1) == [pytest.approx(7 * 19 / 20), 0.0, 0.0]  # (-20 s, -1 s]
    assert not [s for b in batches for s in b.samples() if s.name.endswith("_created")]


@FORMATS
def test_created_before_the_window_counts_nothing_extra(store: Store, fmt: str) -> None:
    """Created 20 s before a first scrape at 7, then 9: a window after the first scrape counts the 2
    only. A child new to the already scraped target whose creation precedes that earlier scrape existed
    then without being exposed: it gets no 0 (today a 0 1 ms after the earlier scrape counts its 4)."""
    scrapes = [
        (0, counter([("200", 7, -20)], fmt)),
        (15, counter([("200", 9, -20), ("500", 4, -60)], fmt)),
        (30, counter([("200", 9, -20), ("500", 5, -60)], fmt)),
    ]
    batches = scrape(store, scrapes, fmt)
    # 7 -> 9 over (0, 15 s] counts its 10 s inside; the 500 child: 4 -> 5 only
    assert summary(store, REQ, 5, 40) == [pytest.approx(2 * 10 / 15), 0.0, 1.0]
    assert stored(batches, "500") == [(15_000, 4.0), (30_000, 5.0)]
    assert summary(store, REQ, -30, 40) == [9.0, 0.0, 1.0]


@FORMATS
def test_created_dates_a_child_new_to_a_scraped_target(store: Store, fmt: str) -> None:
    """A child created at T0 + 10 s, between two scrapes (0 and 15 s), first seen at 3: its 0 is placed
    at its creation, not 1 ms after the earlier scrape (both count 3 in a window holding the 15 s
    sample: a delta counts at its later sample)."""
    scrapes = [(0, counter([("200", 7, -20)], fmt)), (15, counter([("200", 7, -20), ("500", 3, 10)], fmt))]
    batches = scrape(store, scrapes, fmt)
    assert stored(batches, "500") == [(10_000, 0.0), (15_000, 3.0)]
    assert summary(store, REQ, 5, 20) == [0.0, 0.0, 3.0]


@FORMATS
def test_created_out_of_bounds_gives_no_zero(store: Store, fmt: str) -> None:
    """A first scrape's creation time older than the lookback before it (a process up for an hour), or
    after the sample (a clock ahead): no 0; the first scrape counts nothing, as without ``_created``. A
    child new to a scraped target with a creation time in the future falls back to the 0 1 ms after the
    earlier scrape."""
    assert CREATED_HORIZON_MS == DEFAULT_LOOKBACK_MS
    scrapes = [
        (0, counter([("200", 7, -3600), ("400", 2, 60)], fmt)),
        (15, counter([("200", 8, -3600), ("400", 2, 60), ("500", 1, 60)], fmt)),
    ]
    batches = scrape(store, scrapes, fmt)
    assert stored(batches, "200") == [(0, 7.0), (15_000, 8.0)]
    assert stored(batches, "400") == [(0, 2.0), (15_000, 2.0)]
    assert stored(batches, "500") == [(1, 0.0), (15_000, 1.0)]
    assert summary(store, REQ, -7200, 30) == [1.0, 0.0, 1.0]


@FORMATS
def test_a_family_without_created_behaves_as_before(store: Store, fmt: str) -> None:
    """No ``_created``: the first scrape adds nothing (7 counts 0), a child new to the scraped target gets
    its 0 1 ms after the earlier scrape."""
    scrapes = [
        (0, counter([("200", 7, None)], fmt)),
        (15, counter([("200", 9, None), ("500", 4, None)], fmt)),
    ]
    batches = scrape(store, scrapes, fmt)
    assert stored(batches, "200") == [(0, 7.0), (15_000, 9.0)]
    assert stored(batches, "500") == [(1, 0.0), (15_000, 4.0)]
    assert summary(store, REQ, -30, 30) == [2.0, 0.0, 4.0]


def test_created_is_parsed_per_family_and_never_a_sample() -> None:
    """Both formats give the creation time under the family's name and labels (``le`` and ``quantile``
    left out), in epoch ms; no ``_created`` sample is returned."""
    for fmt in (OPENMETRICS, TEXT):
        parsed = parse_exposition(counter([("200", 7, -20)], fmt), fmt, at(0))
        assert parsed.created == {("baseten_inference_requests", (("status_code", "200"),)): at(-20)}
        assert [s.name for s in parsed.samples] == [REQ]
    histogram = (
        f"# TYPE {LATENCY} histogram\n"
        f'{LATENCY}_bucket{{le="1",status_code="200"}} 1\n{LATENCY}_bucket{{le="+Inf",status_code="200"}} 1\n'
        f'{LATENCY}_count{{status_code="200"}} 1\n{LATENCY}_sum{{status_code="200"}} 0.5\n'
        f'{LATENCY}_created{{status_code="200"}} {seconds(-20)}\n# EOF\n'
    )
    parsed = parse_exposition(histogram, OPENMETRICS, at(0))
    assert parsed.created == {(LATENCY, (("status_code", "200"),)): at(-20)}


def test_created_histogram_on_scrape(store: Store) -> None:
    """Every counter-like series of a histogram family (buckets, ``_count``, ``_sum``) gets the 0: an
    observation of 0.5 s before the first scrape counts, its ``avg`` is 0.5."""
    histogram = (
        f"# TYPE {LATENCY} histogram\n"
        f'{LATENCY}_bucket{{le="1",status_code="200"}} 1\n{LATENCY}_bucket{{le="+Inf",status_code="200"}} 1\n'
        f'{LATENCY}_count{{status_code="200"}} 1\n{LATENCY}_sum{{status_code="200"}} 0.5\n'
        f'{LATENCY}_created{{status_code="200"}} {seconds(-20)}\n# EOF\n'
    )
    batches = scrape(store, [(0, histogram)], OPENMETRICS)
    zeros = sorted(s.name for b in batches for s in b.samples() if s.ts_ms == at(-20))
    assert zeros == [f"{LATENCY}_bucket", f"{LATENCY}_bucket", f"{LATENCY}_count", f"{LATENCY}_sum"]
    values = summary(store, LATENCY, -30, 10)
    assert values[-1] == pytest.approx(0.5)


def test_created_on_import(store: Store, tmp_path: Path) -> None:
    """``servemetrics import`` of an OpenMetrics file (timestamps in seconds): a counter first in the file
    at 7 (T0) whose family gives ``_created`` 20 s before counts 7, 9 after the next point; a window from
    T0 - 5 s counts 5 s of the 20 s of the 0 -> 7 delta and the 2 (spread evenly, rule 5), one from
    T0 + 5 s 10 s of the 15 s of each later delta. A child whose creation lies over the lookback before
    its first point (an hour) gets no 0, and a later point repeating the creation time adds nothing (5
    samples stored: 4 points and one 0)."""
    lines = ["# TYPE baseten_inference_requests counter\n"]
    for t, v, old in ((0, 7, 3), (15, 9, 4)):
        lines += [
            f'baseten_inference_requests_total{{status_code="200"}} {v} {seconds(t)}\n',
            f'baseten_inference_requests_created{{status_code="200"}} {seconds(-20)} {seconds(t)}\n',
            f'baseten_inference_requests_total{{status_code="500"}} {old} {seconds(t)}\n',
            f'baseten_inference_requests_created{{status_code="500"}} {seconds(-3600)} {seconds(t)}\n',
        ]
    path = tmp_path / "backfill.om"
    path.write_text("".join(lines) + "# EOF\n")
    assert _append_file(store, path, {**REPLICA}, lambda _done, _total: None) == 5
    assert summary(store, REQ, -30, 30) == [9.0, 0.0, 1.0]
    assert summary(store, REQ, -5, 30) == [pytest.approx(7 * 5 / 20 + 2), 0.0, 1.0]
    assert summary(store, REQ, 5, 30) == [pytest.approx(2 * 10 / 15), 0.0, pytest.approx(10 / 15)]


def test_import_without_created_behaves_as_before(store: Store, tmp_path: Path) -> None:
    """No ``_created`` in the file: the first point counts nothing."""
    lines = [
        "# TYPE baseten_inference_requests counter\n",
        *(
            f'baseten_inference_requests_total{{status_code="200"}} {v} {seconds(t)}\n'
            for t, v in ((0, 7), (15, 9))
        ),
    ]
    path = tmp_path / "backfill.om"
    path.write_text("".join(lines) + "# EOF\n")
    assert _append_file(store, path, {**REPLICA}, lambda _done, _total: None) == 2
    assert summary(store, REQ, -30, 30) == [2.0, 0.0, 0.0]


@pytest.mark.parametrize("workers", [1, 2])
def test_created_on_import_across_chunks(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """Parse chunks of two lines: the 200 child's 0 comes with its first chunk only (the creation time
    repeated in later chunks adds none), the 500 child first appears in a later chunk and gets its 0
    there; the same in worker processes."""
    monkeypatch.setattr(backfill, "_CHUNK_LINES", 2)
    lines = ["# TYPE baseten_inference_requests counter\n"]
    for t, v in ((0, 7), (15, 9), (30, 10)):
        lines += [
            f'baseten_inference_requests_total{{status_code="200"}} {v} {seconds(t)}\n',
            f'baseten_inference_requests_created{{status_code="200"}} {seconds(-20)} {seconds(t)}\n',
        ]
    lines += [
        f'baseten_inference_requests_total{{status_code="500"}} 2 {seconds(30)}\n',
        f'baseten_inference_requests_created{{status_code="500"}} {seconds(25)} {seconds(30)}\n',
    ]
    text = "".join(lines) + "# EOF\n"
    got = [
        s
        for b in backfill.iter_backfill(io.BytesIO(text.encode()), REPLICA, workers=workers)
        for s in b.samples()
    ]
    points = sorted((dict(s.labels)["status_code"], s.ts_ms - T0, s.value) for s in got)
    assert points == [
        ("200", -20_000, 0.0),
        ("200", 0, 7.0),
        ("200", 15_000, 9.0),
        ("200", 30_000, 10.0),
        ("500", 25_000, 0.0),
        ("500", 30_000, 2.0),
    ]
