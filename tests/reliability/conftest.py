"""Fixtures of the reliability tests: a fresh store of each local backend (``tests/scrape/conftest.py``)."""

from __future__ import annotations

from tests.scrape.conftest import store  # noqa: F401  (the fixture)
