"""Issue 11 rule 6, staleness stored as data: the real ``Scraper`` writes Prometheus' stale marker for a
series that leaves a target still scraped, for every series of a failed scrape and of a removed target;
CURRENT drops such a series at once (not after the 5-minute lookback) on every local backend, and a
counter continues across a marker (gaps are not resets)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import anyio
import httpx

from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.samples import STALE_NAN
from servemetrics.store.base import Reducer, Selection, Store, ValueSet
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.query.helpers import T0, at, wire
from tests.scrape.answers import D1, summary
from tests.scrape.test_continuity import REQS, STABLE

GAUGE = "# TYPE baseten_concurrent_requests gauge\nbaseten_concurrent_requests"
CONCURRENCY = "baseten_concurrent_requests"


def scrape(store: Store, answers: Sequence[tuple[float, int, str]], remove_after: bool = False) -> None:
    """Scrape ``STABLE`` at each ``(seconds after T0, HTTP status, body)``; then, with ``remove_after``,
    remove the target (``set_targets([])``) and wait for the markers to be stored (``stop``)."""
    now: list[tuple[int, bytes]] = [(200, b"")]

    def answer(_request: httpx.Request) -> httpx.Response:
        status, body = now[0]
        return httpx.Response(status, content=body, headers={"content-type": "text/plain; version=0.0.4"})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            scraper = Scraper(client, store.append, interval_s=3600)
            scraper.set_targets([STABLE])
            for seconds, status, text in answers:
                now[0] = (status, text.encode())
                assert (await scraper.scrape_once(STABLE, at(seconds))).up is (status == 200)
            if remove_after:
                scraper.set_targets([])
            await scraper.stop()

    anyio.run(go)


def current(store: Store, now_s: float) -> float | None:
    """CURRENT ``baseten_concurrent_requests`` of deployment ``d1`` at ``T0 + now_s``, as the API answers."""
    plan = build_plan(
        "m1", Mode.CURRENT, None, None, [CONCURRENCY], lambda _s, _e: [(T0 - 3_600_000, D1)], at(now_s)
    )
    resp = wire(execute(plan, store))
    if not resp["metric_values"]:
        return None
    value = resp["metric_values"][0]["values"][0]
    return value[0] if isinstance(value, list) else value


def last(store: Store, end_s: float) -> float | None:
    """The store's LAST of the gauge in the 5 minutes before ``T0 + end_s`` (None: no data)."""
    cells = store.select(Selection(CONCURRENCY, Reducer.LAST, (ValueSet(at(end_s - 300), at(end_s), D1),)))
    cell = cells.get((), [None])[0]
    return None if cell is None else cell.total


def test_a_series_gone_from_a_scraped_target_is_stale_at_that_scrape(store: Store) -> None:
    scrape(store, [(0, 200, f"{GAUGE} 4\n"), (15, 200, f"{GAUGE} 3\n"), (30, 200, REQS)])
    assert last(store, 29) == 3.0  # before the scrape that lost it: its latest value
    assert last(store, 31) is None  # from that scrape on: gone, not 3 for the next 5 minutes
    assert current(store, 20) == 3.0
    assert current(store, 31) is None


def test_a_failed_scrape_makes_every_series_of_the_target_stale(store: Store) -> None:
    scrape(store, [(0, 200, f"{GAUGE} 4\n"), (15, 500, "")])
    assert last(store, 14) == 4.0
    assert last(store, 16) is None  # up = 0 from the first failed scrape: stale at once


def test_a_removed_target_leaves_current_at_once() -> None:
    store = MemoryStore()  # the removal's marker is stamped with the wall clock: read it back raw
    scrape(store, [(0, 200, f"{GAUGE} 4\n")], remove_after=True)
    ((_, values),) = [(k, s.values) for k, s in store._series.items() if k[0] == CONCURRENCY]
    assert values[0] == 4.0 and math.isnan(values[1]) and len(values) == 2


def test_two_targets_of_one_url_do_not_mark_each_others_series_stale() -> None:
    """Two replicas listing one exporter (one node's DCGM exporter): one URL, two targets. Each target's
    series are remembered apart (``target_identity``), so scraping one never makes the other's stale:
    CURRENT between their scrapes is 4 + 4 = 8, not the 4 of whichever was scraped last."""
    other = Target(STABLE.url, labels_of({**STABLE.label_dict, "replica": "r2"}))
    store = MemoryStore()

    async def go() -> None:
        answer = httpx.Response(200, text=f"{GAUGE} 4\n", headers={"content-type": "text/plain"})
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _r: answer)) as client:
            scraper = Scraper(client, store.append, interval_s=3600)
            scraper.set_targets([STABLE, other])
            for seconds, target in ((0, STABLE), (5, other), (15, STABLE), (20, other)):
                assert (await scraper.scrape_once(target, at(seconds))).up
            await scraper.stop()

    anyio.run(go)
    values = [v for k, series in store._series.items() if k[0] == CONCURRENCY for v in series.values]
    assert values == [4.0] * 4  # no stale marker among them
    assert current(store, 10) == 8.0
    assert current(store, 25) == 8.0


def test_a_series_back_after_its_marker_has_a_value_again(store: Store) -> None:
    scrape(store, [(0, 200, f"{GAUGE} 4\n"), (15, 200, REQS), (30, 200, f"{GAUGE} 6\n")])
    assert last(store, 20) is None and last(store, 31) == 6.0


def test_a_counter_continues_across_its_stale_marker(store: Store) -> None:
    """Absent (a marker), then back higher: the pair skips the marker, 100 -> 103 counts 3; the failed
    scrape in between marks it too, and it still continues."""
    reqs = f'{REQS}baseten_inference_requests_total{{status_code="200"}}'
    scrape(store, [(0, 200, f"{reqs} 100\n"), (15, 200, REQS), (30, 500, ""), (45, 200, f"{reqs} 103\n")])
    assert summary(store, "baseten_inference_requests_total", 0, 50) == [3.0, 0.0, 0.0]


def test_the_marker_is_prometheus_stale_nan() -> None:
    """The bits of ``value.StaleNaN`` (prometheus/prometheus model/value), so engines read it too."""
    import struct

    assert struct.pack("<d", STALE_NAN) == struct.pack("<Q", 0x7FF0000000000002)


def test_remote_write_keeps_a_senders_stale_marker_and_drops_other_nan() -> None:
    """A Prometheus agent marks a series that left its target with ``StaleNaN``: the receiver keeps it
    bit for bit (so the stores end the series as for our own scrapes); any other NaN is dropped."""
    import struct

    from servemetrics.remote_write import decode_write_request, encode_write_request
    from servemetrics.samples import Sample
    from servemetrics.types import labels_of

    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    lab = labels_of({"model_id": "m1"})
    body = encode_write_request(
        [Sample("g", lab, 1.0, 1), Sample("g", lab, STALE_NAN, 2), Sample("g", lab, other_nan, 3)]
    )
    got = decode_write_request(body)
    assert [(s.ts_ms, struct.pack("<d", s.value)) for s in got] == [
        (1, struct.pack("<d", 1.0)),
        (2, struct.pack("<Q", 0x7FF0000000000002)),
    ]
