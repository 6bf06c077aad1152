"""Tables of ``DuckDBStore``, the pure function that turns sorted samples into chunk and rollup rows, and
the statements that read and write the tables (functions of a connection: the writer's, or a reader's
cursor for ``read_chunks``/``sealed_samples``).

- ``series``: one row per series: id, name, labels (JSON text) and the hot labels as columns.
- ``head`` (in its own file, ``<name>.head.duckdb``): recent samples, one row each
  (``series_id, ts, value``), not yet sealed into chunks; rows before ``sealed_until`` are leftovers of
  an interrupted seal and are dropped on open.
- ``chunks``: one row per series per ``CHUNK_MS`` of sealed samples: two blobs (``duckdb_codec``) and the
  chunk's sample count and last sample.
- ``rollups``: one row per series per ``ROLLUP_MS`` bucket of sealed samples that are not stale markers:
  count, sum, the counted deltas (``counter_deltas``) of the 2nd..nth sample (``inc``), the first
  sample's counted delta (``first_inc``, its previous sample may lie in an earlier bucket), how far before
  the bucket that previous sample lies (``prev_age``) and how far after the bucket start the first sample
  lies (``first_off``), how many samples count a delta (``pairs``: ``counted``), and the last sample
  (``last_off`` after the bucket start, ``last_val``). The
  rollups are also the index of each series' last real sample before a time (``RollupIndex.last_before``).
- ``meta``: ``sealed_until``: every sample before it is in ``chunks``/``rollups``, every later one in
  ``head``; ``rollup_rule``: the version of the counter rule the rollups were built with
  (``ROLLUP_RULE``; older rollups are rebuilt from the chunks on open).

The main file is attached as ``DB``, the head file as ``HEAD_DB`` (``duckdb_writer.connect``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import numpy as np
import pyarrow as pa

from servemetrics.store import duckdb_codec as codec
from servemetrics.store.base import COUNTER_GAP_MS
from servemetrics.types import Labels

DB = "sm"
"""Catalog name of the main file (``series``, ``chunks``, ``rollups``, ``meta``)."""
HEAD_DB = "sm_head"
"""Catalog name of the head file (``head``)."""

CHUNK_MS = 2 * 3600 * 1000
ROLLUP_MS = 30 * 60 * 1000
HOT_LABELS = ("model_id", "deployment_id", "replica")
ROLLUP_RULE = 2
"""Version of the rule the rollups are built with: 2 = issue 11's pairs (``counter_deltas``), markers
skipped, ``first_off``. A file with older rollups gets them rebuilt on open (``rebuild_rollups``)."""

DDL = [
    "CREATE TABLE IF NOT EXISTS series (id UINTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
    " labels VARCHAR NOT NULL, model_id VARCHAR, deployment_id VARCHAR, replica VARCHAR)",
    "CREATE TABLE IF NOT EXISTS chunks (series_id UINTEGER NOT NULL, start BIGINT NOT NULL,"
    " n INTEGER NOT NULL, last_ts BIGINT NOT NULL, last_val DOUBLE, ts_enc BLOB NOT NULL,"
    " val_enc BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rollups (series_id UINTEGER NOT NULL, bucket BIGINT NOT NULL,"
    " n INTEGER NOT NULL, sum DOUBLE, inc DOUBLE, first_inc DOUBLE, prev_age BIGINT,"
    " last_off INTEGER NOT NULL, last_val DOUBLE, first_off INTEGER, pairs INTEGER)",
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
]

HEAD_DDL = (
    "CREATE TABLE IF NOT EXISTS {db}.head (series_id UINTEGER NOT NULL, ts BIGINT NOT NULL, value DOUBLE)"
)
"""``head`` lives in a file of its own next to the main one (``duckdb_writer.connect``: why)."""

Con = duckdb.DuckDBPyConnection
ChunkKeys = set[tuple[int, int]]
"""``(series id, chunk start)`` pairs."""
Columns = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Series id (uint32), ts (int64), value (float64)."""


