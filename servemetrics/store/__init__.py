"""Sample stores behind one narrow interface (``base.Store``); ``open_store`` picks the embedded default
or, given ``EngineOptions``, a Prometheus-compatible engine (``prometheus.PrometheusStore``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from servemetrics.store.base import Cell, Reducer, Selection, SelectResult, Store, StoreStats, ValueSet

if TYPE_CHECKING:
    from servemetrics.store.prometheus import EngineOptions

STORE_FILE = "samples.duckdb"
"""File name of the embedded sample store inside the data directory."""


def open_store(data_dir: str | os.PathLike[str], engine: EngineOptions | None = None) -> Store:
    """Open (or create) the embedded DuckDB store ``<data_dir>/samples.duckdb``, or, with ``engine``, a
    ``PrometheusStore`` on that engine (raises ``BufferLockedError`` when its buffer is in use)."""
    if engine is not None:
        from servemetrics.store.prometheus import PrometheusStore

        return PrometheusStore(engine)
    from servemetrics.store.duckdb import DuckDBStore

    path = Path(data_dir)
    path.mkdir(parents=True, exist_ok=True)
    return DuckDBStore(path / STORE_FILE)


__all__ = [
    "STORE_FILE",
    "Cell",
    "Reducer",
    "SelectResult",
    "Selection",
    "Store",
    "StoreStats",
    "ValueSet",
    "open_store",
]
