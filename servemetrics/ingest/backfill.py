"""Backfill: stream an OpenMetrics file with timestamps (seconds) into adapted ``SampleBatch`` es.

The file is read in chunks (never whole) and cut into *parse units*: one metric family's metadata
lines (``# HELP``/``# TYPE``/``# UNIT``) plus a run of its sample lines, closed with ``# EOF``. Each
unit is parsed by ``prometheus_client``'s OpenMetrics parser. Units are cut

- at every metadata line of a new family, and when a family's metadata repeats (concatenated scrapes);
- in histogram / summary families, at every timestamp change: ``prometheus_client`` 0.26 remembers the
  series of a group across timestamps and drops the second point of every bucket, then fails with
  "+Inf bucket missing" (regression case C11), so each unit holds one timestamp;
- in other families, when a series comes back after another one (the parser rejects interleaved series
  within a family as "Invalid metric grouping"), and every ``MAX_UNIT_LINES`` lines at a series change.

The cutting is ``backfill_units.Cutter``.

Units are parsed, then adapted (``adapters.adapt``) in chunks of about ``_CHUNK_LINES`` lines, either
in this process or in a pool of worker processes.

The library path (``backfill_library``: the text each unit gives the parser, and its errors) reads
every unit the fast reader (``backfill_fast``: whole blocks in numpy, the common lines only) is not
certain of; both give the same samples and errors (tests/ingest/test_backfill_fast.py).

Creation times (issue 11 rule 7, the scraper's rule for a series new to its target): a counter-like
series (``_total``, ``_bucket``, ``_sum``, ``_count``) whose family gives ``<name>_created`` gets a 0 at that
time before its first sample in the file, when the time lies within ``CREATED_HORIZON_MS`` (the store's
10-minute lookback) before that sample. A worker finds, per chunk, each series' first sample and its
family's first creation time in the chunk (``_process``); the main process keeps the zeros of the series
no earlier chunk held (``_with_created``: a set of the series seen, bounded by the file's series). The
``_created`` samples themselves are never stored.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import BinaryIO

import numpy as np

from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.adapters.columnar import adapt_batch, adapt_batch_by_target
from servemetrics.ingest.backfill_fast import FastRun, Tokeniser, parse_run
from servemetrics.ingest.backfill_library import BackfillError, Unit, parse_unit, register_labels
from servemetrics.ingest.backfill_units import Cutter
from servemetrics.ingest.exposition import (
    CREATED_HORIZON_MS,
    created_zeros,
)
from servemetrics.labels import TARGET_LABELS
from servemetrics.samples import Sample, SampleBatch
from servemetrics.types import SeriesKey

__all__ = ["BackfillError", "Progress", "iter_backfill"]

Progress = Callable[[int, int | None], None]
"""``progress(bytes_read, total_bytes_or_None)``, called after each chunk read."""

_READ_BYTES = 4 << 20
_CHUNK_LINES = 40_000
_AUTO_WORKERS_MIN_BYTES = 32 << 20
_FAST_READER = True
"""Blocks go to ``backfill_fast`` (False: every line is read as text, every unit by the library; tests)."""


def _process(
    units: list[Unit | FastRun], target_labels: Mapping[str, str] | None
) -> tuple[SampleBatch, list[Sample]]:
    """Parse and adapt a chunk of units into one columnar batch, and the ``_created`` zeros of its
    counter-like series, adapted: one per series, before its first sample in the chunk, when its family's
    first creation time in the chunk lies within ``CREATED_HORIZON_MS`` before it (runs in a worker
    process; ``_with_created`` keeps those of series the file had not shown before). The units of a
    ``FastRun`` that ``backfill_fast.parse_run`` is certain of are read there, the others here."""
    created: dict[SeriesKey, int] = {}
    raw = _Columns()
    for unit in units:
        if isinstance(unit, Unit):
            raw.add_samples(parse_unit(unit, created))
        else:
            _read_run(unit, raw, created)
    batch = raw.batch()
    if not created:
        return _adapted(batch, target_labels), []
    zeros = created_zeros(list(batch.samples()), created, CREATED_HORIZON_MS)
    if target_labels is None:
        return _adapted(batch, None), list(_adapted(SampleBatch.from_samples(zeros), None).samples())
    return _adapted(batch, target_labels), adapt(zeros, target_labels)


def _adapted(batch: SampleBatch, target_labels: Mapping[str, str] | None) -> SampleBatch:
    """``batch`` adapted with ``target_labels`` on every sample, or (``None``) with each series' own
    values of ``labels.TARGET_LABELS`` as its target labels, as remote_write adapts a body."""
    if target_labels is None:
        return adapt_batch_by_target(batch, TARGET_LABELS)
    return adapt_batch(batch, target_labels)


def _read_run(run: FastRun, raw: _Columns, created: dict[SeriesKey, int]) -> None:
    """Add the samples of ``run``'s units to ``raw`` in order: certain units from ``parse_run``, the
    others from the library parser."""
    used, first = np.unique(run.local, return_index=True)
    register_labels([run.prefix_texts[i] for i in used[np.argsort(first, kind="stable")].tolist()])
    read = parse_run(run)
    bounds = [*run.starts.tolist(), len(run.lines)]
    certain = read.certain.tolist()
    u = 0
    while u < len(certain):
        if not certain[u]:
            unit = Unit(
                run.family, run.kind, run.meta, run.unit_lines(u), run.meta_lines, int(run.first_lines[u])
            )
            raw.add_samples(parse_unit(unit, created))
            u += 1
            continue
        v = u
        while v < len(certain) and certain[v]:
            v += 1
        lo, hi = bounds[u], bounds[v]
        raw.add_columns(read.series, read.key_index[lo:hi], read.ts_ms[lo:hi], read.values[lo:hi])
        u = v


class _Columns:
    """Raw (source) samples of a chunk gathered in columns, in order."""

    def __init__(self) -> None:
        self._index: dict[SeriesKey, int] = {}
        self._idx: list[np.ndarray] = []
        self._ts: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []

    def add_samples(self, samples: list[Sample]) -> None:
        """Add ``Sample`` rows."""
        if samples:
            batch = SampleBatch.from_samples(samples)
            self.add_columns(batch.series, batch.series_index, batch.ts_ms, batch.values)

    def add_columns(
        self, series: list[SeriesKey], index: np.ndarray, ts: np.ndarray, values: np.ndarray
    ) -> None:
        """Add samples ``series[index[i]]``, ``ts[i]``, ``values[i]``."""
        if not index.shape[0]:
            return
        used = np.unique(index)
        remap = np.zeros(len(series), dtype=np.uint32)
        remap[used] = [self._index.setdefault(series[i], len(self._index)) for i in used.tolist()]
        self._idx.append(remap[index])
        self._ts.append(ts)
        self._vals.append(values)

    def batch(self) -> SampleBatch:
        """Everything added, as one batch (series in first-added order)."""
        if not self._idx:
            return SampleBatch([], np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.float64))
        return SampleBatch(
            list(self._index),
            np.concatenate(self._idx),
            np.concatenate(self._ts).astype(np.int64, copy=False),
            np.concatenate(self._vals).astype(np.float64, copy=False),
        )


def _with_created(results: Iterator[tuple[SampleBatch, list[Sample]]]) -> Iterator[SampleBatch]:
    """Each chunk's batch, with the created zeros of the series first seen in it (in the file order of
    chunks): a series new to the file counts its first value from its creation time (the scraper's rule
    for a series new to its target, docs/ingest.md)."""
    seen: set[SeriesKey] = set()
    for batch, zeros in results:
        if zeros:
            first: dict[SeriesKey, Sample] = {}
            for z in zeros:
                key = (z.name, z.labels)
                if key not in seen and (key not in first or first[key].ts_ms < z.ts_ms):
                    first[key] = z  # two sources of one series: the later creation time
            if first:
                yield SampleBatch.from_samples(first.values())
        seen.update(batch.series)
        yield batch


def _chunks(stream: BinaryIO, total: int | None, progress: Progress | None) -> Iterator[list[Unit | FastRun]]:
    tokeniser = Tokeniser()
    cutter = Cutter(tokeniser)
    units: list[Unit | FastRun] = []
    pending_lines = 0
    rest = b""
    done = 0
    while True:
        data = stream.read(_READ_BYTES)
        done += len(data)
        if not data:
            break
        data = rest + data
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        block = tokeniser.block(data[:cut]) if _FAST_READER else None
        if block is None:
            lines = data[:cut].decode("utf-8").splitlines(keepends=True)
            cutter.feed(lines, units)
            pending_lines += len(lines)
        else:
            cutter.feed_block(block, units)
            pending_lines += len(block)
        if progress is not None:
            progress(done, total)
        if pending_lines >= _CHUNK_LINES:
            yield units
            units, pending_lines = [], 0
    if rest:
        cutter.feed([rest.decode("utf-8") + "\n"], units)
    cutter.close(units)
    if units:
        yield units


class _Merger:
    """Concatenate per-chunk batches into batches of at least ``size`` samples (the last may be smaller)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._reset()

    def _reset(self) -> None:
        self._index: dict[SeriesKey, int] = {}
        self._idx: list[np.ndarray] = []
        self._ts: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self.count = 0

    def add(self, batch: SampleBatch) -> SampleBatch | None:
        """Add a chunk batch; return a full batch when one is ready."""
        if len(batch):
            remap = np.asarray(
                [self._index.setdefault(k, len(self._index)) for k in batch.series], dtype=np.uint32
            )
            self._idx.append(remap[batch.series_index])
            self._ts.append(batch.ts_ms)
            self._vals.append(batch.values)
            self.count += len(batch)
        return self.take() if self.count >= self.size else None

    def take(self) -> SampleBatch | None:
        """Return what has been added so far (``None`` when empty) and start a new batch."""
        if not self.count:
            return None
        out = SampleBatch(
            list(self._index), np.concatenate(self._idx), np.concatenate(self._ts), np.concatenate(self._vals)
        )
        self._reset()
        return out