def counter_deltas(
    ts: np.ndarray, val: np.ndarray, p_ts: np.ndarray, p_val: np.ndarray, has_prev: np.ndarray
) -> np.ndarray:
    """Per sample (ts ms, value) with its previous sample (``p_ts``, ``p_val``; ``has_prev``) the delta it
    counts (``store.base`` INCREASE): ``v - v0`` (``v`` after a drop, a reset) when the previous sample is
    at most ``COUNTER_GAP_MS`` before, to be spread over ``(p_ts, ts]``; ``v`` at ``ts`` after a longer
    gap when the value dropped (a counter re-created meanwhile); else 0."""
    with np.errstate(invalid="ignore"):
        drop = ~(val >= p_val)
        near = has_prev & (ts - p_ts <= COUNTER_GAP_MS)
        return np.where(near, np.where(drop, val, val - p_val), np.where(has_prev & drop, val, 0.0))


def counted(
    ts: np.ndarray, val: np.ndarray, p_ts: np.ndarray, p_val: np.ndarray, has_prev: np.ndarray
) -> np.ndarray:
    """Per sample: whether it ends a pair (previous sample at most ``COUNTER_GAP_MS`` before) or is a
    re-created counter's point (a drop to a value above 0 after a longer gap): the samples that give a
    value set data (``store.base``)."""
    with np.errstate(invalid="ignore"):
        near = has_prev & (ts - p_ts <= COUNTER_GAP_MS)
        out: np.ndarray = near | (has_prev & ~(val >= p_val) & (val != 0))
    return out


def _starts(sid: np.ndarray, part: np.ndarray) -> np.ndarray:
    if sid.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = (sid[1:] != sid[:-1]) | (part[1:] != part[:-1])
    return np.concatenate(([0], np.flatnonzero(change) + 1))


def build_rows(
    sid: np.ndarray, ts: np.ndarray, val: np.ndarray, prev_ts: dict[int, int], prev_val: dict[int, float]
) -> tuple[pa.Table, pa.Table]:
    """Chunk and rollup rows for samples sorted by (series, ts) that hold whole chunks.

    ``prev_ts``/``prev_val`` give, per series, the last stored sample (not a marker) before its first one
    here (absent when none); within the input each sample's previous one is the real one before it.
    Chunks keep every sample, stale markers (NaN) included; rollups only the others.
    """
    real = ~np.isnan(val)
    r_sid, r_ts, r_val = sid[real], ts[real], val[real]
    n = r_ts.size
    first = np.ones(n, dtype=bool)
    first[1:] = r_sid[1:] != r_sid[:-1]
    p_ts = np.empty(n, dtype=np.int64)
    p_val = np.empty(n, dtype=np.float64)
    p_ts[1:], p_val[1:] = r_ts[:-1], r_val[:-1]
    has_prev = ~first
    for i in np.flatnonzero(first):
        s = int(r_sid[i])
        if s in prev_ts:
            p_ts[i], p_val[i], has_prev[i] = prev_ts[s], prev_val[s], True
    inc = counter_deltas(r_ts, r_val, p_ts, p_val, has_prev)
    pairs = counted(r_ts, r_val, p_ts, p_val, has_prev)
    return _chunk_rows(sid, ts, val), _rollup_rows(r_sid, r_ts, r_val, inc, p_ts, has_prev, pairs)


