"""Tables of ``DuckDBStore`` and the pure function that turns sorted samples into chunk and rollup rows.

- ``series``: one row per series: id, name, labels (JSON text) and the hot labels as columns.
- ``head`` (in its own file, ``<name>.head.duckdb``): recent samples, one row each
  (``series_id, ts, value``), not yet sealed into chunks; rows before ``sealed_until`` are leftovers of
  an interrupted seal and are dropped on open.
- ``chunks``: one row per series per ``CHUNK_MS`` of sealed samples: two blobs (``duckdb_codec``) and the
  chunk's sample count and last sample.
- ``rollups``: one row per series per ``ROLLUP_MS`` bucket of sealed samples: count, sum, the increase of
  the 2nd..nth sample (``inc``), the first sample's delta to its previous sample (``first_inc``, even when
  that one lies in an earlier bucket) and how far before the bucket that previous sample lies
  (``prev_age``), and the last sample (``last_off`` after the bucket start, ``last_val``).
- ``meta``: ``sealed_until``: every sample before it is in ``chunks``/``rollups``, every later one in
  ``head``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from servemetrics.store import duckdb_codec as codec

CHUNK_MS = 2 * 3600 * 1000
ROLLUP_MS = 30 * 60 * 1000
HOT_LABELS = ("model_id", "deployment_id", "replica")

DDL = [
    "CREATE TABLE IF NOT EXISTS series (id UINTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
    " labels VARCHAR NOT NULL, model_id VARCHAR, deployment_id VARCHAR, replica VARCHAR)",
    "CREATE TABLE IF NOT EXISTS chunks (series_id UINTEGER NOT NULL, start BIGINT NOT NULL,"
    " n INTEGER NOT NULL, last_ts BIGINT NOT NULL, last_val DOUBLE, ts_enc BLOB NOT NULL,"
    " val_enc BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rollups (series_id UINTEGER NOT NULL, bucket BIGINT NOT NULL,"
    " n INTEGER NOT NULL, sum DOUBLE, inc DOUBLE, first_inc DOUBLE, prev_age BIGINT,"
    " last_off INTEGER NOT NULL, last_val DOUBLE)",
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
]

HEAD_DDL = (
    "CREATE TABLE IF NOT EXISTS {db}.head (series_id UINTEGER NOT NULL, ts BIGINT NOT NULL, value DOUBLE)"
)
"""``head`` lives in a file of its own next to the main one (``DuckDBStore``: why)."""


def increases(values: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Counter delta of each sample to its previous one; a drop is a reset (the delta is the new value)."""
    with np.errstate(invalid="ignore"):
        return np.where(values >= prev, values - prev, values)


def _starts(sid: np.ndarray, part: np.ndarray) -> np.ndarray:
    if sid.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = (sid[1:] != sid[:-1]) | (part[1:] != part[:-1])
    return np.concatenate(([0], np.flatnonzero(change) + 1))


def build_rows(
    sid: np.ndarray, ts: np.ndarray, val: np.ndarray, prev_ts: dict[int, int], prev_val: dict[int, float]
) -> tuple[pa.Table, pa.Table]:
    """Chunk and rollup rows for samples sorted by (series, ts) that hold whole chunks.

    ``prev_ts``/``prev_val`` give, per series, the last stored sample before its first one here (absent
    when none); within the input each sample's previous one is the one before it.
    """
    n = ts.size
    first = np.ones(n, dtype=bool)
    first[1:] = sid[1:] != sid[:-1]
    p_ts = np.empty(n, dtype=np.int64)
    p_val = np.empty(n, dtype=np.float64)
    p_ts[1:], p_val[1:] = ts[:-1], val[:-1]
    has_prev = ~first
    for i in np.flatnonzero(first):
        s = int(sid[i])
        if s in prev_ts:
            p_ts[i], p_val[i], has_prev[i] = prev_ts[s], prev_val[s], True
    inc = increases(val, p_val)
    return _chunk_rows(sid, ts, val), _rollup_rows(sid, ts, val, inc, p_ts, has_prev)


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
    sid: np.ndarray, ts: np.ndarray, val: np.ndarray, inc: np.ndarray, p_ts: np.ndarray, has_prev: np.ndarray
) -> pa.Table:
    bucket = ts // ROLLUP_MS
    st = _starts(sid, bucket)
    ends = np.append(st[1:], ts.size) if st.size else st  # no rows: no chunks, no rollups
    rest = inc.copy()
    rest[st] = 0.0
    sums = np.add.reduceat(val, st) if st.size else val
    incs = np.add.reduceat(rest, st) if st.size else rest
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
        }
    )


def decode_chunks(
    sids: np.ndarray, ts_blobs: list[bytes], val_blobs: list[bytes]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode chunk blobs into flat (series_id, ts, value) arrays."""
    if not ts_blobs:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.float64)
    tss = [codec.decode_ts(b) for b in ts_blobs]
    vals = [codec.decode_values(b) for b in val_blobs]
    counts = np.fromiter((t.size for t in tss), dtype=np.int64, count=len(tss))
    return np.repeat(np.asarray(sids, np.uint32), counts), np.concatenate(tss), np.concatenate(vals)
