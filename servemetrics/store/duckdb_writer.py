"""The write side of ``DuckDBStore``: its two files on one connection, and the one thread that writes them.

As in datasette's ``Database`` (``execute_write_fn`` -> ``_execute_writes``): a ``Writer`` owns the write
connection and a queue of write tasks, functions of that connection, which its thread runs one at a
time in the order they were submitted. A caller submits a task and waits for its result; an exception
the task raises is raised again in the caller, unchanged. Readers never use the queue: they open their
own cursor (``read_cursor``), each in its own transaction.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import duckdb

from servemetrics.store.duckdb_schema import DB, HEAD_DB, HEAD_DDL

T = TypeVar("T")

ROW_GROUP_ROWS = 2048
"""DuckDB row group size of the store's main file (DuckDB's default is 122,880 rows); see ``connect``."""

MAX_QUEUED = 64
"""Write tasks queued or running at once; a caller past it waits (in its own thread) for room."""

CLOSED = "the store is closed"
"""Message of the ``RuntimeError`` raised by every entry of a closed store."""


def connect(path: Path, head_path: Path) -> duckdb.DuckDBPyConnection:
    """One connection to the main file (``DB``, small row groups) and the head file (``HEAD_DB``).

    A checkpoint rewrites every column of a row group that got rows since the previous checkpoint, the
    new copy written before the old blocks are freed, and DuckDB reuses free blocks but does not give them
    back. With DuckDB's default row groups (122,880 rows) the whole ``chunks`` table is one row group, so
    a checkpoint could rewrite all of it and leave the file up to twice the data. With 2,048-row groups a
    checkpoint rewrites only the last few. ``head`` (inserted, then deleted when sealed) would churn
    such small row groups, so it lives in a second file with DuckDB's defaults, a few MiB at most.
    Raises ``duckdb.Error`` when a file cannot be opened (e.g. held by another process).
    """
    # a copy left by a crash in ``replace_head_file``: the old head file is whole
    _remove_files(fresh_head_path(head_path))
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH {_quote(path)} AS {DB} (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
    con.execute(f"ATTACH {_quote(head_path)} AS {HEAD_DB}")
    con.execute(f"USE {DB}")
    return con


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def fresh_head_path(head_path: Path) -> Path:
    """Where ``replace_head_file`` writes the new head file before it takes the old one's place."""
    return head_path.with_name(head_path.name + ".new")


def _remove_files(path: Path) -> None:
    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)


_HEAD_NEW = "sm_head_new"


def replace_head_file(con: duckdb.DuckDBPyConnection, head_path: Path, keep_from: int) -> None:
    """Replace the head file by a fresh one holding only its rows with ts at or after ``keep_from`` (the
    sealed boundary), sorted by (series, ts): after a seal, instead of deleting the sealed rows.

    Deleting rows in place leaves their blocks free in the file, and DuckDB never gives free blocks back:
    the head file grew to 2-4x the head it held (bench/README.md, "Disk"). The copy is written and
    checkpointed as ``fresh_head_path``, the old file checkpointed (so no WAL of it is left) and detached,
    then ``os.replace`` swaps the two and the directory is synced. A crash before the swap leaves the old
    file whole (its sealed rows are dropped on open, ``recover_head``; ``connect`` removes the stray copy);
    after it, the new file holds every unsealed row. Raises ``duckdb.Error`` or ``OSError`` when a step
    fails; the head file is attached again in every case.
    """
    new = fresh_head_path(head_path)
    _remove_files(new)
    con.execute(f"ATTACH {_quote(new)} AS {_HEAD_NEW}")
    try:
        con.execute(HEAD_DDL.format(db=_HEAD_NEW))
        con.execute(
            f"INSERT INTO {_HEAD_NEW}.head SELECT * FROM {HEAD_DB}.head WHERE ts >= ? ORDER BY series_id, ts",
            [keep_from],
        )
        con.execute(f"CHECKPOINT {_HEAD_NEW}")
    finally:
        con.execute(f"DETACH {_HEAD_NEW}")
    con.execute(f"CHECKPOINT {HEAD_DB}")
    con.execute(f"DETACH {HEAD_DB}")
    try:
        if Path(f"{head_path}.wal").exists() or Path(f"{new}.wal").exists():
            raise OSError(f"a WAL of {head_path} is left after its checkpoint; the head file is kept")
        os.replace(new, head_path)
        _sync_dir(head_path.parent)
    finally:
        con.execute(f"ATTACH {_quote(head_path)} AS {HEAD_DB}")