def _chunk_rows(sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> pa.Table:
    chunk = ts // CHUNK_MS
    st = _starts(sid, chunk)
    ends = np.append(st[1:], ts.size) if st.size else st  # no rows: no chunks, no rollups
    decimals = codec.decimals_needed(val)
    dec = np.maximum.reduceat(decimals, st) if st.size else decimals
    ts_enc = [codec.encode_ts(ts[a:b]) for a, b in zip(st.tolist(), ends.tolist(), strict=True)]
    val_enc = [
        codec.encode_values(val[a:b], int(d)) for a, b, d in zip(st.tolist(), ends.tolist(), dec, strict=True)
    ]
    last = ends - 1
    return pa.table(
        {
            "series_id": pa.array(sid[st], pa.uint32()),
            "start": chunk[st] * CHUNK_MS,
            "n": (ends - st).astype(np.int32),
            "last_ts": ts[last],
            "last_val": val[last],
            "ts_enc": pa.array(ts_enc, pa.binary()),
            "val_enc": pa.array(val_enc, pa.binary()),
        }
    )


def _rollup_rows(
    sid: np.ndarray,
    ts: np.ndarray,
    val: np.ndarray,
    inc: np.ndarray,
    p_ts: np.ndarray,
    has_prev: np.ndarray,
    pairs: np.ndarray,
) -> pa.Table:
    bucket = ts // ROLLUP_MS
    st = _starts(sid, bucket)
    ends = np.append(st[1:], ts.size) if st.size else st  # no rows: no chunks, no rollups
    rest = inc.copy()
    rest[st] = 0.0
    sums = np.add.reduceat(val, st) if st.size else val
    incs = np.add.reduceat(rest, st) if st.size else rest
    n_pairs = np.add.reduceat(pairs.astype(np.int32), st) if st.size else pairs.astype(np.int32)
    b0 = bucket[st] * ROLLUP_MS
    ok = has_prev[st]
    return pa.table(
        {
            "series_id": pa.array(sid[st], pa.uint32()),
            "bucket": b0,
            "n": (ends - st).astype(np.int32),
            "sum": sums,
            "inc": incs,
            "first_inc": pa.array(inc[st], mask=~ok),
            "prev_age": pa.array(b0 - p_ts[st], mask=~ok),
            "last_off": (ts[ends - 1] - b0).astype(np.int32),
            "last_val": val[ends - 1],
            "first_off": (ts[st] - b0).astype(np.int32),
            "pairs": n_pairs.astype(np.int32),
        }
    )


def decode_chunks(sids: np.ndarray, ts_blobs: list[bytes], val_blobs: list[bytes]) -> Columns:
    """Decode chunk blobs into flat (series_id, ts, value) arrays."""
    if not ts_blobs:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.float64)
    tss = [codec.decode_ts(b) for b in ts_blobs]
    vals = [codec.decode_values(b) for b in val_blobs]
    counts = np.fromiter((t.size for t in tss), dtype=np.int64, count=len(tss))
    return np.repeat(np.asarray(sids, np.uint32), counts), np.concatenate(tss), np.concatenate(vals)


# -- statements ------------------------------------------------------------------------------------


@contextmanager
def registered(con: Con, name: str, table: pa.Table) -> Iterator[None]:
    """``table`` visible to SQL on ``con`` as ``name`` inside the block, unregistered after it."""
    con.register(name, table)
    try:
        yield
    finally:
        con.unregister(name)


def ids_sql(ids: np.ndarray) -> str:
    """``ids`` as the inside of an SQL ``IN (...)`` (``NULL`` when empty)."""
    return ",".join(str(int(i)) for i in ids) or "NULL"


def create_tables(con: Con) -> None:
    """Create the tables that are missing; move a ``head`` table of the main file (older versions) to the
    head file."""
    for stmt in DDL:
        con.execute(stmt)
    con.execute(HEAD_DDL.format(db=HEAD_DB))
    legacy = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = 'head'", [DB]
    ).fetchone()
    if legacy and legacy[0]:
        con.execute(f"INSERT INTO {HEAD_DB}.head SELECT * FROM {DB}.head EXCEPT SELECT * FROM {HEAD_DB}.head")
        con.execute(f"DROP TABLE {DB}.head")
    con.execute("ALTER TABLE rollups ADD COLUMN IF NOT EXISTS first_off INTEGER")
    con.execute("ALTER TABLE rollups ADD COLUMN IF NOT EXISTS pairs INTEGER")
    rule = con.execute("SELECT value FROM meta WHERE key = 'rollup_rule'").fetchone()
    if rule is None or int(rule[0]) < ROLLUP_RULE:
        rebuild_rollups(con)
        con.execute("INSERT OR REPLACE INTO meta VALUES ('rollup_rule', ?)", [ROLLUP_RULE])


