"""``DuckDBStore`` specifics: the file, durability, retention, concurrency, ``open_store``."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from servemetrics.samples import SampleBatch
from servemetrics.store import STORE_FILE, open_store
from servemetrics.store.base import Cell, Reducer, Selection, ValueSet
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.duckdb_rollups import RollupIndex
from servemetrics.store.duckdb_state import load_rollups
from servemetrics.store.duckdb_view import View, sort_segment
from servemetrics.store.duckdb_writer import fresh_head_path
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.store.helpers import HOUR, MIN, T0, assert_same

KEYS = [
    ("req_total", labels_of({"model_id": "m1", "deployment_id": "d1", "replica": f"r{r}", "status_code": c}))
    for r in range(4)
    for c in ("200", "500")
]
ALL = frozenset({"d1"})


def grid_batch(start: int, n: int, base: float = 0.0) -> SampleBatch:
    """Every series of ``KEYS`` at 15 s for ``n`` steps, counters rising by 1 a step."""
    ts = start + 15_000 * np.arange(n, dtype=np.int64)
    k = len(KEYS)
    return SampleBatch(
        KEYS,
        np.tile(np.arange(k, dtype=np.uint32), n),
        np.repeat(ts, k),
        np.repeat(base + (ts - T0) / 15_000, k),
    )


def increase(store: DuckDBStore, lo: int, hi: int) -> dict:
    return store.select(Selection("req_total", Reducer.INCREASE, (ValueSet(lo, hi, ALL),), ("status_code",)))


def test_open_store_creates_the_file_in_the_data_dir(tmp_path: Path) -> None:
    store = open_store(tmp_path / "data")
    try:
        assert isinstance(store, DuckDBStore)
        assert (tmp_path / "data" / STORE_FILE).exists()
    finally:
        store.close()


def test_sealing_moves_old_samples_to_chunks_and_keeps_answers(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    assert store.append(grid_batch(T0, 6 * 240)) == 6 * 240 * len(KEYS)  # 6 hours
    stats = store.stats()
    assert stats.samples == 6 * 240 * len(KEYS)
    assert stats.extra["head_samples"] < stats.samples  # sealed chunks exist
    assert increase(store, T0, T0 + 6 * HOUR) == {
        ("200",): [Cell(4 * (6 * 240 - 1), 4)],
        ("500",): [Cell(4 * (6 * 240 - 1), 4)],
    }
    # 7 ms into the first 15 s pair: its delta of 1 counts (15000 - 7) / 15000 (spread evenly)
    got = increase(store, T0 + 7, T0 + 6 * HOUR)[("200",)]
    assert got == [Cell(pytest.approx(4 * (6 * 240 - 1 - 7 / 15_000)), 4)]
    store.close()


def test_reopen_reads_the_same_answers(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    store.append(grid_batch(T0, 5 * 240))
    before = [
        increase(store, T0 + a, T0 + b) for a, b in ((0, HOUR), (HOUR + 1, 4 * HOUR + 7), (0, 5 * HOUR))
    ]
    store.close()
    again = DuckDBStore(path)
    after = [increase(again, T0 + a, T0 + b) for a, b in ((0, HOUR), (HOUR + 1, 4 * HOUR + 7), (0, 5 * HOUR))]
    assert after == before
    assert again.append(grid_batch(T0, 10, base=1000)) == 0  # first write wins across reopen
    again.close()


def test_late_samples_merge_into_sealed_chunks(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    full = grid_batch(T0, 6 * 240)
    keep = np.ones(len(full), dtype=bool)
    keep[len(KEYS) * 100 : len(KEYS) * 110] = False  # 10 steps held back
    store.append(SampleBatch(KEYS, full.series_index[keep], full.ts_ms[keep], full.values[keep]))
    gap = increase(store, T0, T0 + HOUR)
    late = SampleBatch(KEYS, full.series_index[~keep], full.ts_ms[~keep], full.values[~keep])
    assert store.append(late) == int((~keep).sum())
    assert increase(store, T0, T0 + HOUR) == gap  # the same deltas, now in more steps
    assert store.append(late) == 0
    store.close()


def test_delete_before_drops_whole_hours_across_chunks(tmp_path: Path) -> None:
    """Retention (what the removed ``apply_retention(now, retention)`` did: ``delete_before(now -
    retention)``): 8 hours stored, everything before hour 3 dropped, the rest answers as before."""
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.append(grid_batch(T0, 8 * 240))
    dropped = store.delete_before(T0 + 8 * HOUR - 5 * HOUR)
    assert dropped == 3 * 240 * len(KEYS)
    assert store.stats().samples == 5 * 240 * len(KEYS)
    got = increase(store, T0, T0 + 8 * HOUR)
    assert got[("200",)] == [Cell(4 * (5 * 240 - 1), 4)]
    store.close()


def test_reads_run_while_ingest_writes(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.append(grid_batch(T0, 240))
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for h in range(1, 12):
                store.append(grid_batch(T0 + h * HOUR, 240))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    reads = 0
    while not done.is_set() or reads < 5:
        # the pairs up to the first batch's last sample at HOUR - 15 s: stored before the writer starts
        got = increase(store, T0 + 1, T0 + HOUR - 15_000)
        assert got[("200",)] == [Cell(pytest.approx(4 * (239 - 1 / 15_000)), 4)]
        reads += 1
    t.join()
    assert not errors
    assert store.stats().samples == 12 * 240 * len(KEYS)
    store.close()


def test_head_rows_far_apart_in_time() -> None:
    """A head segment spanning more than 2**40 ms falls back from keyed search to a mask."""
    sid = np.array([0, 0, 1], np.uint32)
    ts = np.array([T0, T0 + (1 << 41), T0 + 5], np.int64)
    view = View(T0, (sort_segment(sid, ts, np.array([1.0, 2.0, 3.0])),), RollupIndex.empty(30 * MIN))
    for lo in (T0 - 1, T0 + 1):
        got = view.head_rows(np.array([0], np.uint32), [(lo, T0 + (1 << 41) + 1)], 2)
        assert got[1].tolist() == ([T0, T0 + (1 << 41)] if lo < T0 else [T0 + (1 << 41)])
    narrow = View(
        T0, (sort_segment(sid[[0, 2]], ts[[0, 2]], np.array([1.0, 3.0])),), RollupIndex.empty(30 * MIN)
    )
    assert narrow.head_rows(np.array([1], np.uint32), [(T0, T0 + 6)], 2)[2].tolist() == [3.0]


def test_late_samples_in_chunks_far_apart_keep_increases(tmp_path: Path) -> None:
    """Late samples in two chunks with untouched chunks between them: rollups keep the right deltas."""
    duck, mem = DuckDBStore(tmp_path / "s.duckdb"), MemoryStore()
    full = grid_batch(T0, 12 * 240)
    late = np.isin(full.ts_ms, [T0 + 15_000 * 7, T0 + 9 * HOUR + 15_000 * 3])
    for part in (~late, late):
        b = SampleBatch(KEYS, full.series_index[part], full.ts_ms[part], full.values[part] * 1.5)
        assert duck.append(b) == mem.append(b)
    sets = tuple(ValueSet(T0 + i * 30 * MIN, T0 + (i + 1) * 30 * MIN, ALL) for i in range(24))
    sel = Selection("req_total", Reducer.INCREASE, sets, ("status_code",), (), 3 * HOUR)
    assert_same(duck.select(sel), mem.select(sel))
    duck.close()


def test_rollups_in_memory_after_late_merges_equal_the_table(tmp_path: Path) -> None:
    """A late-write merge updates the in-memory rollups without reading the table back: after merges into
    one chunk, chunks far apart and a chunk that did not exist, they equal what ``load_rollups`` reads."""
    store = DuckDBStore(tmp_path / "s.duckdb")
    full = grid_batch(T0, 12 * 240)
    rng = np.random.default_rng(7)
    late = rng.random(len(full)) < 0.01
    late |= (full.ts_ms >= T0 + 4 * HOUR) & (full.ts_ms < T0 + 6 * HOUR) & (full.series_index == 3)
    store.append(SampleBatch(KEYS, full.series_index[~late], full.ts_ms[~late], full.values[~late]))
    idx = np.flatnonzero(late)
    for part in np.array_split(idx, 5):  # five merges, each into several chunks
        assert store.append(SampleBatch(KEYS, full.series_index[part], full.ts_ms[part], full.values[part]))
    in_memory = store._view.rollups.columns()
    from_file = store._writer.run(load_rollups).columns()
    assert in_memory["series_id"].size == from_file["series_id"].size > 0
    for column, values in from_file.items():
        np.testing.assert_array_equal(in_memory[column], values, err_msg=column)
    store.close()


def test_fine_steps_over_chunks_and_head_segments(tmp_path: Path) -> None:
    """Raw-only value sets (1 and 5 minute steps) over several chunks, partly cut chunks, the sealed
    boundary and several head segments (one with samples older than the others, reset counters)."""
    duck, mem = DuckDBStore(tmp_path / "s.duckdb"), MemoryStore()
    full = grid_batch(T0, 9 * 240)
    vals = full.values.copy()
    vals[full.ts_ms >= T0 + 5 * HOUR] -= 500.0  # a reset in every series
    late = (full.ts_ms > T0 + 7 * HOUR) & (full.ts_ms % 60_000 == 0)
    recent = full.ts_ms > T0 + 8 * HOUR
    for part in (~late & ~recent, recent & ~late, late):  # the last batch goes back in time in head
        b = SampleBatch(KEYS, full.series_index[part], full.ts_ms[part], vals[part])
        assert duck.append(b) == mem.append(b)
    assert len(duck._view.head) > 1
    for step, lo in ((MIN, T0 + 6 * HOUR + 7_777), (5 * MIN, T0 + 7 * MIN + 3)):
        hi = T0 + 9 * HOUR - 4_321
        cuts = [lo, *range((lo // step + 1) * step, hi, step), hi]
        sets = tuple(ValueSet(a, b, ALL) for a, b in zip(cuts[:-1], cuts[1:], strict=True))
        for reducer in Reducer:
            for lookback in (MIN, 10 * MIN, 3 * HOUR):
                sel = Selection("req_total", reducer, sets, ("status_code",), (), lookback)
                assert_same(duck.select(sel), mem.select(sel))
    duck.close()


def test_head_file_and_interrupted_seal(tmp_path: Path) -> None:
    """``head`` lives in its own file, counted in ``stats().bytes``; rows a seal left in it (a crash
    between committing the chunks and deleting them from head) are dropped on open."""
    import duckdb

    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    store.append(grid_batch(T0, 6 * 240))
    want = increase(store, T0 + 7, T0 + 6 * HOUR)
    store.checkpoint()
    st = store.stats()
    assert store.head_path.exists() and store.head_path != path
    assert st.bytes >= path.stat().st_size + store.head_path.stat().st_size
    store.close()
    with duckdb.connect(str(store.head_path)) as con:  # as if the seal's delete had not happened
        con.execute("INSERT INTO head SELECT 0, ?, 0.0", [T0])
        con.execute("INSERT INTO head SELECT 1, ?, 1e9", [T0 + 15_000])
    again = DuckDBStore(path)
    try:
        assert increase(again, T0 + 7, T0 + 6 * HOUR) == want
        assert again.stats().samples == st.samples
    finally:
        again.close()


def test_a_seal_leaves_a_head_file_without_free_blocks(tmp_path: Path) -> None:
    """After each seal the head file is a fresh copy of the unsealed rows: no free blocks left by the
    sealed ones (deleting them in place left 6 of 12 blocks free here), every unsealed row there (ts at
    or after ``sealed_until``), nothing else; the answers are those of the samples appended."""
    import duckdb

    n_series = 1000  # enough rows for the head to span several 256 KiB blocks
    keys = [
        ("g", labels_of({"model_id": "m1", "deployment_id": "d1", "replica": f"r{r}"}))
        for r in range(n_series)
    ]
    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    step = np.arange(240, dtype=np.int64)
    for k in range(13):  # 13 hours in 1-hour batches: the last seal at 12 h 10 min seals up to 12 h
        ts = T0 + k * HOUR + 15_000 * step
        vals = (k * 240 + np.repeat(step, n_series) + np.tile(np.arange(n_series), 240) % 7).astype(float)
        store.append(
            SampleBatch(
                keys, np.tile(np.arange(n_series, dtype=np.uint32), 240), np.repeat(ts, n_series), vals
            )
        )
    sel = Selection("g", Reducer.MEAN, (ValueSet(T0 + 11 * HOUR, T0 + 13 * HOUR, ALL),), ())
    want = store.select(sel)
    assert store._sealed_until == T0 + 12 * HOUR
    store.close()
    with duckdb.connect(str(store.head_path), read_only=True) as con:
        free = con.execute("SELECT free_blocks FROM pragma_database_size()").fetchone()
        rows = con.execute("SELECT count(*), min(ts), max(ts) FROM head").fetchone()
    assert free == (0,)
    assert rows == (240 * n_series, T0 + 12 * HOUR, T0 + 13 * HOUR - 15_000)
    assert not fresh_head_path(store.head_path).exists()
    # mean over 11 h .. 13 h of k * 240 + i + (series % 7): k = 11, 12 and i = 0..239
    assert want == {
        (): [Cell(n_series * (240 * 11.5 + 119.5) + sum(r % 7 for r in range(n_series)), n_series)]
    }
    again = DuckDBStore(path)
    try:
        assert again.select(sel) == want
    finally:
        again.close()


def test_a_failed_head_swap_keeps_the_store_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the swap of the head file fails (here ``os.replace``), the append that sealed raises it, the
    old head file stays attached and whole, and later appends, reads and a reopen see every sample."""
    import servemetrics.store.duckdb_writer as writer

    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    store.append(grid_batch(T0, 2 * 240))

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(writer.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        store.append(grid_batch(T0 + 2 * HOUR, 60))  # 2 h 15 min: the first chunk is sealed
    monkeypatch.undo()
    assert store._sealed_until == T0 + 2 * HOUR
    assert store.append(grid_batch(T0 + 2 * HOUR + 60 * 15_000, 60)) == 60 * len(KEYS)
    n = 2 * 240 + 120
    want = {("200",): [Cell(4 * (n - 1), 4)], ("500",): [Cell(4 * (n - 1), 4)]}
    assert increase(store, T0, T0 + 3 * HOUR) == want
    store.close()
    again = DuckDBStore(path)
    try:
        assert increase(again, T0, T0 + 3 * HOUR) == want
        assert again.stats().samples == n * len(KEYS)
    finally:
        again.close()


def test_a_head_copy_left_by_a_crash_is_ignored(tmp_path: Path) -> None:
    """A crash while ``replace_head_file`` wrote its copy leaves the old head file whole: on open the
    stray copy (and its WAL) is removed and every sample is read from the old file."""
    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    store.append(grid_batch(T0, 240))
    want = increase(store, T0, T0 + HOUR)
    store.close()
    stray = fresh_head_path(store.head_path)
    stray.write_bytes(b"half a file")
    Path(f"{stray}.wal").write_bytes(b"half a WAL")
    again = DuckDBStore(path)
    try:
        assert increase(again, T0, T0 + HOUR) == want
        assert not stray.exists() and not Path(f"{stray}.wal").exists()
    finally:
        again.close()


def test_legacy_head_table_moves_to_the_head_file(tmp_path: Path) -> None:
    """A file of the one-file layout (``head`` in the main file) opens with its head samples."""
    import duckdb

    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    store.append(grid_batch(T0, 30))
    want = increase(store, T0, T0 + HOUR)
    store.close()
    with duckdb.connect(str(path)) as con, duckdb.connect(str(store.head_path)) as head:
        con.execute("CREATE TABLE head (series_id UINTEGER NOT NULL, ts BIGINT NOT NULL, value DOUBLE)")
        rows = head.execute("SELECT * FROM head").fetchall()
        con.executemany("INSERT INTO head VALUES (?, ?, ?)", rows)
    store.head_path.unlink()
    again = DuckDBStore(path)
    try:
        assert increase(again, T0, T0 + HOUR) == want
    finally:
        again.close()
    again = DuckDBStore(path)  # moved once, not twice
    try:
        assert again.stats().extra["head_samples"] == 30 * len(KEYS)
    finally:
        again.close()


def test_acknowledged_head_samples_survive_a_crash(tmp_path: Path) -> None:
    """A process that appends and dies without closing: its samples (head and sealed) are there."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "s.duckdb"
    code = textwrap.dedent(
        f"""
        import os
        from tests.store.test_duckdb import grid_batch, T0
        from servemetrics.store.duckdb import DuckDBStore
        store = DuckDBStore({str(path)!r})
        store.append(grid_batch(T0, 3 * 240))
        store.append(grid_batch(T0 + 3 * 240 * 15_000, 20))
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
    store = DuckDBStore(path)
    try:
        assert store.stats().samples == (3 * 240 + 20) * len(KEYS)
        assert store.stats().extra["head_samples"] > 0
        assert increase(store, T0, T0 + 4 * HOUR) == {
            ("200",): [Cell(4 * (3 * 240 + 20 - 1), 4)],
            ("500",): [Cell(4 * (3 * 240 + 20 - 1), 4)],
        }
    finally:
        store.close()


def test_every_reducer_has_an_evaluator():
    from servemetrics.store.duckdb_eval import _EVALUATORS

    assert set(_EVALUATORS) == set(Reducer)


def test_rollups_of_an_older_file_are_rebuilt_on_open(tmp_path: Path) -> None:
    """A file whose rollups predate ``ROLLUP_RULE`` (no ``first_off``, old deltas) answers as MemoryStore
    after reopening: the rollups are rebuilt from the chunks."""
    import duckdb

    path = tmp_path / "s.duckdb"
    store, mem = DuckDBStore(path), MemoryStore()
    for b in (grid_batch(T0, 6 * 240), grid_batch(T0 + 8 * HOUR, 6 * 240, base=-5000.0)):  # a gap, a drop
        store.append(b)
        mem.append(b)
    store.close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE rollups SET inc = 999, first_inc = 999")  # what an older rule would have left
    con.execute("ALTER TABLE rollups DROP COLUMN first_off")
    con.execute("DELETE FROM meta WHERE key = 'rollup_rule'")
    con.close()
    reopened = DuckDBStore(path)
    sets = tuple(ValueSet(T0 + h * HOUR, T0 + (h + 1) * HOUR, ALL) for h in range(14))
    sel = Selection("req_total", Reducer.INCREASE, sets, ("status_code",))
    assert_same(reopened.select(sel), mem.select(sel))
    assert reopened.select(sel)[("200",)][0] == Cell(4 * 240.0, 4)  # 240 pairs end inside the first hour
    reopened.close()


def test_a_file_of_the_first_chunk_format_reads_back_identically(tmp_path: Path) -> None:
    """A data directory written before the second chunk format (its blobs re-encoded here with
    ``codec_v1``, the old encoder) gives every sample back bit for bit and the same answers; chunks
    rewritten by a late sample come back in the new format, the others stay as they were."""
    import duckdb

    from servemetrics.store import duckdb_codec as codec
    from tests.store import codec_v1

    path = tmp_path / "s.duckdb"
    store = DuckDBStore(path)
    full = grid_batch(T0, 6 * 240)
    vals = full.values * 1.25 + 0.001  # three decimals
    vals[full.ts_ms == T0 + 3 * HOUR] = np.nan  # a marker in every series
    store.append(SampleBatch(KEYS, full.series_index, full.ts_ms, vals))
    sets = tuple(ValueSet(T0 + h * 30 * MIN + 7, T0 + (h + 1) * 30 * MIN + 7, ALL) for h in range(11))
    sels = [Selection("req_total", r, sets, ("status_code",), (), 10 * MIN) for r in Reducer]
    want = [store.select(s) for s in sels]
    store.close()
    with duckdb.connect(str(path)) as con:
        rows = con.execute("SELECT series_id, start, ts_enc, val_enc FROM chunks ORDER BY 1, 2").fetchall()
        decoded = {(s, c): (codec.decode_ts(t), codec.decode_values(v)) for s, c, t, v in rows}
        for (s, c), (ts, v) in decoded.items():
            old_ts = codec_v1.encode_ts(ts)
            old_val = codec_v1.encode_values(v, int(codec_v1.decimals_needed(v).max()))
            con.execute(
                "UPDATE chunks SET ts_enc = ?, val_enc = ? WHERE series_id = ? AND start = ?",
                [old_ts, old_val, s, c],
            )
        first_bytes = {
            r[0] for r in con.execute("SELECT DISTINCT left(hex(val_enc), 2) FROM chunks").fetchall()
        }
    assert first_bytes <= {"03", "83", "FF"}  # the first format's tags: 3 decimals, near, raw
    old = DuckDBStore(path, cache_samples=0, answer_entries=0)
    try:
        assert [old.select(s) for s in sels] == want
        got = old._chunk_arrays(np.arange(len(KEYS), dtype=np.uint32), [T0, T0 + 2 * HOUR], gen=0)
        for key, (ts, v) in got.items():
            assert np.array_equal(ts, decoded[key][0])
            assert np.array_equal(v.view(np.uint64), decoded[key][1].view(np.uint64))
        late = SampleBatch(KEYS[:1], np.zeros(1, np.uint32), np.array([T0 + 7]), np.array([0.5]))
        assert old.append(late) == 1
    finally:
        old.close()
    with duckdb.connect(str(path), read_only=True) as con:
        tags = dict(
            con.execute(
                "SELECT series_id, left(hex(val_enc), 2) FROM chunks WHERE start = ?", [T0]
            ).fetchall()
        )
    assert tags[0] not in {"03", "83", "FF"} and tags[1] in {"03", "83", "FF"}  # rewritten, untouched
