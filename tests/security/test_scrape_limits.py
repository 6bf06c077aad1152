"""Issue 12 part 4 (scrape side) and part 9: hostile targets on a real loopback HTTP server (the
``Exporter`` of ``tests/scrape/test_scraper.py``) against the real ``Scraper`` and a ``MemoryStore``.

A scrape over a limit fails whole: ``up`` = 0 with the reason, nothing of it stored, the target's
previous series marked stale. ``scrape_timeout`` is a deadline for the whole scrape. A failed scrape's log
line quotes the target's text with its control characters escaped.
"""

from __future__ import annotations

import functools
import gzip
import logging
import time
import tracemalloc
import zlib
from collections.abc import Callable
from typing import BinaryIO

import anyio
import httpx
import pytest

from servemetrics.ingest.exposition import PARSE_CHUNK
from servemetrics.ingest.scrape_limits import ScrapeLimits
from servemetrics.ingest.scraper import Scraper, ScrapeResult, Target
from servemetrics.store.memory import MemoryStore
from tests.scrape.test_scraper import LABELS, T0, Exporter

GAUGE = "# TYPE vllm:kv_cache_usage_perc gauge\n"
MiB = 1 << 20


def _series(n: int, **labels: str) -> bytes:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return (GAUGE + "".join(f'vllm:kv_cache_usage_perc{{i="{i}"{extra}}} {i}\n' for i in range(n))).encode()


def _scrape(store: MemoryStore, url: str, ts: int, timeout_s: float = 10.0, **limits: int) -> ScrapeResult:
    """One scrape of ``url`` at ``ts`` by a new ``Scraper`` with ``limits``."""
    return _scrapes(store, url, [(ts, None)], timeout_s, **limits)[0]


def _scrapes(
    store: MemoryStore,
    url: str,
    plan: list[tuple[int, Callable[[], None] | None]],
    timeout_s: float = 10.0,
    **limits: int,
) -> list[ScrapeResult]:
    """Scrapes of ``url`` by one ``Scraper``: at each ``(ts, before)``, ``before()`` (sets the body) first."""

    async def go() -> list[ScrapeResult]:
        async with httpx.AsyncClient() as client:
            scraper = Scraper(client, store.append, timeout_s=timeout_s, limits=ScrapeLimits(**limits))
            out = []
            for ts, before in plan:
                if before is not None:
                    before()
                out.append(await scraper.scrape_once(Target(url, LABELS), ts))
            return out

    return anyio.run(go)


def _stored(store: MemoryStore) -> list[tuple[str, float, int]]:
    """Every stored sample as ``(name, value, ts)`` (NaN markers as the string "stale")."""
    out = []
    for (name, _labels), series in store._series.items():
        for ts, value in zip(series.ts, series.values, strict=True):
            out.append((name, "stale" if value != value else value, ts))
    return sorted(out, key=str)


def _bodies(exporter: Exporter, *bodies: bytes) -> list[tuple[int, Callable[[], None] | None]]:
    """A plan for ``_scrapes``: ``bodies[i]`` answered at ``T0 + 15 s * i``."""
    return [(T0 + 15_000 * i, functools.partial(setattr, exporter, "body", b)) for i, b in enumerate(bodies)]


def _where(exporter: Exporter) -> str:
    return f"scrape of {exporter.url} (model m1 deployment d1 replica r1) failed: "


def test_a_dribbling_target_is_cut_off_at_scrape_timeout(exporter: Exporter) -> None:
    """One byte every 0.2 s (each read well within the timeout): today 60 s and ``up`` = 1."""

    def dribble(out: BinaryIO) -> None:
        for byte in _series(1) * 10:
            out.write(bytes([byte]))
            time.sleep(0.2)

    exporter.writer = dribble
    store = MemoryStore()
    started = time.monotonic()
    result = _scrape(store, exporter.url, T0, timeout_s=1.0)
    assert time.monotonic() - started < 3.0
    assert not result.up
    assert result.error == _where(exporter) + "scrape took longer than scrape_timeout (1s)"
    assert _stored(store) == [("up", 0.0, T0)]


def test_a_body_over_body_size_limit_fails_the_scrape_and_marks_the_old_series(exporter: Exporter) -> None:
    store = MemoryStore()
    good, big = _series(2), _series(2) + b"# padding\n" * 100_000  # 1 MB, valid exposition
    first, result = _scrapes(store, exporter.url, _bodies(exporter, good, big), body_size_limit=4096)
    assert first.up and not result.up
    assert result.error == _where(exporter) + (
        "body_size_limit exceeded: the answer is over 4096 bytes (decompressed); the limit is 4096"
    )
    assert [s for s in _stored(store) if s[2] == T0 + 15_000] == [
        ("up", 0.0, T0 + 15_000),
        ("vllm:kv_cache_usage_perc", "stale", T0 + 15_000),
        ("vllm:kv_cache_usage_perc", "stale", T0 + 15_000),
    ]
    assert len(_stored(store)) == 6  # the first scrape's 2 + up, the second's 2 markers + up


