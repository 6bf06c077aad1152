"""``DuckDBStore``: the embedded default ``Store``, one DuckDB file (schema in ``duckdb_schema``).

Appends go to ``head`` (one row per sample, inserted from Arrow); once the newest sample is
``CHUNK_MS + GRACE_MS`` past the sealed boundary, whole chunks of ``head`` are sealed: encoded per series
into ``chunks`` (about 1 byte per sample) with their ``rollups``, and removed from ``head``. Samples older
than the sealed boundary (backfill, late scrapes) are merged into their chunks, which are rewritten.
One writer at a time (a lock); every read runs in its own cursor and transaction, so API reads see a
consistent snapshot while ingest writes. Semantics are those of ``servemetrics.store.base``.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from servemetrics.samples import SampleBatch
from servemetrics.store import duckdb_codec as codec
from servemetrics.store import duckdb_eval
from servemetrics.store.base import Selection, SelectResult, StoreStats, check_value_sets
from servemetrics.store.duckdb_eval import RollupIndex
from servemetrics.store.duckdb_schema import (
    CHUNK_MS,
    DDL,
    HEAD_DDL,
    HOT_LABELS,
    ROLLUP_MS,
    build_rows,
    decode_chunks,
)
from servemetrics.store.duckdb_view import (
    ChunkCache,
    Generation,
    Segment,
    View,
    concat,
    sort_segment,
)
from servemetrics.types import SeriesKey

GRACE_MS = 10 * 60 * 1000
"""Chunks are sealed once the newest sample is this far past their end (late scrapes stay in ``head``)."""

_NO_TS = np.iinfo(np.int64).min


ROW_GROUP_ROWS = 2048
"""DuckDB row group size of the store's file (DuckDB's default is 122,880 rows); see ``_connect``."""

_DB = "sm"
_HEAD = "sm_head"


def _connect(path: Path, head_path: Path) -> duckdb.DuckDBPyConnection:
    """One connection to the main file (``_DB``, small row groups) and the head file (``_HEAD``).

    A checkpoint rewrites every column of a row group that got rows since the previous checkpoint, the
    new copy written before the old blocks are freed, and DuckDB reuses free blocks but does not give them
    back. With DuckDB's default row groups (122,880 rows) the whole ``chunks`` table is one row group, so
    a checkpoint could rewrite all of it and leave the file up to twice the data. With 2,048-row groups a
    checkpoint rewrites only the last few. ``head`` (inserted, then deleted when sealed) would churn
    such small row groups, so it lives in a second file with DuckDB's defaults, a few MiB at most.
    """
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH {_quote(path)} AS {_DB} (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
    con.execute(f"ATTACH {_quote(head_path)} AS {_HEAD}")
    con.execute(f"USE {_DB}")
    return con


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor of ``con`` reading the store's file (a new cursor starts in the in-memory catalog)."""
    cur = con.cursor()
    cur.execute(f"USE {_DB}")
    return cur


def _ids_sql(ids: np.ndarray) -> str:
    return ",".join(str(int(i)) for i in ids) or "NULL"


