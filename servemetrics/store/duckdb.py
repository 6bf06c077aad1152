"""``DuckDBStore``: the embedded default ``Store``, two DuckDB files (schema in ``duckdb_schema``).

Appends go to ``head`` (one row per sample, inserted from Arrow); once the newest sample is
``CHUNK_MS + GRACE_MS`` past the sealed boundary, whole chunks of ``head`` are sealed: encoded per series
into ``chunks`` (about 1 byte per sample) with their ``rollups``, and removed from ``head``. Samples older
than the sealed boundary (backfill, late scrapes) are merged into their chunks, which are rewritten.
Every write runs on one thread (``duckdb_writer.Writer``, as datasette does it): callers queue it and
wait. Every read runs in its own cursor and transaction on an immutable ``View`` the writer publishes,
so API reads see a consistent snapshot while ingest writes. Semantics are those of
``servemetrics.store.base``; the layout, the crash window and the concurrency are in ``docs/store.md``.
"""

from __future__ import annotations

import functools
import json
import os
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from servemetrics.samples import SampleBatch
from servemetrics.store import duckdb_codec as codec
from servemetrics.store import duckdb_eval
from servemetrics.store.answer_cache import AnswerCache, cached_select
from servemetrics.store.base import GroupKey, Selection, SelectResult, StoreStats, check_value_sets
from servemetrics.store.duckdb_groups import group_cells
from servemetrics.store.duckdb_previous import last_real_before, sealed_previous
from servemetrics.store.duckdb_schema import (
    CHUNK_MS,
    HOT_LABELS,
    Con,
    chunks_to_rewrite,
    create_tables,
    delete_chunks,
    delete_head,
    insert_head,
    insert_series,
    load_chunks,
    newest_per_series,
    read_chunks,
    read_series,
    sealed_samples,
    write_rows,
    write_sealed_until,
)
from servemetrics.store.duckdb_series import SeriesIndex
from servemetrics.store.duckdb_state import NO_TS, drop_sealed_step, load_state, recover_head
from servemetrics.store.duckdb_view import (
    ChunkCache,
    Generation,
    Segment,
    View,
    concat,
    first_wins,
    sort_segment,
)
from servemetrics.store.duckdb_writer import (
    CLOSED,
    Writer,
    checkpoint,
    checkpoint_and_close,
    connect,
    replace_head_file,
)
from servemetrics.types import Labels, Matchers, SeriesKey

GRACE_MS = 10 * 60 * 1000
"""Chunks are sealed once the newest sample is this far past their end (late scrapes stay in ``head``)."""

APPEND_PIECE = 100_000
"""Samples per writer task of an ``append``: a larger batch is cut, so a scrape waits one piece at most."""

_NO_TS = NO_TS

Step = Callable[[View], tuple[View, int]]
"""A write step inside the main file's transaction: the view after it, and how many samples it changed.
A step that rewrote sealed chunks returns a new view (rollups reloaded); one that did nothing, its input."""


