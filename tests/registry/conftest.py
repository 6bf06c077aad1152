"""Registry fixtures: every registry test runs on SQLite and (marked ``postgres``) on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servemetrics.registry import Registry
from tests.conftest_pg import fresh_pg_url  # `pg_url` comes from the plugin registered in tests/conftest.py


class Clock:
    """A settable clock in epoch ms for deterministic ``created_at_ms`` and default ``at_ms``."""

    def __init__(self, now_ms: int = 1_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.sqlite3'}"
    return fresh_pg_url(request.getfixturevalue("pg_url"))


@pytest.fixture
def registry(registry_url: str, clock: Clock) -> Iterator[Registry]:
    reg = Registry.open(registry_url, clock=clock)
    yield reg
    reg.close()


@pytest.fixture
def seeded(registry: Registry) -> Registry:
    """acme owns model m1 (deployments d1, d2, d3; environment production); other owns model m2 (e1)."""
    registry.tenancy.ensure_organization("acme")
    registry.tenancy.ensure_organization("other")
    registry.tenancy.ensure_model("m1", "llama", "acme")
    registry.tenancy.ensure_model("m2", "whisper", "other")
    for dep in ("d1", "d2", "d3"):
        registry.deployments.create_deployment("m1", dep, f"v-{dep}", gpu_type="H100", gpu_count=1)
    registry.deployments.create_deployment("m2", "e1", "v1")
    registry.environments.create_environment("m1", "production")
    return registry