def _sync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (POSIX: fsync the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Write the WAL of both files into the files."""
    con.execute(f"CHECKPOINT {DB}")
    con.execute(f"CHECKPOINT {HEAD_DB}")


def checkpoint_and_close(con: duckdb.DuckDBPyConnection) -> None:
    """The last write task of a store: checkpoint both files, then close the connection."""
    checkpoint(con)
    con.close()


class _Task(Generic[T]):
    """One queued write: ``fn``, and its result or exception once ``done`` is set."""

    __slots__ = ("fn", "closes", "done", "result", "error")

    def __init__(self, fn: Callable[[duckdb.DuckDBPyConnection], T], closes: bool = False) -> None:
        self.fn = fn
        self.closes = closes
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None

    def finish(self, result: T | None = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()

    def outcome(self) -> T:
        """Wait for the task; its result, or raise its exception."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class Writer:
    """The one thread that writes through ``con`` (which it owns from now on), running queued tasks in order.

    ``run(fn)`` queues ``fn(con)`` and waits for it; ``close(last)`` runs ``last(con)`` after every task
    queued before it and then stops the thread. Once closed, ``run`` raises ``RuntimeError(CLOSED)``.
    At most ``max_queued`` tasks of ``run`` are queued or running; a further ``run`` waits for room first.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, max_queued: int = MAX_QUEUED) -> None:
        self._con = con
        self._tasks: queue.Queue[_Task[Any]] = queue.Queue()
        self._room = threading.BoundedSemaphore(max_queued)
        self._submitting = threading.Lock()  # orders submissions against the end of the thread
        self._closed = False
        self._thread = threading.Thread(target=self._execute_writes, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run ``fn(con)`` on the writer thread after the tasks queued before it; return its result.

        Raises what ``fn`` raises, or ``RuntimeError(CLOSED)`` when the writer is closed.
        """
        task = _Task(fn)
        with self._room:  # not held by close: a close never waits behind the bound
            self._submit(task)
            return task.outcome()

    def read_cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor on the main file for a reader (its own transaction; any thread; close it after)."""
        cur = self._con.cursor()
        cur.execute(f"USE {DB}")
        return cur

    def close(self, last: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
        """Run ``last(con)`` after every queued task, then stop the thread; a no-op once closed.

        When ``last`` raises, the exception is raised here and the writer stays open. Called on the
        writer thread itself (from a finalizer), it queues ``last`` and returns without waiting.
        """
        task = _Task(last, closes=True)
        if not self._submit(task) or threading.current_thread() is self._thread:
            return
        task.outcome()
        self._thread.join()

    def _submit(self, task: _Task[Any]) -> bool:
        """Queue ``task``; False (a ``close``) or ``RuntimeError(CLOSED)`` (any other task) once closed."""
        with self._submitting:
            if not self._closed:
                self._tasks.put(task)
                return True
        if task.closes:
            return False
        raise RuntimeError(CLOSED)

    def _execute_writes(self) -> None:
        while not self._execute(self._tasks.get()):
            pass  # between tasks this thread holds no reference to the store (its finalizer closes it)

    def _execute(self, task: _Task[Any]) -> bool:
        """Run one task and hand over its outcome; True after a ``close`` that succeeded (the thread ends)."""
        try:
            result = task.fn(self._con)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, raised there
            task.finish(error=e)
            return False
        if task.closes:
            self._refuse_the_rest()
        task.finish(result)
        return task.closes

    def _refuse_the_rest(self) -> None:
        """Mark the writer closed and answer the tasks queued after the ``close`` that succeeded."""
        with self._submitting:
            self._closed = True
            while not self._tasks.empty():
                left = self._tasks.get_nowait()
                left.finish(error=None if left.closes else RuntimeError(CLOSED))
