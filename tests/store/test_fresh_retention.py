"""Retention on a store that holds nothing yet (every fresh `serve` runs it at start)."""

from __future__ import annotations

from servemetrics.store.duckdb import DuckDBStore


def test_retention_on_a_fresh_store_drops_nothing_and_does_not_fail(tmp_path):
    store = DuckDBStore(tmp_path / "samples.duckdb")
    try:
        assert store.delete_before(1_767_225_600_000) == 0
        assert store.stats().samples == 0
    finally:
        store.close()
