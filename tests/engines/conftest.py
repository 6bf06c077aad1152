"""Session-scoped engine processes (``engines.py``): one Prometheus, one VictoriaMetrics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servemetrics.store.promql import Flavor
from tests.engines.engines import Engine, require


def _engine(flavor: Flavor, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    require(flavor)
    engine = Engine(flavor, tmp_path_factory.mktemp(flavor.value))
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def prometheus_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """Debian's Prometheus with the remote_write receiver and out-of-order ingestion, on loopback."""
    yield from _engine(Flavor.PROMETHEUS, tmp_path_factory)


@pytest.fixture(scope="session")
def victoriametrics_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """Debian's single-node VictoriaMetrics on loopback."""
    yield from _engine(Flavor.VICTORIAMETRICS, tmp_path_factory)
