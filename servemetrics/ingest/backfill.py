"""Backfill: stream an OpenMetrics file with timestamps (seconds) into adapted ``SampleBatch`` es.

The file is read in chunks (never whole) and cut into *parse units*: one metric family's metadata
lines (``# HELP``/``# TYPE``/``# UNIT``) plus a run of its sample lines, closed with ``# EOF``. Each
unit is parsed by ``prometheus_client``'s OpenMetrics parser. Units are cut

- at every metadata line of a new family, and when a family's metadata repeats (concatenated scrapes);
- in histogram / summary families, at every timestamp change: ``prometheus_client`` 0.26 remembers the
  series of a group across timestamps and drops the second point of every bucket, then fails with
  "+Inf bucket missing" (regression case C11), so each unit holds one timestamp;
- in other families, when a series comes back after another one (the parser rejects interleaved series
  within a family as "Invalid metric grouping"), and every ``_MAX_UNIT_LINES`` lines at a series change.

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

import itertools
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import BinaryIO

import numpy as np

from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.adapters.columnar import adapt_batch
from servemetrics.ingest.backfill_fast import FAST_KINDS, FastRun, Lines, Tokeniser, make_run, parse_run
from servemetrics.ingest.backfill_library import BackfillError, Unit, parse_unit, register_labels
from servemetrics.ingest.exposition import (
    CREATED_HORIZON_MS,
    created_zeros,
)
from servemetrics.samples import Sample, SampleBatch
from servemetrics.types import SeriesKey

__all__ = ["BackfillError", "Progress", "iter_backfill"]

Progress = Callable[[int, int | None], None]
"""``progress(bytes_read, total_bytes_or_None)``, called after each chunk read."""

_READ_BYTES = 4 << 20
_MAX_UNIT_LINES = 5_000
_CHUNK_LINES = 40_000
_AUTO_WORKERS_MIN_BYTES = 32 << 20
_FAST_READER = True
"""Blocks go to ``backfill_fast`` (False: every line is read as text, every unit by the library; tests)."""
_PER_TIMESTAMP = frozenset({"histogram", "gaugehistogram", "summary"})
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "histogram": ("_count", "_sum", "_bucket", "_created"),
    "gaugehistogram": ("_gcount", "_gsum", "_bucket"),
    "info": ("_info",),
}


def _sample_name(line: str) -> str:
    brace, space = line.find("{"), line.find(" ")
    end = brace if brace != -1 and (space == -1 or brace < space) else space
    return line[:end] if end != -1 else line.rstrip("\n")


def _timestamp_token(line: str) -> str:
    head = line.split(" # ", 1)[0] if " # " in line else line
    head = head.rstrip()
    return head[head.rfind(" ") + 1 :]


def _series_token(line: str, name: str) -> str:
    if line.startswith(name + "{"):
        return line[: line.find("} ") + 1]
    return name


class _Cutter:
    """Cut a stream of lines into parse units (see the module docstring): text lines (``feed``) or the
    columns of a block (``feed_block``, ``backfill_fast``), whose plain lines are cut as their text would
    be; a unit of plain lines only, of a kind the fast reader reads, becomes (part of) a ``FastRun``."""

    def __init__(self, tokeniser: Tokeniser | None = None) -> None:
        self.line_no = 0
        self._prefixes = tokeniser.prefixes if tokeniser is not None else []
        self._family: str | None = None
        self._type = "unknown"
        self._allowed: frozenset[str] = frozenset()
        self._meta: list[str] = []
        self._meta_nos: list[int] = []
        self._pieces: list[list[str] | Lines] = []
        self._count = 0
        self._first = 0
        self._ts = ""
        self._keys: set[str] = set()
        self._last_key = ""

    def feed(self, lines: list[str], units: list[Unit | FastRun]) -> None:
        """Consume lines (each ending in ``\\n``), appending finished units to ``units``."""
        for line in lines:
            self._line(line, units)

    def _line(self, line: str, units: list[Unit | FastRun]) -> None:
        self.line_no += 1
        if line[0] == "#":
            self._metadata(line, units)
        elif line != "\n":
            self._sample(line, units)

    def feed_block(self, block: Lines, units: list[Unit | FastRun]) -> None:
        """Consume a block's lines: plain stretches in columns, any other line as text."""
        base = self.line_no
        special = np.flatnonzero(~block.plain).tolist()
        special.append(len(block))
        i = 0
        for j in special:
            if i < j:
                self._plain(block, i, j, base, units)
            if j < len(block):
                self.line_no = base + j
                self._line(block.line(j), units)
            i = j + 1
        self.line_no = base + len(block)

    def close(self, units: list[Unit | FastRun]) -> None:
        """Flush the last unit."""
        self._flush(units)

    def _metadata(self, line: str, units: list[Unit | FastRun]) -> None:
        if line.startswith("# EOF"):
            self._flush(units)
            self._family = None
            return
        parts = line.split(" ", 3)
        name = parts[2].rstrip("\n") if len(parts) > 2 else ""
        if name != self._family or self._count:
            self._flush(units)
            self._family, self._type, self._meta, self._meta_nos = name, "unknown", [], []
            self._allowed = frozenset({name})
        if len(parts) == 4 and parts[1] == "TYPE":
            self._type = parts[3].strip()
            self._allowed = frozenset(name + s for s in _SUFFIXES.get(self._type, ("",)))
        self._meta.append(line)
        self._meta_nos.append(self.line_no)

    def _new_family(self, name: str, units: list[Unit | FastRun]) -> None:
        self._flush(units)
        self._family, self._type, self._meta, self._meta_nos = name, "unknown", [], []
        self._allowed = frozenset({name})

    def _sample(self, line: str, units: list[Unit | FastRun]) -> None:
        name = _sample_name(line)
        if name not in self._allowed:
            self._new_family(name, units)
        if self._type in _PER_TIMESTAMP:
            ts = _timestamp_token(line)
            if self._count and ts != self._ts:
                self._flush(units)
            self._ts = ts
        else:
            key = _series_token(line, name)
            if key != self._last_key and (key in self._keys or self._count >= _MAX_UNIT_LINES):
                self._flush(units)
            self._keys.add(key)
            self._last_key = key
        self._add([line], 1, self.line_no)

    def _add(self, piece: list[str] | Lines, count: int, first_line: int) -> None:
        if not self._count:
            self._first = first_line
        self._pieces.append(piece)
        self._count += count

    def _plain(self, block: Lines, i: int, j: int, base: int, units: list[Unit | FastRun]) -> None:
        """Cut plain lines ``i`` to ``j`` of ``block`` (``base``: the file line before the block)."""
        pid = block.pid
        while i < j:
            k = self._first_outside(pid, i, j)
            if k == i:
                self._new_family(self._prefixes[int(pid[i])].name, units)  # type: ignore[union-attr]
                continue
            if self._type in _PER_TIMESTAMP:
                self._per_timestamp(block, i, k, base, units)
            else:
                self._by_series(block, i, k, base, units)
            i = k

    def _first_outside(self, pid: np.ndarray, i: int, j: int) -> int:
        """The first of lines ``i`` to ``j`` whose name the current family does not allow (``j``: none),
        looked for in growing windows, so a family's stretch costs about its own length."""
        allowed, prefixes = self._allowed, self._prefixes
        lo, width = i, 64
        while lo < j:
            hi = min(j, lo + width)
            window = pid[lo:hi]
            outside = [p for p in np.unique(window).tolist() if prefixes[p].name not in allowed]
            if outside:
                return lo + int(np.flatnonzero(np.isin(window, outside))[0])
            lo, width = hi, width * 4
        return j

    def _per_timestamp(self, block: Lines, i: int, k: int, base: int, units: list[Unit | FastRun]) -> None:
        """Plain lines ``i`` to ``k`` of a histogram or summary family: a unit per timestamp."""
        if self._count and _ts_text(block, i) != self._ts:
            self._flush(units)
        cuts = (i + 1 + np.flatnonzero(block.ts_new[i + 1 : k])).tolist()
        head = cuts[0] if cuts else k
        self._add(block.slice(i, head), head - i, base + i + 1)
        if cuts:
            self._flush(units)
            last = cuts[-1]
            if len(cuts) > 1:
                starts = np.asarray(cuts[:-1], dtype=np.int64) - cuts[0]
                self._emit(block.slice(cuts[0], last), starts, base + cuts[0] + 1 + starts, units)
            self._add(block.slice(last, k), k - last, base + last + 1)
        self._ts = _ts_text(block, k - 1)

    def _by_series(self, block: Lines, i: int, k: int, base: int, units: list[Unit | FastRun]) -> None:
        """Plain lines ``i`` to ``k`` of another family: cut where a series comes back, or at a series
        change after ``_MAX_UNIT_LINES`` lines (``_sample``'s rule, per run of one series)."""
        pid = block.pid[i:k]
        runs = [0, *(1 + np.flatnonzero(pid[1:] != pid[:-1])).tolist(), k - i]
        prefixes = self._prefixes
        for a, b in itertools.pairwise(runs):
            key = prefixes[int(pid[a])].text  # type: ignore[union-attr]
            if key != self._last_key and (key in self._keys or self._count >= _MAX_UNIT_LINES):
                self._flush(units)
            self._keys.add(key)
            self._last_key = key
            self._add(block.slice(i + a, i + b), b - a, base + i + a + 1)

    def _emit(
        self, lines: Lines, starts: np.ndarray, first_lines: np.ndarray, units: list[Unit | FastRun]
    ) -> None:
        family = self._family or ""
        if self._type in FAST_KINDS and "# UNIT" not in "".join(self._meta):
            units.append(
                make_run(
                    family,
                    self._type,
                    "".join(self._meta),
                    tuple(self._meta_nos),
                    lines,
                    starts,
                    first_lines,
                    self._prefixes,
                )
            )
            return
        bounds = [*starts.tolist(), len(lines)]
        for u, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            units.append(self._unit(lines.slice(lo, hi).lines(), int(first_lines[u])))

    def _unit(self, lines: list[str], first: int) -> Unit:
        return Unit(self._family or "", self._type, "".join(self._meta), lines, tuple(self._meta_nos), first)

    def _flush(self, units: list[Unit | FastRun]) -> None:
        if self._count:
            pieces = self._pieces
            if all(isinstance(p, Lines) for p in pieces):
                joined = Lines.join(pieces)  # type: ignore[arg-type]
                self._emit(joined, np.zeros(1, np.int64), np.asarray([self._first]), units)
            else:
                lines = [x for p in pieces for x in (p.lines() if isinstance(p, Lines) else p)]
                units.append(self._unit(lines, self._first))
        self._pieces = []
        self._count = 0
        self._keys = set()
        self._last_key = ""


def _ts_text(block: Lines, i: int) -> str:
    """The timestamp token of plain line ``i`` (``_timestamp_token`` of its text)."""
    return _timestamp_token(block.line(i))


def _process(
    units: list[Unit | FastRun], target_labels: Mapping[str, str]
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
        return adapt_batch(batch, target_labels), []
    zeros = adapt(created_zeros(list(batch.samples()), created, CREATED_HORIZON_MS), target_labels)
    return adapt_batch(batch, target_labels), zeros


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
    cutter = _Cutter(tokeniser)
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
    target_labels: Mapping[str, str],
    batch_size: int = 500_000,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Iterator[SampleBatch]:
    """Stream an OpenMetrics file (timestamps in seconds) as adapted canonical ``SampleBatch`` es.

    Args:
        path_or_file: a path, or a binary file object (read sequentially, never whole).
        target_labels: labels attached to every sample (model_id, deployment_id, replica, ...).
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
    labels = dict(target_labels)
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
    chunks: Iterator[list[Unit | FastRun]], labels: dict[str, str], n_workers: int
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
