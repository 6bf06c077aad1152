"""``DuckDBStore``'s state read from its files: on open (``recover_head``, ``load_state``), after a write
that rewrote sealed chunks (``load_rollups``), and the retention step (``drop_sealed_step``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from servemetrics.store.duckdb_rollups import RollupIndex
from servemetrics.store.duckdb_schema import (
    ROLLUP_MS,
    Con,
    delete_head,
    delete_series,
    drop_sealed,
    load_rollup_columns,
    read_head,
    read_sealed_until,
)
from servemetrics.store.duckdb_view import View, sort_segment

NO_TS = np.iinfo(np.int64).min
"""The ts of "no sample" (the least int64)."""


def recover_head(con: Con) -> tuple[int | None, View]:
    """The store's state on open, after dropping the ``head`` rows before ``sealed_until``.

    A seal commits chunks and ``sealed_until`` in the main file before it deletes the sealed rows
    from the head file; a crash in between leaves rows before ``sealed_until``, dropped here.
    """
    sealed_until, view = load_state(con)
    if sealed_until is not None:
        delete_head(con, sealed_until)
    return sealed_until, view


def load_state(con: Con) -> tuple[int | None, View]:
    """``sealed_until`` from ``meta`` (``None``: nothing was ever appended) and the view of the file:
    the head rows at or after it and every rollup."""
    sealed_until = read_sealed_until(con)
    floor = NO_TS if sealed_until is None else sealed_until
    return sealed_until, View(floor, (sort_segment(*read_head(con, floor)),), load_rollups(con))


def load_rollups(con: Con) -> RollupIndex:
    """Every ``rollups`` row of the file as the in-memory index."""
    return RollupIndex(load_rollup_columns(con), ROLLUP_MS, presorted=True)


def drop_sealed_step(con: Con, view: View, cut: int, gone: np.ndarray) -> tuple[View, int]:
    """Retention step: ``drop_sealed`` and the ``series`` rows of ``gone`` (series whose every sample is
    before ``cut``); the view with the rollups reloaded, and how many samples were dropped."""
    dropped = drop_sealed(con, cut)
    delete_series(con, gone)
    return replace(view, rollups=load_rollups(con)), dropped