def test_a_gzip_bomb_is_stopped_after_the_limit(exporter: Exporter) -> None:
    """256 MiB of zeros, about 250 KiB gzipped: inflated at most ``body_size_limit + 1`` bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MiB)
    bomb = b"".join(deflate.compress(zeros) for _ in range(256)) + deflate.flush()
    assert len(bomb) < MiB // 2
    exporter.headers = {"Content-Encoding": "gzip"}
    exporter.body = bomb
    store = MemoryStore()
    tracemalloc.start()
    try:
        result = _scrape(store, exporter.url, T0, body_size_limit=MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.error == _where(exporter) + (
        f"body_size_limit exceeded: the answer is over {MiB} bytes (decompressed); the limit is {MiB}"
    )
    assert peak < 8 * MiB  # httpx inflating it would allocate 256 MiB
    assert _stored(store) == [("up", 0.0, T0)]


def test_a_gzipped_body_within_the_limit_is_read(exporter: Exporter) -> None:
    exporter.headers = {"Content-Encoding": "gzip"}
    exporter.body = gzip.compress(_series(3))
    store = MemoryStore()
    assert _scrape(store, exporter.url, T0, body_size_limit=4096).up
    assert len(_stored(store)) == 4


def test_sample_limit(exporter: Exporter) -> None:
    store = MemoryStore()
    first, result = _scrapes(
        store, exporter.url, _bodies(exporter, _series(10), _series(11)), sample_limit=10
    )
    assert first.up
    assert result.error == _where(exporter) + "sample_limit exceeded: 11 samples, the limit is 10"
    stored = [s for s in _stored(store) if s[2] == T0 + 15_000]
    assert stored == [("up", 0.0, T0 + 15_000)] + [("vllm:kv_cache_usage_perc", "stale", T0 + 15_000)] * 10


def test_a_scrape_over_sample_limit_stops_parsing_after_the_first_piece_over_it(exporter: Exporter) -> None:
    """5,000 gauges, sample_limit 1,000: the first piece of ``PARSE_CHUNK`` (1,024) lines is over it, so
    the scrape fails there, the other 3,976 lines never parsed."""
    assert PARSE_CHUNK == 1024
    exporter.body = _series(5000)
    store = MemoryStore()
    result = _scrape(store, exporter.url, T0, sample_limit=1000)
    assert result.error == _where(exporter) + (
        "sample_limit exceeded: 1024 samples before parsing stopped, the limit is 1000"
    )
    assert _stored(store) == [("up", 0.0, T0)]


def _cut(series: str) -> str:
    return series[:100] + "…"


@pytest.mark.parametrize(
    ("labels", "limits", "reason"),
    [
        (
            {f"l{k}": "v" for k in range(4)},
            {"label_limit": 9},
            "label_limit exceeded: series "
            + _cut(
                'vllm:kv_cache_usage_perc{deployment_id="d1",i="0",l0="v",l1="v",l2="v",l3="v",'
                'model_id="m1",model_name="M",replica="r1",source="vllm"}'
            )
            + " has 10 labels, the limit is 9",
        ),
        (
            {"n" * 40: "v"},
            {"label_name_length_limit": 32},
            "label_name_length_limit exceeded: series "
            + _cut(
                'vllm:kv_cache_usage_perc{deployment_id="d1",i="0",model_id="m1",model_name="M",' + "n" * 40
            )
            + " has a label name of 40 characters, the limit is 32",
        ),
        (
            {"long": "x" * 65},
            {"label_value_length_limit": 64},
            "label_value_length_limit exceeded: label long of series "
            + _cut('vllm:kv_cache_usage_perc{deployment_id="d1",i="0",long="' + "x" * 65)
            + " has a value of 65 characters, the limit is 64",
        ),
    ],
)
def test_label_limits(
    exporter: Exporter, labels: dict[str, str], limits: dict[str, int], reason: str
) -> None:
    store = MemoryStore()
    exporter.body = _series(2, **labels)
    result = _scrape(store, exporter.url, T0, **limits)
    assert result.error == _where(exporter) + reason
    assert _stored(store) == [("up", 0.0, T0)]


def test_the_log_line_of_a_failed_scrape_escapes_control_characters(
    exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    """A label value holding CR, LF (the text format's ``\\n`` escape) and an ANSI colour, quoted by the
    reason of a scrape over ``label_value_length_limit``: one log line, the characters escaped."""
    exporter.body = GAUGE.encode() + b'vllm:kv_cache_usage_perc{a="\r\\n\x1b[31mINFO forged"} 1\n'
    with caplog.at_level(logging.WARNING, logger="servemetrics.ingest.scraper"):
        result = _scrape(MemoryStore(), exporter.url, T0, label_value_length_limit=8)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == result.error
    forged = 'vllm:kv_cache_usage_perc{a="\\r\\n\\x1b[31mINFO forged",deployment_id="d1",model_id="m1",'
    assert line == _where(exporter) + (
        f'label_value_length_limit exceeded: label a of series {forged}model_name="M",repl… has a value of '
        "18 characters, the limit is 8"
    )
    assert not any(c in line for c in "\r\n\x1b")


def test_a_parse_error_quoting_the_body_is_escaped(
    exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    exporter.body = b"x 1\nbad\x1b[31m\rINFO all good\n"
    with caplog.at_level(logging.WARNING, logger="servemetrics.ingest.scraper"):
        _scrape(MemoryStore(), exporter.url, T0)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == _where(exporter) + (
        "line 2: invalid Prometheus text exposition: invalid metric name:bad\\x1b[31m\\rINFO all good"
    )
