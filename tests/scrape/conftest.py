"""Fixtures of the scraper tests: a fresh store of each local backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servemetrics.store.base import Store
from servemetrics.store.duckdb import DuckDBStore
from servemetrics.store.memory import MemoryStore


@pytest.fixture(params=["memory", "duckdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each local backend."""
    s: Store = MemoryStore() if request.param == "memory" else DuckDBStore(tmp_path / "samples.duckdb")
    yield s
    s.close()
