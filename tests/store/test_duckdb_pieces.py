"""A large append is written as several writer tasks of at most ``APPEND_PIECE`` samples, so other
writers interleave (issue 12 part 3), with the same result as one task: first write wins across pieces;
and the writer's queue is bounded."""

from __future__ import annotations

import threading

import numpy as np

from servemetrics.samples import SampleBatch
from servemetrics.store import duckdb as duckdb_store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.duckdb_writer import Writer, connect
from servemetrics.types import labels_of

T0 = 1_750_000_000_000


def _batch(n: int, series: int) -> SampleBatch:
    keys = [("g", labels_of({"i": str(i)})) for i in range(series)]
    return SampleBatch(
        series=keys,
        series_index=np.arange(n, dtype=np.uint32) % series,
        ts_ms=T0 + np.arange(n, dtype=np.int64) // series * 1000,
        values=np.arange(n, dtype=np.float64),
    )


def test_pieces_keep_order_and_only_their_series():
    batch = _batch(10, 3)
    pieces = list(batch.pieces(4))
    assert [len(p) for p in pieces] == [4, 4, 2]
    assert [list(p.samples()) for p in pieces] == [list(batch.samples())[i : i + 4] for i in (0, 4, 8)]
    assert [len(p.series) for p in pieces] == [3, 3, 2]
    assert list(batch.pieces(10)) == [batch]


def test_a_large_append_is_several_writer_tasks_and_first_write_wins_across_them(tmp_path, monkeypatch):
    monkeypatch.setattr(duckdb_store, "APPEND_PIECE", 1000)
    store = DuckDBStore(tmp_path / "s.duckdb")
    tasks = []
    real = store._writer.run
    monkeypatch.setattr(store._writer, "run", lambda fn: tasks.append(fn) or real(fn))
    try:
        batch = _batch(2500, 5)
        repeated = SampleBatch(  # the first sample again with another value, in the last piece
            batch.series,
            np.r_[batch.series_index, batch.series_index[:1]],
            np.r_[batch.ts_ms, batch.ts_ms[:1]],
            np.r_[batch.values, [-1.0]],
        )
        assert store.append(repeated) == 2500
        assert len(tasks) == 3
        assert store.stats().samples == 2500
    finally:
        store.close()


def test_the_writer_queue_is_bounded(tmp_path):
    writer = Writer(connect(tmp_path / "a.duckdb", tmp_path / "b.duckdb"), "w", max_queued=2)
    release, running = threading.Event(), threading.Semaphore(0)

    def slow(con: object) -> int:
        running.release()
        release.wait(30)
        return 1

    callers = [threading.Thread(target=writer.run, args=(slow,)) for _ in range(3)]
    for c in callers:
        c.start()
    assert running.acquire(timeout=30)  # the first task runs; one more is queued, the third waits
    assert writer._room._value == 0  # type: ignore[attr-defined]
    release.set()
    for c in callers:
        c.join(30)
    assert writer._room._value == 2  # type: ignore[attr-defined]
    writer.close(lambda con: con.close())