def rebuild_rollups(con: Con, batch_series: int = 2000) -> None:
    """Rebuild every ``rollups`` row from the chunks with today's rule (``ROLLUP_RULE``), ``batch_series``
    series at a time (a file written by an older version; nothing else changes)."""
    con.execute("DELETE FROM rollups")
    ids = [r[0] for r in con.execute("SELECT DISTINCT series_id FROM chunks ORDER BY 1").fetchall()]
    for k in range(0, len(ids), batch_series):
        part = np.array(ids[k : k + batch_series])
        rows = con.execute(
            "SELECT series_id, ts_enc, val_enc FROM chunks"
            f" WHERE series_id IN ({ids_sql(part)}) ORDER BY series_id, start"
        ).fetchall()
        sid, ts, val = decode_chunks(
            np.array([r[0] for r in rows], np.uint32), [r[1] for r in rows], [r[2] for r in rows]
        )
        _, rollups = build_rows(sid, ts, val, {}, {})
        with registered(con, "_rollups", rollups):
            con.execute("INSERT INTO rollups BY NAME SELECT * FROM _rollups")


def read_sealed_until(con: Con) -> int | None:
    """``meta.sealed_until`` (epoch ms), ``None`` before the first append."""
    row = con.execute("SELECT value FROM meta WHERE key = 'sealed_until'").fetchone()
    return None if row is None else int(row[0])


def write_sealed_until(con: Con, sealed_until: int) -> None:
    """Set ``meta.sealed_until`` (inside the main file's transaction of the seal)."""
    con.execute("INSERT OR REPLACE INTO meta VALUES ('sealed_until', ?)", [sealed_until])


def read_series(con: Con) -> list[tuple[int, str, Labels]]:
    """Every ``series`` row as ``(id, name, labels)``, by id."""
    rows = con.execute("SELECT id, name, labels FROM series ORDER BY id").fetchall()
    return [(sid, name, tuple((k, v) for k, v in json.loads(labels))) for sid, name, labels in rows]


def newest_per_series(con: Con) -> list[tuple[int, int]]:
    """``(series id, newest ts)`` from ``head`` and from ``chunks`` (a series may appear twice)."""
    return [
        *con.execute(f"SELECT series_id, max(ts) FROM {HEAD_DB}.head GROUP BY 1").fetchall(),
        *con.execute("SELECT series_id, max(last_ts) FROM chunks GROUP BY 1").fetchall(),
    ]


def read_head(con: Con, floor: int) -> Columns:
    """The ``head`` rows with ts at or after ``floor`` (unsorted)."""
    h = con.execute(f"SELECT series_id, ts, value FROM {HEAD_DB}.head WHERE ts >= ?", [floor]).fetchnumpy()
    return h["series_id"], h["ts"], h["value"]


def delete_head(con: Con, before: int) -> None:
    """Delete the ``head`` rows with ts before ``before`` (the head file's own transaction)."""
    con.execute(f"DELETE FROM {HEAD_DB}.head WHERE ts < ?", [before])


def insert_head(con: Con, sid: np.ndarray, ts: np.ndarray, val: np.ndarray) -> None:
    """Insert samples into ``head`` (the head file's own transaction)."""
    tbl = pa.table({"series_id": pa.array(sid, pa.uint32()), "ts": ts, "value": val})
    with registered(con, "_new", tbl):
        con.execute(f"INSERT INTO {HEAD_DB}.head SELECT * FROM _new")


