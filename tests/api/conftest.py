"""The app fixture of the API tests: write a config, build the app over it, send a key.

``serve(declarations, clock=…, store=…, gateway=…)`` (the ``serve`` fixture) parses ``declarations`` (the
YAML's ``organizations``, ``models``, ``loops`` … as a dict; ``data_dir`` is the test's ``tmp_path``),
builds the whole app with the scraper off over ``store`` (a fresh ``MemoryStore`` by default), starts it
and returns its ``TestClient``; it is stopped when the test ends. ``org(name, {key: type}, scoped=…)``
writes an organization with its API keys, ``auth(key)`` the header that sends one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.api.app import create_app
from servemetrics.api.service import Service
from servemetrics.config import parse_config
from servemetrics.registry import Registry
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store.base import Store
from servemetrics.store.memory import MemoryStore
from servemetrics.timeutil import wall_clock_ms

Serve = Callable[..., TestClient]


def org(name: str, keys: Mapping[str, str] = {}, scoped: Mapping[str, list[str]] = {}) -> dict[str, Any]:
    """An organization declaration: ``keys`` maps each raw key to its type, ``scoped`` a key to the
    model ids it is limited to."""
    api_keys = []
    for key, key_type in keys.items():
        entry: dict[str, Any] = {"key": key, "type": key_type}
        if key in scoped:
            entry["model_ids"] = scoped[key]
        api_keys.append(entry)
    return {"name": name, "api_keys": api_keys}


def auth(key: str, scheme: str = "Api-Key") -> dict[str, str]:
    """``{"Authorization": "<scheme> <key>"}``."""
    return {"Authorization": f"{scheme} {key}"}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(declarations, *, clock=wall_clock_ms, store=None, gateway=True) -> TestClient``."""
    with ExitStack() as stack:

        def start(
            declarations: Mapping[str, Any],
            *,
            clock: Callable[[], int] = wall_clock_ms,
            store: Store | None = None,
            gateway: bool = True,
        ) -> TestClient:
            config = parse_config({"data_dir": str(tmp_path), **declarations})
            store = MemoryStore() if store is None else store
            app = create_app(config, scrape=False, clock=clock, store=store, gateway=gateway)
            return stack.enter_context(TestClient(app))

        yield start


def service_over(registry: Registry, data_dir: Path) -> Service:
    """A ``Service`` around ``registry`` (wall clock, empty ``MemoryStore``) for an app built by hand with
    some routers only (``app.state.service = service_over(...)``)."""
    config = parse_config({"data_dir": str(data_dir)})
    return Service(config, registry, MemoryStore(), SelfMetrics(), wall_clock_ms)