class DuckDBStore:
    """A ``Store`` in one DuckDB file at ``path`` (created when missing).

    ``cache_samples`` bounds the in-memory cache of decoded sealed chunks (0 disables it).
    """

    def __init__(self, path: str | os.PathLike[str], *, cache_samples: int = 4_000_000) -> None:
        self.path = Path(path)
        self._cache = ChunkCache(cache_samples)
        self._gen = Generation()
        self._resolved: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[int, np.ndarray]] = {}
        self.head_path = self.path.with_name(f"{self.path.stem}.head{self.path.suffix}")
        self._con = _connect(self.path, self.head_path)
        for stmt in DDL:
            self._con.execute(stmt)
        self._con.execute(HEAD_DDL.format(db=_HEAD))
        self._recover_head()
        self._lock = threading.Lock()
        self._keys: list[SeriesKey] = []
        self._ids: dict[SeriesKey, int] = {}
        self._labels: list[dict[str, str]] = []
        self._by_name: dict[str, tuple[int, ...]] = {}
        for sid, name, labels in self._con.execute(
            "SELECT id, name, labels FROM series ORDER BY id"
        ).fetchall():
            assert sid == len(self._keys)
            self._add_key(name, tuple((k, v) for k, v in json.loads(labels)))
        self._max_ts = np.full(len(self._keys), _NO_TS, dtype=np.int64)
        for sql in (
            f"SELECT series_id, max(ts) FROM {_HEAD}.head GROUP BY 1",
            "SELECT series_id, max(last_ts) FROM chunks GROUP BY 1",
        ):
            for sid, ts in self._con.execute(sql).fetchall():
                self._max_ts[sid] = max(self._max_ts[sid], ts)
        self._newest = int(self._max_ts.max()) if self._max_ts.size else _NO_TS
        row = self._con.execute("SELECT value FROM meta WHERE key = 'sealed_until'").fetchone()
        self._sealed_until: int | None = None if row is None else int(row[0])
        h = self._con.execute(f"SELECT series_id, ts, value FROM {_HEAD}.head").fetchnumpy()
        self._view = View(
            _NO_TS if row is None else int(row[0]),
            (sort_segment(h["series_id"], h["ts"], h["value"]),),
            self._load_rollups(),
        )
        self._closed = False

    def _recover_head(self) -> None:
        """Move a ``head`` table of the main file (older versions) to the head file; drop sealed rows.

        A seal commits chunks and ``sealed_until`` in the main file before it deletes the sealed rows
        from the head file; a crash in between leaves rows before ``sealed_until``, dropped here.
        """
        con = self._con
        legacy = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = 'head'", [_DB]
        ).fetchone()
        if legacy and legacy[0]:
            con.execute(
                f"INSERT INTO {_HEAD}.head SELECT * FROM {_DB}.head EXCEPT SELECT * FROM {_HEAD}.head"
            )
            con.execute(f"DROP TABLE {_DB}.head")
        row = con.execute("SELECT value FROM meta WHERE key = 'sealed_until'").fetchone()
        if row is not None:
            con.execute(f"DELETE FROM {_HEAD}.head WHERE ts < ?", [int(row[0])])

    # -- series --------------------------------------------------------------------------------------

    def _add_key(self, name: str, labels: tuple[tuple[str, str], ...]) -> int:
        sid = len(self._keys)
        self._keys.append((name, labels))
        self._ids[(name, labels)] = sid
        self._labels.append(dict(labels))
        self._by_name[name] = (*self._by_name.get(name, ()), sid)
        return sid

    def _resolve(self, keys: list[SeriesKey]) -> np.ndarray:
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
            cols = list(zip(*new, strict=True))
            names = ["id", "name", "labels", *HOT_LABELS]
            tbl = pa.table(
                {
                    n: pa.array(c, pa.uint32() if n == "id" else pa.string())
                    for n, c in zip(names, cols, strict=True)
                }
            )
            self._con.register("_series", tbl)
            self._con.execute("INSERT INTO series SELECT * FROM _series")
            self._con.unregister("_series")
            self._max_ts = np.concatenate([self._max_ts, np.full(len(new), _NO_TS, dtype=np.int64)])
        return out

    # -- writes --------------------------------------------------------------------------------------

    def append(self, batch: SampleBatch) -> int:
        """Store ``batch`` (columnar, from Arrow); return how many samples were new (first write wins)."""
        if len(batch) == 0:
            return 0
        with self._lock:
            self._check_open()
            ids = self._resolve(batch.series)
            sid = ids[np.asarray(batch.series_index, dtype=np.int64)]
            ts = np.asarray(batch.ts_ms, dtype=np.int64)
            val = np.asarray(batch.values, dtype=np.float64)
            sid, ts, val = sort_segment(sid, ts, val)  # stable: the first of equal (series, ts) stays first
            keep = np.ones(ts.size, dtype=bool)
            keep[1:] = (sid[1:] != sid[:-1]) | (ts[1:] != ts[:-1])
            sid, ts, val = sid[keep], ts[keep], val[keep]
            if self._sealed_until is None:
                self._sealed_until = int(ts.min()) // CHUNK_MS * CHUNK_MS
            old = ts < self._sealed_until
            rewrite = bool(old.any())
            added = self._append_head(sid[~old], ts[~old], val[~old])
            return added + self._write(
                lambda: self._merge_sealed(sid[old], ts[old], val[old]) if rewrite else 0,
                rewrites=rewrite,
            )

    def _write(self, *steps, rewrites: bool) -> int:
        """Run ``steps`` in one transaction of the main file, then publish the new view (a sequence lock
        for rewrites) and delete the rows a seal moved out of ``head`` (the head file: its own transaction,
        redone on open when a crash interrupts it)."""
        self._next = self._view
        sealed_before = self._sealed_until
        self._con.begin()
        try:
            if rewrites:
                self._gen.begin_write()
            total = sum(step() for step in steps)
            self._seal()
            if self._sealed_until != self._view.sealed_until:
                self._con.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('sealed_until', ?)", [self._sealed_until]
                )
            if rewrites:
                self._next = replace(self._next, rollups=self._load_rollups())
            self._con.commit()
        except BaseException:
            self._con.rollback()
            self._reload()
            raise
        finally:
            self._view = self._next
            if rewrites:
                self._gen.end_write()
        if self._sealed_until != sealed_before:
            self._con.execute(f"DELETE FROM {_HEAD}.head WHERE ts < ?", [self._sealed_until])
        return total

    def _reload(self) -> None:
        """After a failed write: the view and bookkeeping from the file."""
        row = self._con.execute("SELECT value FROM meta WHERE key = 'sealed_until'").fetchone()
        self._sealed_until = None if row is None else int(row[0])
        h = self._con.execute(
            f"SELECT series_id, ts, value FROM {_HEAD}.head WHERE ts >= ?",
            [_NO_TS if self._sealed_until is None else self._sealed_until],
        ).fetchnumpy()
        segment = sort_segment(h["series_id"], h["ts"], h["value"])
        self._next = View(_NO_TS if row is None else int(row[0]), (segment,), self._load_rollups())

    def _load_rollups(self) -> RollupIndex:
        cols = self._con.execute(
            "SELECT series_id, bucket, n, sum, inc, coalesce(first_inc, 0) AS first_inc,"
            " coalesce(prev_age, -1) AS prev_age, last_off, last_val FROM rollups ORDER BY series_id, bucket"
        ).fetchnumpy()
        return RollupIndex({k: np.asarray(v) for k, v in cols.items()}, ROLLUP_MS, presorted=True)

    def _append_head(self, sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> int:
        """Insert new samples into ``head`` (committed in the head file) and publish them."""
        if ts.size == 0:
            return 0
        check = ts <= self._max_ts[sid]
        if check.any():
            dup = np.zeros(ts.size, dtype=bool)
            dup[check] = self._view.head_duplicates(sid[check], ts[check])
            sid, ts, val = sid[~dup], ts[~dup], val[~dup]
            if ts.size == 0:
                return 0
        tbl = pa.table({"series_id": pa.array(sid, pa.uint32()), "ts": ts, "value": val})
        self._con.register("_new", tbl)
        try:
            self._con.execute(f"INSERT INTO {_HEAD}.head SELECT * FROM _new")
        finally:
            self._con.unregister("_new")
        np.maximum.at(self._max_ts, sid, ts)
        self._newest = max(self._newest, int(ts.max()))
        self._view = self._view.with_head((*self._view.head, (sid, ts, val)))
        return int(ts.size)

    def _seal(self) -> None:
        """Move whole chunks that are ``GRACE_MS`` old from ``head`` into ``chunks`` and ``rollups``."""
        assert self._sealed_until is not None
        until = (self._newest - GRACE_MS) // CHUNK_MS * CHUNK_MS
        if until <= self._sealed_until:
            self._next = replace(self._next, sealed_until=self._sealed_until)
            return
        sid, ts, val = concat(self._next.head)
        m = ts < until
        sid, ts, val = sort_segment(sid[m], ts[m], val[m])
        prev = self._con.execute(
            "SELECT series_id, max(last_ts), arg_max(last_val, last_ts) FROM chunks GROUP BY 1"
        ).fetchall()
        rollups = self._write_rows(sid, ts, val, {p[0]: p[1] for p in prev}, {p[0]: p[2] for p in prev})
        self._sealed_until = until
        self._next = View(until, self._next.head_keep(until), self._next.rollups.merged(rollups))

    def _write_rows(
        self, sid, ts, val, prev_ts: dict[int, int], prev_val: dict[int, float]
    ) -> dict[str, np.ndarray]:
        """Insert chunk and rollup rows for whole chunks of samples; return the rollup columns."""
        chunks, rollups = build_rows(sid, ts, val, prev_ts, prev_val)
        self._con.register("_chunks", chunks)
        self._con.register("_rollups", rollups)
        self._con.execute("INSERT INTO chunks SELECT * FROM _chunks")
        self._con.execute("INSERT INTO rollups SELECT * FROM _rollups")
        self._con.unregister("_chunks")
        self._con.unregister("_rollups")
        cols = {c: rollups.column(c) for c in RollupIndex.COLUMNS}
        cols["first_inc"] = cols["first_inc"].fill_null(0.0)
        cols["prev_age"] = cols["prev_age"].fill_null(-1)
        return {c: v.to_numpy() for c, v in cols.items()}

    def _merge_sealed(self, sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> int:
        """Merge samples (sorted) older than the sealed boundary into their chunks, which are rewritten."""
        chunk_of = ts // CHUNK_MS * CHUNK_MS
        ids = np.unique(sid)
        meta = self._con.execute(
            f"SELECT series_id, start, last_ts, last_val FROM chunks WHERE series_id IN ({_ids_sql(ids)})"
            " ORDER BY series_id, start"
        ).fetchall()
        existing: dict[int, list[tuple[int, int, float]]] = {}
        for s, start, last_ts, last_val in meta:
            existing.setdefault(s, []).append((start, last_ts, last_val))
        u, u_first = np.unique(sid, return_index=True)
        first = dict(zip(u.tolist(), u_first.tolist(), strict=True))  # sid is sorted: first is earliest
        last_idx = np.append(np.flatnonzero(sid[1:] != sid[:-1]), sid.size - 1)
        load: set[tuple[int, int]] = set()
        prev_ts: dict[int, int] = {}
        prev_val: dict[int, float] = {}
        for s, hi_i in zip(ids.tolist(), last_idx.tolist(), strict=True):
            # every stored chunk from the first touched one up to the one after the last touched one, so
            # that each sample's previous sample is at hand and the next chunk's first bucket is redone
            chunks = existing.get(s, [])
            starts = [c[0] for c in chunks]
            lo_k = int(np.searchsorted(starts, int(chunk_of[first[s]])))
            hi_k = int(np.searchsorted(starts, int(chunk_of[hi_i]), side="right"))
            load.update((s, starts[x]) for x in range(lo_k, min(hi_k + 1, len(starts))))
            if lo_k > 0:
                prev_ts[s], prev_val[s] = chunks[lo_k - 1][1], chunks[lo_k - 1][2]
        e_sid, e_ts, e_val = self._load_chunks(load)
        all_sid = np.concatenate([e_sid, sid])
        all_ts = np.concatenate([e_ts, ts])
        all_val = np.concatenate([e_val, val])
        order = np.lexsort((all_ts, all_sid))  # stable: stored samples come first and win
        all_sid, all_ts, all_val = all_sid[order], all_ts[order], all_val[order]
        keep = np.ones(all_ts.size, dtype=bool)
        keep[1:] = (all_sid[1:] != all_sid[:-1]) | (all_ts[1:] != all_ts[:-1])
        self._delete_chunks(load)
        self._write_rows(all_sid[keep], all_ts[keep], all_val[keep], prev_ts, prev_val)
        np.maximum.at(self._max_ts, sid, ts)
        return int(keep.sum()) - int(e_ts.size)

    def _load_chunks(self, keys: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not keys:
            return decode_chunks(np.zeros(0, np.uint32), [], [])
        k = pa.table({"s": pa.array([a for a, _ in keys], pa.uint32()), "c": [b for _, b in keys]})
        self._con.register("_keys", k)
        rows = self._con.execute(
            "SELECT series_id, ts_enc, val_enc FROM chunks JOIN _keys ON series_id = s AND start = c"
        ).fetchall()
        self._con.unregister("_keys")
        return decode_chunks(
            np.array([r[0] for r in rows], np.uint32), [r[1] for r in rows], [r[2] for r in rows]
        )

    def _delete_chunks(self, keys: set[tuple[int, int]]) -> None:
        if not keys:
            return
        k = pa.table({"s": pa.array([a for a, _ in keys], pa.uint32()), "c": [b for _, b in keys]})
        self._con.register("_keys", k)
        self._con.execute("DELETE FROM chunks WHERE (series_id, start) IN (SELECT (s, c) FROM _keys)")
        self._con.execute(
            f"DELETE FROM rollups WHERE (series_id, bucket // {CHUNK_MS} * {CHUNK_MS})"
            " IN (SELECT (s, c) FROM _keys)"
        )
        self._con.unregister("_keys")

    def delete_before(self, ts_ms: int) -> int:
        """Drop samples older than ``ts_ms`` (retention); return how many were dropped."""
        with self._lock:
            self._check_open()
            if self._sealed_until is None:
                return 0  # nothing was ever appended (retention on a fresh store)
            cut = int(ts_ms)
            # head first (its own file and transaction): if the rest fails, a later call finishes the job
            dropped = sum(int((seg[1] < cut).sum()) for seg in self._view.head)
            if dropped:
                self._con.execute(f"DELETE FROM {_HEAD}.head WHERE ts < ?", [cut])
                self._view = replace(self._view, head=self._view.head_keep(cut))
            return dropped + self._write(lambda: self._delete_before(cut), rewrites=True)

    def _delete_before(self, cut: int) -> int:
        con = self._con
        dropped = 0
        dropped += int(
            con.execute("SELECT coalesce(sum(n), 0) FROM chunks WHERE last_ts < ?", [cut]).fetchone()[0]  # type: ignore[index]
        )
        con.execute("DELETE FROM chunks WHERE last_ts < ?", [cut])
        straddle = {
            (int(s), int(c))
            for s, c in con.execute("SELECT series_id, start FROM chunks WHERE start < ?", [cut]).fetchall()
        }
        con.execute("DELETE FROM rollups WHERE bucket + last_off < ?", [cut])
        if straddle:
            sid, ts, val = sort_segment(*self._load_chunks(straddle))
            live = ts >= cut
            dropped += int((~live).sum())
            self._delete_chunks(straddle)
            self._write_rows(sid[live], ts[live], val[live], {}, {})
        con.execute("UPDATE rollups SET first_inc = NULL, prev_age = NULL WHERE bucket - prev_age < ?", [cut])
        return dropped

    def apply_retention(self, now_ms: int, retention_ms: int) -> int:
        """Drop samples older than ``now_ms - retention_ms``; return how many were dropped."""
        return self.delete_before(now_ms - retention_ms)

    # -- reads ---------------------------------------------------------------------------------------

    def _matching(self, name: str, matchers: tuple[tuple[str, str], ...]) -> np.ndarray:
        """Ids of the series named ``name`` that match every matcher (cached until a series is added)."""
        n_keys = len(self._keys)
        hit = self._resolved.get((name, matchers))
        if hit is not None and hit[0] == n_keys:
            return hit[1]
        labels = self._labels
        ids = [s for s in self._by_name.get(name, ()) if all(labels[s].get(k) == v for k, v in matchers)]
        sids = np.array(ids, dtype=np.uint32)
        self._resolved[(name, matchers)] = (n_keys, sids)
        return sids

    def label_values(self, name: str, label: str, matchers: tuple[tuple[str, str], ...] = ()) -> list[str]:
        """Sorted distinct values of ``label`` over the series ``name`` matching ``matchers`` (from the
        in-memory series index; no sample is read)."""
        self._check_open()
        labels = self._labels
        found = {
            labels[s][label] for s in self._matching(name, tuple(matchers)).tolist() if labels[s].get(label)
        }
        return sorted(found)

    def select(self, selection: Selection) -> SelectResult:
        """Evaluate ``selection`` (semantics in ``servemetrics.store.base``) on the current view."""
        check_value_sets(selection.value_sets)
        self._check_open()
        sids = self._matching(selection.name, tuple(selection.matchers))
        if sids.size == 0 or not selection.value_sets:
            return {}
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
            )
            if self._gen.value == gen:  # no write changed sealed chunks meanwhile
                break
        labels = self._labels
        groups = [tuple(labels[s].get(g, "") for g in selection.group_by) for s in sids.tolist()]
        deps = [labels[s].get("deployment_id") for s in sids.tolist()]
        return duckdb_eval.group_cells(selection, groups, deps, value, has)

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
            m_starts = ",".join(str(c) for c in sorted({c for _, c in missing}))
            cur = _cursor(self._con)
            try:
                rows = cur.execute(
                    "SELECT series_id, start, ts_enc, val_enc FROM chunks"
                    f" WHERE series_id IN ({_ids_sql(m_ids)})"
                    f" AND start IN ({m_starts})"
                ).fetchall()
            finally:
                cur.close()
            new = {(r[0], r[1]): (codec.decode_ts(r[2]), codec.decode_values(r[3])) for r in rows}
            empty = (np.zeros(0, np.int64), np.zeros(0))
            cache.put([(k, new.get(k, empty)) for k in missing], gen)
            found.update(new)
        return found

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
        new = [(max(lo, sealed), hi) for lo, hi in ranges if hi > sealed]
        if new:
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
        counts = np.fromiter((sum(t.size for t, _ in p) for p in per), dtype=np.int64, count=n_s)
        if not counts.any():
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return (
            np.repeat(np.arange(n_s, dtype=np.int64), counts),
            np.concatenate([t for p in per for t, _ in p]),
            np.concatenate([v for p in per for _, v in p]),
        )

    # -- housekeeping --------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the WAL into the database file."""
        with self._lock:
            self._con.execute(f"CHECKPOINT {_DB}")
            self._con.execute(f"CHECKPOINT {_HEAD}")

    def stats(self) -> StoreStats:
        """Series and sample counts, bytes on disk (both files, their WALs), samples in ``head``."""
        cur = _cursor(self._con)
        try:
            sealed = int(cur.execute("SELECT coalesce(sum(n), 0) FROM chunks").fetchone()[0])  # type: ignore[index]
        finally:
            cur.close()
        head = self._view.head_samples()
        files = (self.path, Path(f"{self.path}.wal"), self.head_path, Path(f"{self.head_path}.wal"))
        size = sum(p.stat().st_size for p in files if p.exists())
        return StoreStats(
            series=len(self._keys), samples=head + sealed, bytes=size, extra={"head_samples": head}
        )

    def close(self) -> None:
        """Checkpoint and close the file; the store is unusable afterwards."""
        with self._lock:
            if not self._closed:
                self._con.execute(f"CHECKPOINT {_DB}")
                self._con.execute(f"CHECKPOINT {_HEAD}")
                self._con.close()
                self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the store is closed")