def insert_series(con: Con, rows: list[tuple[object, ...]]) -> None:
    """Insert ``series`` rows ``(id, name, labels JSON, *HOT_LABELS)``."""
    names = ["id", "name", "labels", *HOT_LABELS]
    cols = list(zip(*rows, strict=True))
    tbl = pa.table(
        {n: pa.array(c, pa.uint32() if n == "id" else pa.string()) for n, c in zip(names, cols, strict=True)}
    )
    with registered(con, "_series", tbl):
        con.execute("INSERT INTO series SELECT * FROM _series")


def load_rollup_columns(con: Con) -> dict[str, np.ndarray]:
    """Every ``rollups`` row, sorted by (series, bucket), as ``RollupIndex`` takes them (``first_inc`` 0
    and ``prev_age`` -1 where there is no previous sample)."""
    cols = con.execute(
        "SELECT series_id, bucket, n, sum, inc, coalesce(first_inc, 0) AS first_inc,"
        " coalesce(prev_age, -1) AS prev_age, last_off, last_val, first_off, pairs FROM rollups"
        " ORDER BY series_id, bucket"
    ).fetchnumpy()
    return {k: np.asarray(v) for k, v in cols.items()}


def write_rows(
    con: Con,
    sid: np.ndarray,
    ts: np.ndarray,
    val: np.ndarray,
    prev_ts: dict[int, int],
    prev_val: dict[int, float],
) -> dict[str, np.ndarray]:
    """Insert chunk and rollup rows for whole chunks of samples sorted by (series, ts) (``build_rows``:
    ``prev_ts``/``prev_val``); return the rollup columns as ``load_rollup_columns`` does."""
    chunks, rollups = build_rows(sid, ts, val, prev_ts, prev_val)
    with registered(con, "_chunks", chunks), registered(con, "_rollups", rollups):
        con.execute("INSERT INTO chunks SELECT * FROM _chunks")
        con.execute("INSERT INTO rollups BY NAME SELECT * FROM _rollups")
    cols = {c: rollups.column(c) for c in rollups.column_names}
    cols["first_inc"] = cols["first_inc"].fill_null(0.0)
    cols["prev_age"] = cols["prev_age"].fill_null(-1)
    return {c: v.to_numpy() for c, v in cols.items()}


def _keys_table(keys: ChunkKeys) -> pa.Table:
    """``keys`` as a table ``(s, c)`` to join with (registered as ``_keys``)."""
    return pa.table({"s": pa.array([a for a, _ in keys], pa.uint32()), "c": [b for _, b in keys]})


def load_chunks(con: Con, keys: ChunkKeys) -> Columns:
    """The decoded samples of the chunks ``keys`` (unsorted)."""
    if not keys:
        return decode_chunks(np.zeros(0, np.uint32), [], [])
    with registered(con, "_keys", _keys_table(keys)):
        rows = con.execute(
            "SELECT series_id, ts_enc, val_enc FROM chunks JOIN _keys ON series_id = s AND start = c"
        ).fetchall()
    return decode_chunks(
        np.array([r[0] for r in rows], np.uint32), [r[1] for r in rows], [r[2] for r in rows]
    )


def delete_chunks(con: Con, keys: ChunkKeys) -> None:
    """Delete the chunks ``keys`` and their rollups."""
    if not keys:
        return
    with registered(con, "_keys", _keys_table(keys)):
        con.execute("DELETE FROM chunks WHERE (series_id, start) IN (SELECT (s, c) FROM _keys)")
        con.execute(
            f"DELETE FROM rollups WHERE (series_id, bucket // {CHUNK_MS} * {CHUNK_MS})"
            " IN (SELECT (s, c) FROM _keys)"
        )