def _open(path_or_file: str | os.PathLike[str] | BinaryIO) -> tuple[BinaryIO, int | None, bool]:
    if isinstance(path_or_file, (str, os.PathLike)):
        path = Path(path_or_file)
        return path.open("rb"), path.stat().st_size, True
    return path_or_file, None, False


def _auto_workers(total: int | None) -> int:
    if total is None or total < _AUTO_WORKERS_MIN_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 4))


def iter_backfill(
    path_or_file: str | os.PathLike[str] | BinaryIO,
    target_labels: Mapping[str, str] | None,
    batch_size: int = 500_000,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Iterator[SampleBatch]:
    """Stream an OpenMetrics file (timestamps in seconds) as adapted canonical ``SampleBatch`` es.

    Args:
        path_or_file: a path, or a binary file object (read sequentially, never whole).
        target_labels: labels attached to every sample (model_id, deployment_id, replica, ...), or
            ``None`` for a file of many targets: each series' own values of ``labels.TARGET_LABELS``
            are its target labels (the file's ``model_id``, ``deployment_id``, ``replica`` labels),
            as remote_write reads a body; the caller checks whom they name.
        batch_size: a batch is yielded once it holds at least this many samples (at most one
            parse chunk, about 40,000 lines, more); the last batch may be smaller.
        progress: called as ``progress(bytes_read, total_bytes or None)`` after each 4 MiB read.
        workers: processes that parse and adapt (``None``: one per CPU, up to 4, for files over
            32 MiB, else 1; 1 parses in this process).

    Raises:
        BackfillError: invalid OpenMetrics or a sample without a timestamp; the message names the line.
        UnicodeDecodeError: the file is not UTF-8.
    """
    stream, total, owned = _open(path_or_file)
    n_workers = _auto_workers(total) if workers is None else max(1, workers)
    merger = _Merger(batch_size)
    labels = None if target_labels is None else dict(target_labels)
    try:
        if n_workers == 1:
            results: Iterator[tuple[SampleBatch, list[Sample]]] = (
                _process(units, labels) for units in _chunks(stream, total, progress)
            )
            yield from _merged(_with_created(results), merger)
        else:
            pooled = _in_pool(_chunks(stream, total, progress), labels, n_workers)
            yield from _merged(_with_created(pooled), merger)
    finally:
        if owned:
            stream.close()


def _in_pool(
    chunks: Iterator[list[Unit | FastRun]], labels: dict[str, str] | None, n_workers: int
) -> Iterator[tuple[SampleBatch, list[Sample]]]:
    """Run ``_process`` over chunks in worker processes, in order, with at most two chunks per
    worker in flight (so the file is never read far ahead of the parsing)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(n_workers) as pool:
        pending: deque[AsyncResult[tuple[SampleBatch, list[Sample]]]] = deque()
        for units in chunks:
            pending.append(pool.apply_async(_process, (units, labels)))
            if len(pending) >= 2 * n_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _merged(results: Iterator[SampleBatch], merger: _Merger) -> Iterator[SampleBatch]:
    for batch in results:
        full = merger.add(batch)
        if full is not None:
            yield full
    last = merger.take()
    if last is not None:
        yield last
