"""kill -9 during ingest loses no acknowledged sample (issue 12 "How we will know"; the guarantee is
docs/store.md "Durability"). Writers push remote_write batches of known samples to a real
`servemetrics serve` on the embedded DuckDB store; once enough of them are acknowledged (204) it is
SIGKILLed with writes in flight, restarted on the same data directory, and killed again, three times.
Then the store must open, hold every acknowledged sample with its exact value, and hold each batch that
was not acknowledged whole or not at all (one batch is one ``head`` insert)."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import cramjam
import httpx
import numpy as np
import pytest

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
STEP_MS = 100
WRITERS, KILLS, ACKS_PER_ROUND = 3, 3, 12
MAX_BATCHES = 150
"""Batch numbers are never reused: 150 batches span 750 s of timestamps."""


def _batch(start_ms: int, number: int) -> tuple[bytes, dict[tuple[str, int], float]]:
    """Batch ``number``: a snappy remote_write body and its samples {(gpu, ts): value}; its timestamps
    follow those of batch ``number - 1``, value ``number * 10_000 + series * 100 + sample``."""
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
    raw, n = encode_batch(batch)
    assert n == SERIES * PER_SERIES
    samples = {
        (f"g{i}", int(t)): float(v) for i, row in enumerate(values) for t, v in zip(ts, row, strict=True)
    }
    return bytes(cramjam.snappy.compress_raw(raw)), samples


@dataclass
class Ledger:
    """What the writers sent: every batch's samples, and which batches were acknowledged (2xx)."""

    start_ms: int
    numbers: itertools.count[int] = field(default_factory=itertools.count)
    sent: dict[int, dict[tuple[str, int], float]] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, base: str) -> None:
        """Post batches one after another until one fails to be acknowledged (the service was killed)
        or ``MAX_BATCHES`` are used up."""
        with httpx.Client(timeout=60) as client:
            while (number := next(self.numbers)) < MAX_BATCHES:
                body, samples = _batch(self.start_ms, number)
                with self.lock:
                    self.sent[number] = samples
                try:
                    ok = client.post(f"{base}/api/v1/write", content=body, headers=WRITE_HEADERS).is_success
                except httpx.HTTPError:
                    return
                if not ok:
                    return
                with self.lock:
                    self.acked.add(number)


def _round(tmp: Path, base: str, ledger: Ledger) -> int:
    """Start the service, write with ``WRITERS`` writers until ``ACKS_PER_ROUND`` more batches are
    acknowledged, SIGKILL it with writes in flight; the number of batches acknowledged before the kill."""
    proc = start_service(tmp)
    writers = [threading.Thread(target=ledger.write, args=(base,)) for _ in range(WRITERS)]
    try:
        wait_http(f"{base}/healthz")
        before = len(ledger.acked)
        for w in writers:
            w.start()
        wait_until(lambda: len(ledger.acked) >= before + ACKS_PER_ROUND, "batches acknowledged", 60)
    finally:
        proc.kill()
        proc.wait()
        for w in writers:
            if w.is_alive():
                w.join(60)
    assert proc.returncode == -9  # SIGKILL, not a clean stop
    return len(ledger.acked)


def test_kill_9_during_remote_write_loses_no_acknowledged_sample(tmp_path):
    base = configure(tmp_path)
    # 20 minutes ago, at most 90 minutes into its 2 h chunk: the 750 s written never reach the seal
    # (newest sample 2 h 10 min past the chunk's start), so every sample stays in ``head``
    start_ms = int(time.time() * 1000) - 20 * 60_000
    start_ms -= max(0, start_ms % CHUNK_MS - 90 * 60_000)
    ledger = Ledger(start_ms)
    acked_at_kills = [_round(tmp_path, base, ledger) for _ in range(KILLS)]

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
    assert gpus == sorted(f"g{i}" for i in range(SERIES))
    assert (sealed, {n: c for n, c in lost.items() if c}, partial) == (0, {}, {})
    extra = stored.keys() - set().union(*ledger.sent.values())
    assert not extra  # nothing stored that no batch sent
