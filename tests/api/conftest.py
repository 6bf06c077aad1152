"""The app fixture of the API tests: write a config, build the app over it, send a key.

``serve(declarations, clock=…, store=…, gateway=…)`` (the ``serve`` fixture) parses ``declarations`` (the
YAML's ``organizations``, ``models``, ``loops`` … as a dict; ``data_dir`` is the test's ``tmp_path``),
builds the whole app with the scraper off over ``store`` (a fresh ``MemoryStore`` by default), starts it
and returns its ``TestClient``; it is stopped when the test ends. ``org(name, {key: type}, scoped=…)``
writes an organization with its API keys, ``auth(key)`` the header that sends one (both, with
``build_app`` and ``service_over``, are plain functions of ``tests/apptools.py`` for tests elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from servemetrics.store.base import Store
from servemetrics.timeutil import wall_clock_ms
from tests.apptools import build_app

Serve = Callable[..., TestClient]


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
            app = build_app(tmp_path, declarations, clock=clock, store=store, gateway=gateway)
            return stack.enter_context(TestClient(app))

        yield start