def chunks_to_rewrite(con: Con, sid: np.ndarray, ts: np.ndarray) -> tuple[ChunkKeys, dict[int, int]]:
    """For late samples (sorted by series, ts): the stored chunks to rewrite with them, and per series
    the start of the first of those chunks (or of the late samples' own chunk when none is stored), before
    which the caller finds each series' previous sample (``RollupIndex.last_before``)."""
    chunk_of = ts // CHUNK_MS * CHUNK_MS
    ids, first_idx = np.unique(sid, return_index=True)  # sid is sorted: the first is the earliest
    meta = con.execute(
        f"SELECT series_id, start, last_ts, last_val FROM chunks WHERE series_id IN ({ids_sql(ids)})"
        " ORDER BY series_id, start"
    ).fetchall()
    existing: dict[int, list[tuple[int, int, float]]] = {}
    for s, start, last_ts, last_val in meta:
        existing.setdefault(s, []).append((start, last_ts, last_val))
    last_idx = np.append(np.flatnonzero(sid[1:] != sid[:-1]), sid.size - 1)
    load: ChunkKeys = set()
    before: dict[int, int] = {}
    for s, lo_i, hi_i in zip(ids.tolist(), first_idx.tolist(), last_idx.tolist(), strict=True):
        # every stored chunk from the first touched one up to the one after the last touched one, so
        # that each sample's previous sample is at hand and the next chunk's first bucket is redone
        chunks = existing.get(s, [])
        starts = [c[0] for c in chunks]
        lo_k = int(np.searchsorted(starts, int(chunk_of[lo_i])))
        hi_k = int(np.searchsorted(starts, int(chunk_of[hi_i]), side="right"))
        load.update((s, starts[x]) for x in range(lo_k, min(hi_k + 1, len(starts))))
        before[s] = int(chunk_of[lo_i])
    return load, before


def delete_series(con: Con, ids: np.ndarray) -> None:
    """Delete the ``series`` rows of ``ids`` (series without samples left; their ids are not reused)."""
    if ids.size:
        con.execute(f"DELETE FROM series WHERE id IN ({ids_sql(ids)})")


def drop_sealed(con: Con, cut: int) -> int:
    """Retention in the main file: drop chunks and rollups before ``cut`` (epoch ms), rewrite the chunk of
    each series that straddles it; return how many samples were dropped."""
    dropped = int(
        con.execute("SELECT coalesce(sum(n), 0) FROM chunks WHERE last_ts < ?", [cut]).fetchone()[0]  # type: ignore[index]
    )
    con.execute("DELETE FROM chunks WHERE last_ts < ?", [cut])
    straddle = {
        (int(s), int(c))
        for s, c in con.execute("SELECT series_id, start FROM chunks WHERE start < ?", [cut]).fetchall()
    }
    con.execute("DELETE FROM rollups WHERE bucket + last_off < ?", [cut])
    if straddle:
        sid, ts, val = load_chunks(con, straddle)
        order = np.lexsort((ts, sid))
        sid, ts, val = sid[order], ts[order], val[order]
        live = ts >= cut
        dropped += int((~live).sum())
        delete_chunks(con, straddle)
        write_rows(con, sid[live], ts[live], val[live], {}, {})
    # the first sample's previous one is gone: it no longer counts a delta, nor gives its bucket data
    con.execute(
        "UPDATE rollups SET pairs = pairs - CASE WHEN prev_age + first_off <= ? OR first_inc <> 0 THEN 1"
        " ELSE 0 END, first_inc = NULL, prev_age = NULL WHERE bucket - prev_age < ?",
        [COUNTER_GAP_MS, cut],
    )
    return dropped


def read_chunks(cur: Con, ids: np.ndarray, starts: list[int]) -> list[tuple[int, int, bytes, bytes]]:
    """Rows ``(series_id, start, ts_enc, val_enc)`` of the chunks of ``ids`` x ``starts`` that exist."""
    return cur.execute(
        "SELECT series_id, start, ts_enc, val_enc FROM chunks"
        f" WHERE series_id IN ({ids_sql(ids)}) AND start IN ({','.join(str(c) for c in starts)})"
    ).fetchall()


def sealed_samples(cur: Con) -> int:
    """How many samples ``chunks`` holds."""
    return int(cur.execute("SELECT coalesce(sum(n), 0) FROM chunks").fetchone()[0])  # type: ignore[index]
