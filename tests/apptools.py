"""Building the app in a test, written once: the declarations of an organization with its keys, the
header that sends a key, the config over a data directory, the app over it, and a ``Service`` around a
registry for an app built by hand. ``tests/api/conftest.py``'s ``serve`` fixture is ``build_app`` in a
``TestClient``; tests elsewhere (``tests/loops``, ``tests/dashboard``, the e2e configs) call these."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from servemetrics.api.app import create_app
from servemetrics.api.service import Service
from servemetrics.config import Config, parse_config
from servemetrics.registry import Registry
from servemetrics.selfmetrics import SelfMetrics
from servemetrics.store.base import Store
from servemetrics.store.memory import MemoryStore
from servemetrics.timeutil import wall_clock_ms


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


def app_config(data_dir: Path, declarations: Mapping[str, Any]) -> Config:
    """The config of ``declarations`` (the YAML's sections as a dict) with ``data_dir`` as its data dir."""
    return parse_config({"data_dir": str(data_dir), **declarations})


def build_app(
    data_dir: Path,
    declarations: Mapping[str, Any],
    *,
    clock: Callable[[], int] = wall_clock_ms,
    store: Store | None = None,
    gateway: bool = True,
) -> FastAPI:
    """The whole app over ``app_config(data_dir, declarations)`` with the scraper off, over ``store``
    (a fresh ``MemoryStore`` by default); not started."""
    config = app_config(data_dir, declarations)
    store = MemoryStore() if store is None else store
    return create_app(config, scrape=False, clock=clock, store=store, gateway=gateway)


def service_over(registry: Registry, data_dir: Path) -> Service:
    """A ``Service`` around ``registry`` (wall clock, empty ``MemoryStore``) for an app built by hand with
    some routers only (``app.state.service = service_over(...)``)."""
    return Service(app_config(data_dir, {}), registry, MemoryStore(), SelfMetrics(), wall_clock_ms)