class DuckDBStore:
    """A ``Store`` in the DuckDB file ``path`` and its head file ``<stem>.head<suffix>`` (created when
    missing; raises ``duckdb.Error`` when a file cannot be opened).

    ``cache_samples`` bounds the in-memory cache of decoded sealed chunks (0 disables it);
    ``answer_entries`` the answers kept per (question, sealed value set) (``answer_cache``; 0 disables it).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, cache_samples: int = 4_000_000, answer_entries: int = 200_000
    ) -> None:
        self.path = Path(path)
        self.head_path = self.path.with_name(f"{self.path.stem}.head{self.path.suffix}")
        self._cache = ChunkCache(cache_samples)
        self._answers = AnswerCache(answer_entries) if answer_entries else None
        self._gen = Generation()
        self._resolved: dict[SeriesKey, tuple[int, np.ndarray]] = {}
        self._index = SeriesIndex()  # ids, keys, labels by id, ids by name (``duckdb_series``)
        self._keys, self._ids, self._labels = self._index.keys, self._index.ids, self._index.labels
        con = connect(self.path, self.head_path)
        create_tables(con)
        self._sealed_until, self._view = recover_head(con)
        self._load_series(con)
        self._closed = False
        self._writer = Writer(con, name=f"duckdb-writer {self.path.name}")
        weakref.finalize(self, self._writer.close, checkpoint_and_close)  # a store dropped unclosed

    def _load_series(self, con: Con) -> None:
        """The series index and the newest ts per series (and overall) from the file."""
        self._index.load(read_series(con))
        self._max_ts = np.full(len(self._keys), _NO_TS, dtype=np.int64)
        for sid, ts in newest_per_series(con):
            self._max_ts[sid] = max(self._max_ts[sid], ts)
        self._newest = int(self._max_ts.max()) if self._max_ts.size else _NO_TS

    # -- series --------------------------------------------------------------------------------------

    def _add_key(self, name: str, labels: Labels) -> int:
        return self._index.add(name, labels)

    def _forget(self, gone: np.ndarray) -> None:
        """Drop the series ``gone`` (no sample left) from the index (``SeriesIndex.forget``)."""
        if gone.size:
            self._index.forget(gone)
            self._max_ts[gone] = _NO_TS
            self._resolved.clear()

    def _resolve(self, con: Con, keys: list[SeriesKey]) -> np.ndarray:
        """Store ids of ``keys``, creating rows for new series."""
        out = np.empty(len(keys), dtype=np.uint32)
        new: list[tuple[object, ...]] = []
        for i, (name, labels) in enumerate(keys):
            sid = self._ids.get((name, labels))
            if sid is None:
                sid = self._add_key(name, labels)
                lab = dict(labels)
                new.append((sid, name, json.dumps(labels), *(lab.get(h) for h in HOT_LABELS)))
            out[i] = sid
        if new:
            insert_series(con, new)
            self._max_ts = np.concatenate([self._max_ts, np.full(len(new), _NO_TS, dtype=np.int64)])
        return out

    # -- writes (each runs on the writer thread) -----------------------------------------------------

    def append(self, batch: SampleBatch) -> int:
        """Store ``batch`` (columnar: ts in epoch ms); return how many samples were new (first write wins:
        a (series, ts) already stored, or repeated in the batch, keeps its first value).

        Waits for the writer thread. A batch over ``APPEND_PIECE`` samples is written as several writer
        tasks, in order, so other writers (scrapes) are not held up behind it; each piece commits on
        its own. Raises ``RuntimeError`` when the store is closed (an empty batch returns 0 first), and what
        a failed write raises (samples already committed to ``head``, earlier pieces included, stay).
        """
        if len(batch) == 0:
            return 0
        return sum(
            self._writer.run(functools.partial(self._append, batch=piece))
            for piece in batch.pieces(APPEND_PIECE)
        )

    def _append(self, con: Con, batch: SampleBatch) -> int:
        ids = self._resolve(con, batch.series)
        sid = ids[np.asarray(batch.series_index, dtype=np.int64)]
        ts = np.asarray(batch.ts_ms, dtype=np.int64)
        val = np.asarray(batch.values, dtype=np.float64)
        sid, ts, val = first_wins(sid, ts, val)
        if self._sealed_until is None:
            self._sealed_until = int(ts.min()) // CHUNK_MS * CHUNK_MS
        old = ts < self._sealed_until
        self._view, added = self._append_head(con, self._view, sid[~old], ts[~old], val[~old])
        late = sid[old], ts[old], val[old]
        return added + self._write(con, lambda view: self._merge_sealed(con, view, *late))

    def _write(self, con: Con, step: Step) -> int:
        """Run ``step`` and the seal in one transaction of the main file, then publish the new view (under
        the sequence lock when the step rewrote sealed chunks) and drop the rows a seal moved out of
        ``head`` (``replace_head_file``: a fresh head file without them; redone on open when a crash
        interrupts it)."""
        view = self._view
        sealed_before = self._sealed_until
        rewrote = False
        con.begin()
        try:
            stepped, total = step(view)
            if stepped is not view:
                rewrote = True
                self._gen.begin_write()
            sealed = self._seal(con, stepped)
            if sealed.sealed_until != view.sealed_until:
                write_sealed_until(con, sealed.sealed_until)
            con.commit()
            view = sealed
        except BaseException:
            con.rollback()
            self._sealed_until, view = load_state(con)  # the view and bookkeeping from the file
            raise
        finally:
            self._view = view
            if rewrote:
                self._gen.end_write()
        self._sealed_until = view.sealed_until
        if self._sealed_until != sealed_before:
            replace_head_file(con, self.head_path, self._sealed_until)
        return total

    def _append_head(
        self, con: Con, view: View, sid: np.ndarray, ts: np.ndarray, val: np.ndarray
    ) -> tuple[View, int]:
        """Insert new samples into ``head`` (committed in the head file); ``view`` with them, and how many."""
        if ts.size == 0:
            return view, 0
        check = ts <= self._max_ts[sid]
        if check.any():
            dup = np.zeros(ts.size, dtype=bool)
            dup[check] = view.head_duplicates(sid[check], ts[check])
            sid, ts, val = sid[~dup], ts[~dup], val[~dup]
            if ts.size == 0:
                return view, 0
        insert_head(con, sid, ts, val)
        np.maximum.at(self._max_ts, sid, ts)
        self._newest = max(self._newest, int(ts.max()))
        return view.with_head((*view.head, (sid, ts, val))), int(ts.size)

    def _seal(self, con: Con, view: View) -> View:
        """``view`` after moving the whole chunks of its head that are ``GRACE_MS`` old into ``chunks`` and
        ``rollups``; its ``sealed_until`` is the new boundary (``self._sealed_until`` when nothing is due)."""
        assert self._sealed_until is not None
        until = (self._newest - GRACE_MS) // CHUNK_MS * CHUNK_MS
        if until <= self._sealed_until:
            return replace(view, sealed_until=self._sealed_until)
        sid, ts, val = concat(view.head)
        m = ts < until
        sid, ts, val = sort_segment(sid[m], ts[m], val[m])
        rollups = write_rows(con, sid, ts, val, *sealed_previous(view.rollups, sid, self._sealed_until))
        return View(until, view.head_keep(until), view.rollups.merged(rollups))

    def _merge_sealed(
        self, con: Con, view: View, sid: np.ndarray, ts: np.ndarray, val: np.ndarray
    ) -> tuple[View, int]:
        """Merge samples (sorted, unique) older than the sealed boundary into their chunks, which are
        rewritten; ``view`` with its rollups updated in memory, and how many were new."""
        if ts.size == 0:
            return view, 0
        load, before = chunks_to_rewrite(con, sid, ts)
        ids = np.array(list(before), np.int64)
        prev_ts, prev_val = sealed_previous(view.rollups, ids, list(before.values()))
        e_sid, e_ts, e_val = load_chunks(con, load)
        # stored samples come first and win
        all_sid, all_ts, all_val = first_wins(
            np.concatenate([e_sid, sid]), np.concatenate([e_ts, ts]), np.concatenate([e_val, val])
        )
        delete_chunks(con, load)
        rollups = write_rows(con, all_sid, all_ts, all_val, prev_ts, prev_val)
        np.maximum.at(self._max_ts, sid, ts)
        # what the table now holds, without reading it back: its rows less the rewritten chunks' plus theirs
        kept = view.rollups.without_chunks(load, CHUNK_MS)
        return replace(view, rollups=kept.merged(rollups)), int(all_ts.size) - int(e_ts.size)

    def delete_before(self, ts_ms: int) -> int:
        """Drop samples older than ``ts_ms`` (epoch ms; retention), and the series left without samples
        (their ids are not reused); return how many samples were dropped.

        Waits for the writer thread. Raises ``RuntimeError`` when the store is closed.
        """
        return self._writer.run(functools.partial(self._delete_before, ts_ms=ts_ms))

    def _delete_before(self, con: Con, ts_ms: int) -> int:
        if self._sealed_until is None:
            return 0  # nothing was ever appended (retention on a fresh store)
        cut = int(ts_ms)
        # head first (its own file and transaction): if the rest fails, a later call finishes the job
        dropped = sum(int((seg[1] < cut).sum()) for seg in self._view.head)
        if dropped:
            delete_head(con, cut)
            self._view = replace(self._view, head=self._view.head_keep(cut))
        gone = np.flatnonzero((self._max_ts < cut) & (self._max_ts != _NO_TS))  # every sample before cut
        dropped += self._write(con, lambda view: drop_sealed_step(con, view, cut, gone))
        self._forget(gone)
        return dropped

    # -- reads ---------------------------------------------------------------------------------------

    def _matching(self, name: str, matchers: Matchers) -> np.ndarray:
        """Ids of the series named ``name`` that match every matcher (cached until a series is added or
        dropped)."""
        version = self._index.version
        hit = self._resolved.get((name, matchers))
        if hit is not None and hit[0] == version:
            return hit[1]
        labels, named = self._labels, self._index.by_name.get(name, ())
        ids = [s for s in named if all(labels[s].get(k) == v for k, v in matchers)]
        sids = np.array(ids, dtype=np.uint32)
        self._resolved[(name, matchers)] = (version, sids)
        return sids

    def label_values(self, name: str, label: str, matchers: Matchers = ()) -> list[str]:
        """Sorted distinct values of ``label`` over the series ``name`` matching ``matchers`` (from the
        in-memory series index; no sample is read). Raises ``RuntimeError`` when the store is closed."""
        self._check_open()
        labels = self._labels
        found = {
            labels[s][label] for s in self._matching(name, tuple(matchers)).tolist() if labels[s].get(label)
        }
        return sorted(found)

    def select(self, selection: Selection) -> SelectResult:
        """Evaluate ``selection`` (semantics in ``servemetrics.store.base``) on the current view: per group,
        one ``Cell`` or ``None`` per value set. Never waits for the writer (a read that overlaps a rewrite
        of sealed chunks starts again). Raises ``ValueError`` for bad value sets, ``RuntimeError`` when the
        store is closed."""
        check_value_sets(selection.value_sets)
        self._check_open()
        sids = self._matching(selection.name, tuple(selection.matchers))
        if sids.size == 0 or not selection.value_sets:
            return {}
        labels = self._labels
        groups = [tuple(labels[s].get(g, "") for g in selection.group_by) for s in sids.tolist()]
        deps = [labels[s].get("deployment_id") for s in sids.tolist()]
        evaluate = functools.partial(self._evaluate, sids=sids, groups=groups, deps=deps)
        if self._answers is None:
            return evaluate(selection)
        series = (int(sids.size), int(sids.max()))
        sealed = self._view.sealed_until
        gen = self._gen
        return cached_select(
            self._answers, selection, series, groups, deps, sealed, lambda: gen.value, evaluate
        )

    def _evaluate(
        self, selection: Selection, sids: np.ndarray, groups: list[GroupKey], deps: list[str | None]
    ) -> SelectResult:
        """``select`` computed (``duckdb_eval``) over the series ``sids`` (their group keys and deployment
        ids: ``groups``, ``deps``), retried when a rewrite of sealed chunks overlapped it."""
        while True:
            with self._gen.lock:
                gen, view = self._gen.value, self._view
            if gen % 2:
                self._gen.stable()
                continue
            value, has = duckdb_eval.evaluate(
                selection,
                sids,
                view.rollups,
                view.sealed_until,
                functools.partial(self._read_raw, view, sids, gen=gen),
                functools.partial(self._read_previous, view, sids, gen=gen),
            )
            if self._gen.value == gen:  # no write changed sealed chunks meanwhile
                break
        return group_cells(selection, groups, deps, value, has)

    def _chunk_arrays(
        self, sids: np.ndarray, starts: list[int], gen: int
    ) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        """Decoded sealed chunks ``(series, start)`` of ``sids`` x ``starts`` (through the cache)."""
        cache = self._cache
        found: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        missing: list[tuple[int, int]] = []
        for s in sids.tolist():
            for c in starts:
                hit = cache.get((s, c), gen)
                if hit is None:
                    missing.append((s, c))
                elif hit[0].size:
                    found[(s, c)] = hit
        if missing:
            m_ids = np.array(sorted({s for s, _ in missing}))
            cur = self._writer.read_cursor()
            try:
                rows = read_chunks(cur, m_ids, sorted({c for _, c in missing}))
            finally:
                cur.close()
            new = {(r[0], r[1]): (codec.decode_ts(r[2]), codec.decode_values(r[3])) for r in rows}
            empty = (np.zeros(0, np.int64), np.zeros(0))
            cache.put([(k, new.get(k, empty)) for k in missing], gen)
            found.update(new)
        return found

    def _read_previous(
        self, view: View, sids: np.ndarray, index: np.ndarray, before: np.ndarray, gen: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``duckdb_eval.PreviousReader`` on ``view``: per (index into ``sids``, ts) the last real sample."""

        def read(ids: np.ndarray, ranges: list[tuple[int, int]]) -> Segment:
            return self._read_raw(view, ids, ranges, gen)

        return last_real_before(view.rollups, view.sealed_until, read, sids[index], before)

    def _read_raw(self, view: View, sids: np.ndarray, ranges: duckdb_eval.Ranges, gen: int) -> Segment:
        """Samples of ``sids`` with ts in the sorted, disjoint ``ranges``: (index into ``sids``, ts, value).

        Sorted by (index, ts) and unique, built series by series: the sealed chunks in order (cut to the
        ranges only where a range ends inside a chunk), then the series' head samples.
        """
        sealed = view.sealed_until
        n_s = sids.size
        per: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n_s)]
        old = [(lo, min(hi, sealed)) for lo, hi in ranges if lo < sealed]
        if old:
            self._sealed_pieces(sids, old, gen, per)
        new = [(max(lo, sealed), hi) for lo, hi in ranges if hi > sealed]
        if new:
            self._head_pieces(view, sids, new, per)
        counts = np.fromiter((sum(t.size for t, _ in p) for p in per), dtype=np.int64, count=n_s)
        if not counts.any():
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return (
            np.repeat(np.arange(n_s, dtype=np.int64), counts),
            np.concatenate([t for p in per for t, _ in p]),
            np.concatenate([v for p in per for _, v in p]),
        )

    def _sealed_pieces(
        self,
        sids: np.ndarray,
        old: list[tuple[int, int]],
        gen: int,
        per: list[list[tuple[np.ndarray, np.ndarray]]],
    ) -> None:
        """Append to ``per[k]`` the (ts, value) pieces of the sealed chunks of ``sids[k]`` in ``old``."""
        starts = sorted({c for lo, hi in old for c in range(lo // CHUNK_MS * CHUNK_MS, hi, CHUNK_MS)})
        cuts: dict[int, list[tuple[int, int]] | None] = {}
        for c in starts:  # the parts of each chunk to keep; None: all of it
            part = [(max(lo, c), min(hi, c + CHUNK_MS)) for lo, hi in old if lo < c + CHUNK_MS and hi > c]
            cuts[c] = None if part == [(c, c + CHUNK_MS)] else part
        chunks = self._chunk_arrays(sids, starts, gen)
        for k, s in enumerate(sids.tolist()):
            out = per[k]
            for c in starts:
                hit = chunks.get((s, c))
                if hit is None:
                    continue
                keep = cuts[c]
                if keep is None:
                    out.append(hit)
                    continue
                t, v = hit
                for a, b in keep:
                    i, j = t.searchsorted(a), t.searchsorted(b)
                    if i < j:
                        out.append((t[i:j], v[i:j]))

    def _head_pieces(
        self,
        view: View,
        sids: np.ndarray,
        new: list[tuple[int, int]],
        per: list[list[tuple[np.ndarray, np.ndarray]]],
    ) -> None:
        """Append to ``per[k]`` the head samples of ``sids[k]`` in ``new`` (one sorted piece per series)."""
        h_sid, h_ts, h_val = view.head_rows(sids, new, len(self._keys))
        if h_ts.size:
            if len(view.head) > 1:
                h_sid, h_ts, h_val = sort_segment(h_sid, h_ts, h_val)
            bounds = np.searchsorted(h_sid, sids, side="right").tolist()
            a = 0
            for k, b in enumerate(bounds):
                if b > a:
                    per[k].append((h_ts[a:b], h_val[a:b]))
                a = b

    # -- housekeeping --------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the WAL of both files into the files (on the writer thread, after the queued writes).

        Raises ``RuntimeError`` when the store is closed.
        """
        self._writer.run(checkpoint)

    def stats(self) -> StoreStats:
        """Series and sample counts, bytes on disk (both files, their WALs), samples in ``head``."""
        cur = self._writer.read_cursor()
        try:
            sealed = sealed_samples(cur)
        finally:
            cur.close()
        head = self._view.head_samples()
        files = (self.path, Path(f"{self.path}.wal"), self.head_path, Path(f"{self.head_path}.wal"))
        size = sum(p.stat().st_size for p in files if p.exists())
        return StoreStats(
            series=len(self._ids), samples=head + sealed, bytes=size, extra={"head_samples": head}
        )

    def close(self) -> None:
        """Finish the queued writes, checkpoint and close the files, stop the writer thread; the store is
        unusable afterwards. A no-op when closed already; raises what a failed checkpoint raises (the store
        then stays open)."""
        self._writer.close(checkpoint_and_close)
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(CLOSED)
