"""Sample stores behind one narrow interface (``base.Store``); ``open_store`` picks the embedded default."""

from __future__ import annotations

import os
from pathlib import Path

from servemetrics.store.base import Cell, Reducer, Selection, SelectResult, Store, StoreStats, ValueSet

STORE_FILE = "samples.duckdb"
"""File name of the embedded sample store inside the data directory."""


def open_store(data_dir: str | os.PathLike[str]) -> Store:
    """Open (or create) the embedded DuckDB store ``<data_dir>/samples.duckdb``."""
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
