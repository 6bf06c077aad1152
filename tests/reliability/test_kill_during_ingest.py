"""kill -9 during ingest loses no acknowledged sample (issue 12 "How we will know"; the guarantee is
docs/store.md "Durability"). Two remote_write writers and one ``/v1/import`` writer push batches of
known samples to a real `servemetrics serve` on the embedded DuckDB store; once 12 more are
acknowledged (2xx) it is SIGKILLed with writes in flight and restarted on the same data directory,
three times. Then the store must open, hold every acknowledged sample with its exact value and each
batch that was not acknowledged whole or not at all (one batch is one ``head`` insert), and a start
must have removed the import spool files the kills left behind. About 15 s."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cramjam
import httpx
import numpy as np
import pytest

from servemetrics.api.service import IMPORT_SPOOL
from servemetrics.remote_write import encode_batch
from servemetrics.samples import SampleBatch
from servemetrics.store import open_store
from servemetrics.store.duckdb_schema import CHUNK_MS
from servemetrics.types import labels_of
from tests.processes import start_service, wait_http, wait_until
from tests.reliability.helpers import WRITE_HEADERS, configure, head_values

pytestmark = pytest.mark.e2e
NAME = "baseten_gpu_memory_used"
"""A gauge stored as sent (no unit conversion), so stored values are the values written."""
SERIES, PER_SERIES = 20, 50
"""Each batch: ``PER_SERIES`` samples of each of ``SERIES`` series (gpu ``g0`` …), 1,000 samples."""
STEP_MS = 20
KILLS, ACKS_PER_ROUND = 3, 12
MAX_BATCHES = 150
"""Batch numbers are never reused: 150 batches span 150 s of timestamps."""


def _batch(start_ms: int, number: int) -> tuple[SampleBatch, dict[tuple[str, int], float]]:
    """Batch ``number`` and its samples {(gpu, ts): value}: its timestamps follow those of batch
    ``number - 1``, value ``number * 10_000 + series * 100 + sample``."""
    keys = [
        (NAME, labels_of({"model_id": "m1", "deployment_id": "d1", "replica": "r1", "gpu": f"g{i}"}))
        for i in range(SERIES)
    ]
    j = np.arange(PER_SERIES, dtype=np.int64)
    ts = start_ms + (number * PER_SERIES + j) * STEP_MS
    values = number * 10_000 + np.arange(SERIES)[:, None] * 100 + j[None, :]
    batch = SampleBatch(
        series=keys,
        series_index=np.repeat(np.arange(SERIES, dtype=np.uint32), PER_SERIES),
        ts_ms=np.tile(ts, SERIES),
        values=values.astype(np.float64).ravel(),
    )
    samples = {
        (f"g{i}", int(t)): float(v) for i, row in enumerate(values) for t, v in zip(ts, row, strict=True)
    }
    return batch, samples


def _remote_write(client: httpx.Client, base: str, batch: SampleBatch) -> httpx.Response:
    """``POST /api/v1/write`` of ``batch`` (snappy protobuf)."""
    raw, n = encode_batch(batch)
    assert n == len(batch)
    body = bytes(cramjam.snappy.compress_raw(raw))
    return client.post(f"{base}/api/v1/write", content=body, headers=WRITE_HEADERS)


def _import(client: httpx.Client, base: str, batch: SampleBatch) -> httpx.Response:
    """``POST /v1/import`` of ``batch`` as OpenMetrics text (timestamps in seconds, to the ms) of replica
    r1 of d1."""
    gpus = [dict(labels)["gpu"] for _, labels in batch.series]
    columns = (batch.series_index.tolist(), batch.ts_ms.tolist(), batch.values.tolist())
    lines = [f"# TYPE {NAME} gauge"] + [
        f'{NAME}{{gpu="{gpus[i]}"}} {v!r} {t // 1000}.{t % 1000:03d}'
        for i, t, v in zip(*columns, strict=True)
    ]
    params = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
    headers = {"Authorization": WRITE_HEADERS["Authorization"]}
    body = "\n".join([*lines, "# EOF", ""])
    return client.post(f"{base}/v1/import", params=params, content=body, headers=headers)


Poster = Callable[[httpx.Client, str, SampleBatch], httpx.Response]
WRITERS: tuple[Poster, ...] = (_remote_write, _remote_write, _import)
"""Two remote_write writers and one ``/v1/import`` writer, concurrently."""


@dataclass
class Ledger:
    """What the writers sent: every batch's samples, and which batches were acknowledged (2xx)."""

    start_ms: int
    numbers: itertools.count[int] = field(default_factory=itertools.count)
    sent: dict[int, dict[tuple[str, int], float]] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, base: str, post: Poster) -> None:
        """Post batches with ``post`` one after another until one is not acknowledged (the service was
        killed) or ``MAX_BATCHES`` are used up."""
        with httpx.Client(timeout=60) as client:
            while (number := next(self.numbers)) < MAX_BATCHES:
                batch, samples = _batch(self.start_ms, number)
                with self.lock:
                    self.sent[number] = samples
                    self.in_flight += 1
                try:
                    ok = post(client, base, batch).is_success
                except httpx.HTTPError:
                    ok = False
                with self.lock:
                    self.in_flight -= 1
                    if not ok:
                        return
                    self.acked.add(number)

    def kill_now(self, target: int) -> bool:
        """At least ``target`` batches acknowledged and, at this moment, a post in flight."""
        with self.lock:
            return len(self.acked) >= target and self.in_flight > 0


