"""``duckdb_writer.Writer``: one thread runs the write tasks in order; errors reach the caller unchanged;
``close`` drains the queue, is idempotent, and refuses later writes; a store dropped unclosed is closed."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import duckdb
import pytest

from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.duckdb_writer import CLOSED, Writer
from tests.store.test_duckdb import T0, grid_batch


def _writer() -> Writer:
    return Writer(duckdb.connect(":memory:"), name="test-writer")


def test_tasks_run_in_order_on_one_thread_and_return_their_result() -> None:
    writer = _writer()
    seen: list[tuple[int, int | None]] = []

    def task(i: int) -> int:
        seen.append((i, threading.get_ident()))
        return i * 10

    try:
        assert [writer.run(lambda con, i=i: task(i)) for i in range(5)] == [0, 10, 20, 30, 40]
        threads = [threading.Thread(target=writer.run, args=(lambda con: task(-1),)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [i for i, _ in seen[:5]] == [0, 1, 2, 3, 4] and len(seen) == 13
        assert len({ident for _, ident in seen}) == 1 and seen[0][1] != threading.get_ident()
        assert writer.run(lambda con: con.execute("SELECT 42").fetchone()) == (42,)
    finally:
        writer.close(lambda con: con.close())


def test_an_exception_reaches_the_caller_unchanged_and_the_writer_goes_on() -> None:
    writer = _writer()
    error = KeyError("no such series")

    def fail(con: duckdb.DuckDBPyConnection) -> None:
        raise error

    try:
        with pytest.raises(KeyError) as got:
            writer.run(fail)
        assert got.value is error
        with pytest.raises(duckdb.CatalogException, match="nope"):
            writer.run(lambda con: con.execute("SELECT * FROM nope"))
        assert writer.run(lambda con: 7) == 7
    finally:
        writer.close(lambda con: con.close())


def _wait_until(cond) -> None:
    deadline = time.monotonic() + 60  # a bound on the wait, not a timing: a busy machine only waits longer
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_close_drains_the_queue_runs_last_and_refuses_later_writes() -> None:
    writer = _writer()
    started, gate = threading.Event(), threading.Event()
    order: list[str] = []

    def running(con: duckdb.DuckDBPyConnection) -> None:
        started.set()
        gate.wait()
        order.append("running")

    first = threading.Thread(target=writer.run, args=(running,))
    first.start()
    started.wait()
    queued = threading.Thread(target=writer.run, args=(lambda con: order.append("queued"),))
    queued.start()
    _wait_until(lambda: writer._tasks.qsize() == 1)
    closer = threading.Thread(target=writer.close, args=(lambda con: order.append("last"),))
    closer.start()
    _wait_until(lambda: writer._tasks.qsize() == 2)
    gate.set()
    for t in (closer, queued, first):
        t.join()
    assert order == ["running", "queued", "last"]
    writer.close(lambda con: order.append("again"))  # idempotent: nothing runs
    assert order == ["running", "queued", "last"]
    with pytest.raises(RuntimeError, match=CLOSED):
        writer.run(lambda con: None)


def test_a_close_that_fails_leaves_the_writer_open() -> None:
    writer = _writer()

    def fail(con: duckdb.DuckDBPyConnection) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        writer.close(fail)
    assert writer.run(lambda con: 1) == 1
    writer.close(lambda con: con.close())


def test_a_closed_store_refuses_writes_with_the_same_error(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.append(grid_batch(T0, 10))
    store.close()
    store.close()  # idempotent
    for call in (lambda: store.append(grid_batch(T0, 1)), lambda: store.delete_before(T0), store.checkpoint):
        with pytest.raises(RuntimeError, match=CLOSED):
            call()
    assert store.append(grid_batch(T0, 0)) == 0  # an empty batch is not a write
    again = DuckDBStore(tmp_path / "s.duckdb")
    try:
        assert again.stats().samples == len(grid_batch(T0, 10))
    finally:
        again.close()


def test_a_store_dropped_without_close_stops_its_writer(tmp_path: Path) -> None:
    store = DuckDBStore(tmp_path / "s.duckdb")
    store.append(grid_batch(T0, 10))
    name = f"duckdb-writer {store.path.name}"
    thread = next(t for t in threading.enumerate() if t.name == name)
    del store
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()
    again = DuckDBStore(tmp_path / "s.duckdb")
    try:
        assert again.stats().samples == len(grid_batch(T0, 10))
    finally:
        again.close()