def _round(tmp: Path, base: str, ledger: Ledger) -> int:
    """Start the service, write with the ``WRITERS`` until ``ACKS_PER_ROUND`` more batches are
    acknowledged, SIGKILL it while a post is in flight; the number of batches acknowledged by then."""
    proc = start_service(tmp)
    writers = [threading.Thread(target=ledger.write, args=(base, post)) for post in WRITERS]
    try:
        wait_http(f"{base}/healthz")
        before = len(ledger.acked)
        for w in writers:
            w.start()
        wait_until(lambda: ledger.kill_now(before + ACKS_PER_ROUND), "acknowledged batches", 60)
    finally:
        proc.kill()
        proc.wait()
        for w in writers:
            if w.is_alive():
                w.join(60)
    assert proc.returncode == -9  # SIGKILL, not a clean stop
    return len(ledger.acked)


def _spools(tmp: Path) -> int:
    """Import spool files in the service's data directory (``api/service.IMPORT_SPOOL``)."""
    prefix, suffix = IMPORT_SPOOL
    return len(list((tmp / "data").glob(f"{prefix}*{suffix}")))


def test_kill_9_during_ingest_loses_no_acknowledged_sample(tmp_path):
    base = configure(tmp_path)
    # in the current 2 h chunk, at most 10 minutes ago: the store seals a chunk once any series (the
    # service writes series of its own at the wall clock's time) has a sample 2 h 10 min past the chunk's
    # start, which no sample of the next minutes has, so every sample stays in ``head``; and the last is
    # less than 10 minutes ahead (samples.MAX_FUTURE_MS)
    now = int(time.time() * 1000)
    start_ms = max(now - now % CHUNK_MS, now - 10 * 60_000)
    ledger = Ledger(start_ms)
    acked_at_kills = [_round(tmp_path, base, ledger) for _ in range(KILLS)]

    spools_left = _spools(tmp_path)  # of the imports the kills cut short (usually one per kill)
    proc = start_service(tmp_path)  # a start removes them
    try:
        wait_http(f"{base}/healthz")
    finally:
        proc.kill()
        proc.wait()
    store = open_store(tmp_path / "data")  # after the last kill, without a clean stop in between
    try:
        gpus = store.label_values(NAME, "gpu")
    finally:
        store.close()
    stored, sealed = head_values(tmp_path, NAME, "m1")

    acked = sorted(ledger.acked)
    lost = {n: sum(stored.get(k) != v for k, v in ledger.sent[n].items()) for n in acked}
    partial = {
        n: len(ledger.sent[n].keys() & stored.keys())
        for n in sorted(ledger.sent.keys() - ledger.acked)
        if len(ledger.sent[n].keys() & stored.keys()) not in (0, SERIES * PER_SERIES)
    }
    assert len(acked) >= KILLS * ACKS_PER_ROUND, acked_at_kills
    assert _spools(tmp_path) == 0, f"{spools_left} import spool files left by the kills, not removed"
    assert gpus == sorted(f"g{i}" for i in range(SERIES))
    assert (sealed, {n: c for n, c in lost.items() if c}, partial) == (0, {}, {})
    extra = stored.keys() - set().union(*ledger.sent.values())
    assert not extra  # nothing stored that no batch sent
